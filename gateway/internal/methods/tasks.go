package methods

import (
	"context"
	"encoding/json"
	"math"

	"github.com/switchboard-mcp/switchboard/gateway/internal/mcperr"
	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

// Tasks. A tools/call whose client can take a task for an answer tells
// the aggregator so (CallToolRequest.task), which makes the call a task
// when the tool runs as one; tasks/get, tasks/update, tasks/cancel and
// tasks/list are the aggregator's task RPCs for the principal at the
// route's virtual server, and the answers take the shape of the caller's
// era (see wire/tasks.go). The Legacy tasks/result waits here, polling
// the task, and asks the client for the task's input on its response
// stream as a Legacy tools/call does (askLegacyClient).

// taskRequest says whether, and how, the request's client takes a task for
// an answer to a tools/call (nil: it does not).
func taskRequest(req *Request) (*aggregatorv1.TaskRequest, *wire.Error) {
	switch req.Era {
	case mcpspec.EraModern:
		// A Modern client takes tasks by its capabilities alone: a
		// params.task it sends anyway (2025-11-25's) is left alone.
		if wire.DeclaresTasks(req.ClientCaps) {
			return &aggregatorv1.TaskRequest{}, nil
		}
	case mcpspec.EraLegacy:
		raw, ok := req.Params["task"]
		if !ok || string(raw) == "null" {
			return nil, nil
		}
		task, ok := req.Params.Object("task")
		if !ok {
			return nil, wire.InvalidParams("task must be an object")
		}
		var ttlMs int64 // 0: none asked, the configured default
		if raw, ok := task["ttl"]; ok && string(raw) != "null" {
			var ttl float64
			if json.Unmarshal(raw, &ttl) != nil || !(ttl >= 0) {
				return nil, wire.InvalidParams("task.ttl must be a number of milliseconds, at least 0")
			}
			// The aggregator caps it (tasks.maxTTL) and floors it; this
			// keeps a huge number an int64, and a TTL under a millisecond
			// (0 included) the shortest asked for rather than none.
			ttlMs = max(int64(min(ttl, math.MaxInt64/2)), 1)
		}
		return &aggregatorv1.TaskRequest{TtlMs: ttlMs, Explicit: true}, nil
	}
	return nil, nil
}

// taskID reads params.taskId, which every tasks method but tasks/list
// requires.
func taskID(params wire.Object) (string, *wire.Error) {
	id, ok := params.String("taskId")
	if !ok || id == "" {
		return "", wire.InvalidParams("taskId is required (a string)")
	}
	return id, nil
}

// wireTask is what both eras render of a task.
func wireTask(t *aggregatorv1.Task) wire.Task {
	return wire.Task{ID: t.GetTaskId(), Status: t.GetStatus(), StatusMessage: t.GetStatusMessage(),
		CreatedAt: t.GetCreatedAt().AsTime(), LastUpdatedAt: t.GetLastUpdatedAt().AsTime(),
		TTLms: t.GetTtlMs(), PollIntervalMs: t.GetPollIntervalMs(), ResultIsError: t.GetResultIsError()}
}

func malformedTask() *wire.Error {
	return wire.NewError(wire.CodeInternalError, "internal error: malformed task from the server")
}

// createdTask answers a tools/call that became task t.
func (s *Server) createdTask(req *Request, t *aggregatorv1.Task) (json.RawMessage, *wire.Error) {
	if t.GetTaskId() == "" {
		return nil, malformedTask()
	}
	out, err := wire.CreateTaskResult(wireTask(t), s.shaping(req, false))
	if err != nil {
		return nil, malformedTask()
	}
	return out, nil
}

func (s *Server) getTask(ctx context.Context, req *Request, _ Responder) (json.RawMessage, *wire.Error) {
	id, rerr := taskID(req.Params)
	if rerr != nil {
		return nil, rerr
	}
	t, rerr := s.fetchTask(ctx, req, id, false)
	if rerr != nil {
		return nil, rerr
	}
	if req.Era == mcpspec.EraLegacy {
		return wire.LegacyTask(wireTask(t)), nil
	}
	details, rerr := s.taskDetails(req, t)
	if rerr != nil {
		return nil, rerr
	}
	out, err := wire.DetailedTask(wireTask(t), details, s.shaping(req, false))
	if err != nil {
		return nil, malformedTask()
	}
	return out, nil
}

// taskDetails are what a Modern tasks/get tells of a task's status: the
// input it waits for, its result, or its error; never a requestState.
func (s *Server) taskDetails(req *Request, t *aggregatorv1.Task) (wire.Object, *wire.Error) {
	details := wire.Object{}
	switch t.GetStatus() {
	case wire.TaskInputRequired:
		raw := json.RawMessage(t.GetInputRequestsJson())
		if !json.Valid(raw) || !wire.IsObjectText(raw) {
			return nil, malformedTask()
		}
		details["inputRequests"] = raw
	case wire.TaskCompleted:
		result, err := wire.TaskCallResult([]byte(t.GetResultJson()), t.GetTaskId(), req.Era)
		if err != nil || !json.Valid(result) {
			return nil, malformedTask()
		}
		details["result"] = result
	case wire.TaskFailed:
		details.Set("error", mcperr.TaskFailed(t.GetErrorJson(), req.Era, req.ClientCaps))
	}
	return details, nil
}

// updateTask serves tasks/update: the client's answers to the task's input
// requests go to the task, and the answer is an acknowledgement only (the
// task's next state is for tasks/get).
func (s *Server) updateTask(ctx context.Context, req *Request, _ Responder) (json.RawMessage, *wire.Error) {
	id, rerr := taskID(req.Params)
	if rerr != nil {
		return nil, rerr
	}
	responses, ok := req.Params["inputResponses"]
	if !ok || !wire.IsObjectText(responses) {
		return nil, wire.InvalidParams("inputResponses is required (an object)")
	}
	rc, rerr := s.requestContext(req)
	if rerr != nil {
		return nil, rerr
	}
	req.Trail.Asked = true // the aggregator records it from here on
	_, err := s.agg.UpdateTask(ctx, &aggregatorv1.UpdateTaskRequest{Principal: req.Principal, Server: req.Server, TaskId: id,
		InputResponsesJson: string(responses), Context: rc})
	if err != nil {
		return nil, mcperr.FromError(ctx, s.log, err, req.Era, req.Method)
	}
	return s.shape(req, []byte(`{}`), false)
}

// cancelTask serves tasks/cancel: a Modern client gets an acknowledgement
// only, a Legacy one the task as cancelling left it.
func (s *Server) cancelTask(ctx context.Context, req *Request, _ Responder) (json.RawMessage, *wire.Error) {
	id, rerr := taskID(req.Params)
	if rerr != nil {
		return nil, rerr
	}
	rc, rerr := s.requestContext(req)
	if rerr != nil {
		return nil, rerr
	}
	req.Trail.Asked = true // the aggregator records it from here on
	out, err := s.agg.CancelTask(ctx, &aggregatorv1.CancelTaskRequest{Principal: req.Principal, Server: req.Server, TaskId: id, Context: rc})
	if err != nil {
		return nil, mcperr.FromError(ctx, s.log, err, req.Era, req.Method)
	}
	if req.Era == mcpspec.EraLegacy {
		if out.GetEndedBefore() {
			// 2025-11-25: a task in a terminal status cannot be
			// cancelled. The 2026-07-28 extension acknowledges any
			// cancellation: its task's status tells what happened.
			return nil, wire.InvalidParams("the task has already ended (" + out.GetTask().GetStatus() + "): it cannot be cancelled")
		}
		return wire.LegacyTask(wireTask(out.GetTask())), nil
	}
	return s.shape(req, []byte(`{}`), false)
}

// listTasks serves the Legacy tasks/list: one page of the principal's
// tasks at the route's server, newest first.
func (s *Server) listTasks(ctx context.Context, req *Request, _ Responder) (json.RawMessage, *wire.Error) {
	cursor, rerr := req.Params.Cursor()
	if rerr != nil {
		return nil, rerr
	}
	req.Trail.Asked = true // the aggregator records it from here on
	out, err := s.agg.ListTasks(ctx, &aggregatorv1.ListTasksRequest{Principal: req.Principal, Server: req.Server, Cursor: cursor})
	if err != nil {
		return nil, mcperr.FromError(ctx, s.log, err, req.Era, req.Method)
	}
	items := make([]json.RawMessage, 0, len(out.GetTasks()))
	for _, t := range out.GetTasks() {
		items = append(items, wire.LegacyTask(wireTask(t)))
	}
	return wire.Page("tasks", items, out.GetNextCursor(), s.shaping(req, false)), nil
}

// fetchTask reads task id as the request's principal sees it, within the
// request timeout; polled, as a further read for the same request
// (GetTaskRequest.polled: no second rate-limit token or audit event).
func (s *Server) fetchTask(ctx context.Context, req *Request, id string, polled bool) (*aggregatorv1.Task, *wire.Error) {
	rc, rerr := s.requestContext(req)
	if rerr != nil {
		return nil, rerr
	}
	callCtx, cancel := s.serviceCall(ctx)
	defer cancel()
	req.Trail.Asked = true // the aggregator records it from here on
	out, err := s.agg.GetTask(callCtx, &aggregatorv1.GetTaskRequest{Principal: req.Principal, Server: req.Server, TaskId: id, Context: rc, Polled: polled})
	if err != nil {
		return nil, mcperr.FromError(ctx, s.log, err, req.Era, req.Method)
	}
	if out.GetTask().GetTaskId() == "" {
		return nil, malformedTask()
	}
	return out.GetTask(), nil
}
