package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
	"github.com/switchboard-mcp/switchboard/services/rawjson"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// Tasks of a backend that has its own. A Modern backend that advertises
// the tasks extension runs the tasks of its tools itself: a call from a
// client that can take a task declares the extension to it, and when the
// backend answers with a task, Switchboard keeps a task of its own that
// names the backend's (in the indexer, like any task), and answers the
// client with that. tasks/get, tasks/update and tasks/cancel of it are
// sent to the backend, from any replica, naming the backend's task in
// Mcp-Name, as the extension asks of routing intermediaries. The backend's
// task id never reaches the client: it is not Switchboard's to hand out,
// and only Switchboard's ids are bound to their owner and server. What the
// backend last said is kept on the task, so that a task that ended is
// answered without the backend, and listings show its status.

const tasksExtension = mcpspec.ExtensionTasks

// jsonrpcInvalidParams is what a backend answers a task it does not know.
const jsonrpcInvalidParams = -32602

// backendRunsTasks reports whether b runs tasks of its own.
func backendRunsTasks(b *backend.Client) bool {
	if !b.SpeaksModern() {
		return false
	}
	caps := b.Capabilities()
	if caps == nil {
		return false
	}
	_, ok := caps.Extensions[tasksExtension]
	return ok
}

// legacyTaskTool reports whether a 2025-11-25 backend runs the tasks of
// the tool whose advertised definition is def: its listing says
// execution.taskSupport optional or required (the revision's tool-level
// declaration; go-sdk keeps no capabilities.tasks). It is read as
// clients read it, member names matching case-sensitively: an
// "Execution" is no declaration.
func legacyTaskTool(b *backend.Client, def string) bool {
	if b.SpeaksModern() {
		return false
	}
	var d struct {
		Execution struct {
			TaskSupport string `json:"taskSupport"`
		} `json:"execution"`
	}
	return backend.DecodeAsSDK([]byte(def), &d) == nil && (d.Execution.TaskSupport == "optional" || d.Execution.TaskSupport == "required")
}

// backendTaskState is a task as a backend's CreateTaskResult and tasks/get
// show it, in either revision's names (2025-11-25's CreateTaskResult
// wraps it in task, and names ttl and pollInterval without the unit).
type backendTaskState struct {
	ResultType     string          `json:"resultType"`
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage"`
	TTLMs          *int64          `json:"ttlMs"`
	PollIntervalMs int64           `json:"pollIntervalMs"`
	InputRequests  json.RawMessage `json:"inputRequests"`
	Result         json.RawMessage `json:"result"`
	Error          json.RawMessage `json:"error"`
	// 2025-11-25.
	Task         *backendTaskState `json:"task"`
	TTL          *int64            `json:"ttl"`
	PollInterval int64             `json:"pollInterval"`
}

// normalized is the task in 2026-07-28's names, unwrapped.
func (t *backendTaskState) normalized() *backendTaskState {
	if t.Task != nil {
		inner := t.Task.normalized()
		inner.ResultType = "task"
		return inner
	}
	if t.TTLMs == nil {
		t.TTLMs = t.TTL
	}
	if t.PollIntervalMs == 0 {
		t.PollIntervalMs = t.PollInterval
	}
	return t
}

// proxyTask calls a backend that runs tasks, declaring the extension the
// client declared; a task the backend makes becomes one of Switchboard's.
func (s *Server) proxyTask(ctx context.Context, a *admitted, req *aggregatorv1.CallToolRequest, tc *toolCall) (*aggregatorv1.CallToolResponse, error) {
	t := s.tasks
	legacy := !a.b.SpeaksModern()
	if legacy {
		// 2025-11-25 asks for a task in the call's params.
		ttl := t.ttl(req.GetTask().GetTtlMs()).Milliseconds()
		params, err := rawjson.WithMember(tc.call.Params, "task", fmt.Appendf(nil, `{"ttl":%d}`, ttl))
		if err != nil {
			return nil, err
		}
		tc.call.Params = params
		// The raw path, whatever the client declared: the held path's
		// go-sdk call has no params.task.
		tc.plain = true
	} else {
		tc.call.ClientCapabilities = withTasksExtension([]byte(req.GetContext().GetClientCapabilitiesJson()))
	}
	resp, err := s.runToolCall(a.ctx, req, tc, nil)
	if err != nil {
		return nil, err
	}
	// A member of the wrong type (a fractional ttlMs) fails the decoding
	// but leaves the others read: a result that says it is a task is one,
	// and is never passed on, where its id would reach the client and the
	// backend's task run on with nobody to answer for it.
	var raw backendTaskState
	decodeErr := json.Unmarshal([]byte(resp.GetResultJson()), &raw)
	bt := *raw.normalized()
	if bt.ResultType != "task" {
		return resp, nil
	}
	if idOK := bt.TaskID != "" && len(bt.TaskID) <= maxTaskIDBytes*8; decodeErr != nil || !idOK {
		if idOK {
			_, _ = s.backendTaskRequest(a, "tasks/cancel", bt.TaskID, nil)
		}
		return nil, backend.ErrProtocolViolation
	}
	// The backend's TTL, within Switchboard's cap.
	var askedMs int64
	if bt.TTLMs != nil {
		askedMs = *bt.TTLMs
	}
	ttl := cappedTTL(askedMs, time.Duration(t.cfg.MaxTTL), time.Duration(t.cfg.MaxTTL))
	poll := max(bt.PollIntervalMs, time.Duration(t.cfg.PollInterval).Milliseconds())
	id, key := newTaskID()
	call := taskCall{TTLMs: ttl.Milliseconds(), ID: id, BackendTaskID: bt.TaskID, LegacyBackend: legacy, Tool: tc.tool.Original,
		ClientCapabilities: rawOrNil(req.GetContext().GetClientCapabilitiesJson())}
	callJSON, err := json.Marshal(call)
	if err != nil {
		return nil, err
	}
	// A task starts working, or cancelled: what goes with any other
	// status the backend gave (input_required, completed, failed) comes
	// with tasks/get, and an unknown one is not passed on.
	status := "working"
	if bt.Status == "cancelled" {
		status = "cancelled"
	}
	rec := &indexerv1.TaskRecord{Key: key, Owner: svcauth.PrincipalFrom(ctx).GetSubject(), Server: req.GetServer(),
		Tool: req.GetName(), Backend: a.b.Name(), Status: status, StatusMessage: bt.StatusMessage,
		ExpiresAt: timestamppb.New(time.Now().Add(ttl)), PollIntervalMs: uint32(min(poll, 60_000)), CallJson: string(callJSON)}
	stored, err := t.create(ctx, rec)
	if err != nil {
		// The backend's task runs on; cancel it, as nobody can reach it.
		s.backendTaskRequest(a, "tasks/cancel", bt.TaskID, nil)
		return nil, err
	}
	return &aggregatorv1.CallToolResponse{ResultType: "task", Backend: rec.Backend, Task: taskOf(call, stored, false)}, nil
}

// withTasksExtension is caps, a client capabilities object, declaring the
// tasks extension (which the client declared: it asked for a task).
func withTasksExtension(caps []byte) []byte {
	var c map[string]json.RawMessage
	if json.Unmarshal(caps, &c) != nil || c == nil {
		c = map[string]json.RawMessage{}
	}
	var ext map[string]json.RawMessage
	_ = json.Unmarshal(c["extensions"], &ext)
	if ext == nil {
		ext = map[string]json.RawMessage{}
	}
	ext[tasksExtension] = json.RawMessage(`{}`)
	c["extensions"], _ = json.Marshal(ext)
	out, _ := json.Marshal(c)
	return out
}

// backendTaskRequest sends a tasks method for the backend's task id,
// with params beyond taskId, and returns the backend's task.
func (s *Server) backendTaskRequest(a *admitted, method, backendID string, more map[string]json.RawMessage) (*backendTaskState, error) {
	res, err := s.backendTaskCall(a, method, backendID, more)
	if err != nil {
		return nil, err
	}
	var bt backendTaskState
	if err := json.Unmarshal([]byte(res.JSON), &bt); err != nil {
		return nil, backend.ErrProtocolViolation
	}
	return bt.normalized(), nil
}

// backendTaskCall sends a tasks method for the backend's task id, with
// more params beyond taskId (more is the caller's to change), within the
// backend's timeout, and returns the backend's result.
func (s *Server) backendTaskCall(a *admitted, method, backendID string, more map[string]json.RawMessage) (*backend.Result, error) {
	if more == nil {
		more = map[string]json.RawMessage{}
	}
	more["taskId"], _ = json.Marshal(backendID)
	body, err := json.Marshal(more)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(a.ctx, a.b.Timeout())
	defer cancel()
	res, err := a.b.Call(ctx, &backend.Call{Method: method, Name: backendID, Params: body,
		ClientCapabilities: []byte(`{"extensions":{"` + tasksExtension + `":{}}}`)})
	if err != nil {
		return nil, err
	}
	// What the backend says of its task is kept on Switchboard's record:
	// redacted as what is kept (backend.Client.RedactKept).
	res.JSON = a.b.RedactKept(ctx, res.JSON)
	return res, nil
}

// proxiedAdmission admits a request about a backend's task: it is sent
// to the backend, with the caller's credentials.
func proxiedAdmission(method string, trail audit.Kind, server string, rec *indexerv1.TaskRecord, call taskCall, subjectToken string) admission {
	r := taskAdmission(method, trail, server, rec, call)
	r.taskState, r.subjectToken = false, subjectToken
	return r
}

// followBackendTask reads the backend's task and keeps what it says on
// Switchboard's; a task that ended is answered from there.
func (s *Server) followBackendTask(a *admitted, rec *indexerv1.TaskRecord, call taskCall) (*indexerv1.TaskRecord, error) {
	backendID := call.BackendTaskID
	if mcpspec.TaskEnded(rec.GetStatus()) {
		return rec, nil
	}
	bt, err := s.backendTaskRequest(a, "tasks/get", backendID, nil)
	var perr *backend.ProtocolError
	if errors.As(err, &perr) && perr.Code == jsonrpcInvalidParams || errors.Is(err, backend.ErrMalformedRequest) {
		// The backend no longer knows its task (it restarted, or dropped
		// it): the task cannot end any other way.
		bt, err = &backendTaskState{Status: "failed", StatusMessage: "the backend no longer has this task",
			Error: json.RawMessage(`{"code":-32603,"message":"the backend no longer has this task"}`)}, nil
	}
	if err != nil {
		return nil, err
	}
	if call.LegacyBackend {
		if bt, err = s.legacyOutcome(a, backendID, bt); err != nil {
			return nil, err
		}
	}
	adv, err := s.tasks.keptState(rec.GetKey(), bt)
	if err != nil {
		return nil, err
	}
	if adv.Status == rec.GetStatus() && adv.StatusMessage == rec.GetStatusMessage() && adv.InputRequestsJson == rec.GetInputRequestsJson() {
		return rec, nil
	}
	resp, err := s.tasks.store.AdvanceTask(a.ctx, adv)
	if status.Code(err) == codes.InvalidArgument {
		// Past a bound of the store's that keptState does not know: the
		// task fails saying so, rather than every poll failing.
		resp, err = s.tasks.store.AdvanceTask(a.ctx, unkeptOutcome(rec.GetKey(), "", 0))
	}
	if err != nil {
		return nil, storeError(err)
	}
	return resp.GetRecord(), nil
}

// keptState is what Switchboard keeps of the state a backend reported
// for its task under key. What the task cannot keep (questions that are
// not an object, or past their bound; a result or an error that is not an
// object; a result past aggregator.tasks.maxResultBytes) fails it saying
// why, so that a backend's mistake ends its task instead of making every
// poll of it fail.
func (t *taskRunner) keptState(key string, bt *backendTaskState) (*indexerv1.AdvanceTaskRequest, error) {
	adv := &indexerv1.AdvanceTaskRequest{Key: key, Status: bt.Status, StatusMessage: bt.StatusMessage}
	unkept := func(what string) (*indexerv1.AdvanceTaskRequest, error) {
		adv.Status, adv.StatusMessage = "failed", "the backend's task could not be kept"
		adv.InputRequestsJson, adv.ResultJson = "", ""
		adv.ErrorJson = t.keptError(jsonrpcInternalError, "the backend's task "+what, nil)
		return adv, nil
	}
	switch bt.Status {
	case "input_required":
		if !nonEmptyObject(bt.InputRequests) {
			return unkept("asked for input without questions Switchboard can relay")
		}
		if len(bt.InputRequests) > config.MaxTaskInputBytes {
			return unkept(fmt.Sprintf("asked questions of %d bytes, more than a task keeps (%d)", len(bt.InputRequests), config.MaxTaskInputBytes))
		}
		adv.InputRequestsJson = string(bt.InputRequests)
	case "completed":
		if !rawjson.StartsObject(bt.Result) || !json.Valid(bt.Result) {
			return unkept("completed without a result")
		}
		if len(bt.Result) > t.cfg.MaxResultBytes {
			return unkept(fmt.Sprintf("has a result of %d bytes, larger than a task keeps (aggregator.tasks.maxResultBytes)", len(bt.Result)))
		}
		adv.ResultJson = string(bt.Result)
		if resultIsError(bt.Result) {
			// The marker a page of tasks/list reads, which holds no
			// results: with the backend's own message the list called
			// completed a task tasks/get called failed (2025-11-25).
			adv.StatusMessage = toolErrorMessage
		}
	case "failed":
		var e struct {
			Code    *int64          `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		}
		if !rawjson.StartsObject(bt.Error) || json.Unmarshal(bt.Error, &e) != nil || e.Code == nil {
			return unkept("failed without an error")
		}
		adv.ErrorJson = t.keptError(*e.Code, e.Message, e.Data)
	case "working", "cancelled":
	default:
		return nil, backend.ErrProtocolViolation
	}
	return adv, nil
}

// nonEmptyObject reports whether b is a JSON object with a member.
func nonEmptyObject(b json.RawMessage) bool {
	m, err := rawjson.Object(b)
	return err == nil && len(m) > 0
}

// legacyOutcome completes what a 2025-11-25 backend's tasks/get said: the
// result or error of a task that ended comes from tasks/result, and its
// questions (input_required) come on tasks/result's stream, which this
// path cannot relay to the client, so the task says it waits.
func (s *Server) legacyOutcome(a *admitted, backendID string, bt *backendTaskState) (*backendTaskState, error) {
	switch bt.Status {
	case "completed", "failed":
		// tasks/result of a task that ended: its result, or the
		// backend's JSON-RPC error.
		res, err := s.backendTaskCall(a, "tasks/result", backendID, nil)
		var perr *backend.ProtocolError
		switch {
		case errors.As(err, &perr):
			bt.Status, bt.Error = "failed", json.RawMessage(s.tasks.taskError(err))
		case err != nil:
			return nil, err
		default:
			bt.Result = json.RawMessage(res.JSON)
			if bt.Status == "failed" {
				// 2025-11-25 calls a task whose call reported a tool
				// error failed, and its tasks/result is that result
				// (isError): kept as the result it is, as a plain call's
				// would be, not failed for want of an error.
				bt.Status = "completed"
			}
		}
	case "input_required":
		bt.Status, bt.StatusMessage = "working", "the backend waits for input, which Switchboard does not relay for a 2025-11-25 backend's own task"
	}
	return bt, nil
}
