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

	"github.com/switchboard-mcp/switchboard/aggregator/internal/catalog"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/engine"
	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
	"github.com/switchboard-mcp/switchboard/services/ratelimit"
	"github.com/switchboard-mcp/switchboard/services/rawjson"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// The requests about a task (tasks/get, tasks/update, tasks/cancel) are
// admitted like a call of the task's tool, through the server it was
// created through (admit.go): a principal the policy no longer lets call
// the tool no longer sees its task. The task is first read from the
// indexer by its owner and server, so another principal's task, or one
// created through another server, is NOT_FOUND exactly like one that never
// existed. tasks/list (ListTasks) lists the principal's own tasks.

// maxTaskIDBytes bounds a task id a client sends.
const maxTaskIDBytes = 128

// failTask is fail for a request naming a task: the task's tool denied
// or gone (the admission's not found) is answered as a task that does not
// exist, in the same words; the audit event, recorded already, keeps
// which it was.
func (s *Server) failTask(ctx context.Context, method string, err error) error {
	if errors.Is(err, engine.ErrNotFound) {
		err = errTaskNotFound
	}
	return s.fail(ctx, method, err)
}

// GetTask answers tasks/get.
func (s *Server) GetTask(ctx context.Context, req *aggregatorv1.GetTaskRequest) (*aggregatorv1.GetTaskResponse, error) {
	resp, err := s.getTask(ctx, req)
	return resp, s.failTask(ctx, "GetTask", err)
}

func (s *Server) getTask(ctx context.Context, req *aggregatorv1.GetTaskRequest) (*aggregatorv1.GetTaskResponse, error) {
	rec, call, err := s.readTask(ctx, req.GetServer(), req.GetTaskId())
	if err != nil {
		return refuseTask[*aggregatorv1.GetTaskResponse](ctx, s, config.RateMethodTasksGet, audit.KindTaskGet, req.GetServer(), err)
	}
	// A task that ended is answered from its record, its backend up or
	// not; one its backend runs is read there.
	// A polled read is part of a request the gateway admitted with its
	// first read; no other caller's claim of that could be checked.
	caller, _ := svcauth.CallerFrom(ctx)
	polled := req.GetPolled() && caller.IsEdge()
	if call.BackendTaskID != "" && !mcpspec.TaskEnded(rec.GetStatus()) {
		r := proxiedAdmission(config.RateMethodTasksGet, audit.KindTaskGet, req.GetServer(), rec, call, req.GetContext().GetSubjectToken())
		r.accounted = polled
		return serve(ctx, s, r, func(a *admitted) (*aggregatorv1.GetTaskResponse, error) {
			now, err := s.followBackendTask(a, rec, call)
			if err != nil {
				return nil, err
			}
			return &aggregatorv1.GetTaskResponse{Task: taskOf(call, now, true)}, nil
		})
	}
	r := taskAdmission(config.RateMethodTasksGet, audit.KindTaskGet, req.GetServer(), rec, call)
	r.accounted = polled
	return serve(ctx, s, r, func(*admitted) (*aggregatorv1.GetTaskResponse, error) {
		return &aggregatorv1.GetTaskResponse{Task: taskOf(call, rec, true)}, nil
	})
}

// CancelTask answers tasks/cancel: a task that has not ended is cancelled
// at once, and its call stopped (here, or at the next lease renewal of the
// replica running it).
func (s *Server) CancelTask(ctx context.Context, req *aggregatorv1.CancelTaskRequest) (*aggregatorv1.CancelTaskResponse, error) {
	resp, err := s.cancelTask(ctx, req)
	return resp, s.failTask(ctx, "CancelTask", err)
}

func (s *Server) cancelTask(ctx context.Context, req *aggregatorv1.CancelTaskRequest) (*aggregatorv1.CancelTaskResponse, error) {
	rec, call, err := s.readTask(ctx, req.GetServer(), req.GetTaskId())
	if err != nil {
		return refuseTask[*aggregatorv1.CancelTaskResponse](ctx, s, config.RateMethodTasksCancel, audit.KindTaskCancel, req.GetServer(), err)
	}
	r := taskAdmission(config.RateMethodTasksCancel, audit.KindTaskCancel, req.GetServer(), rec, call)
	ended := mcpspec.TaskEnded(rec.GetStatus())
	bid := call.BackendTaskID
	if ended {
		bid = "" // nothing to stop at the backend, up or not
	}
	if bid != "" {
		r = proxiedAdmission(config.RateMethodTasksCancel, audit.KindTaskCancel, req.GetServer(), rec, call, req.GetContext().GetSubjectToken())
	}
	return serve(ctx, s, r, func(a *admitted) (*aggregatorv1.CancelTaskResponse, error) {
		if bid != "" {
			// The backend's word on its task stays the backend's: a
			// cancel it refuses (it may have ended) is not an error here.
			if _, err := s.backendTaskRequest(a, "tasks/cancel", bid, nil); err != nil {
				s.log.InfoContext(ctx, "the backend did not take the cancellation of its task", "backend", rec.GetBackend(), "err", err)
			}
		}
		resp, err := s.tasks.store.CancelTask(ctx, &indexerv1.CancelTaskRequest{Ref: ref(ctx, rec.GetKey(), req.GetServer()),
			StatusMessage: "cancelled by the client"})
		if err != nil {
			return nil, storeError(err)
		}
		s.tasks.stop(rec.GetKey(), anyRound, errTaskEnded)
		s.releaseHeldRound(a, rec)
		return &aggregatorv1.CancelTaskResponse{Task: taskOf(call, resp.GetRecord(), true), EndedBefore: ended}, nil
	})
}

// UpdateTask answers tasks/update. The answers that complete a round
// start the next one here, with this request's credentials.
func (s *Server) UpdateTask(ctx context.Context, req *aggregatorv1.UpdateTaskRequest) (*aggregatorv1.UpdateTaskResponse, error) {
	resp, err := s.updateTask(ctx, req)
	return resp, s.failTask(ctx, "UpdateTask", err)
}

func (s *Server) updateTask(ctx context.Context, req *aggregatorv1.UpdateTaskRequest) (*aggregatorv1.UpdateTaskResponse, error) {
	refuse := func(err error) (*aggregatorv1.UpdateTaskResponse, error) {
		return refuseTask[*aggregatorv1.UpdateTaskResponse](ctx, s, config.RateMethodTasksUpdate, audit.KindTaskUpdate, req.GetServer(), err)
	}
	answers := req.GetInputResponsesJson()
	switch {
	case !isObject([]byte(answers)):
		return refuse(invalidArgument("input_responses_json must be a JSON object"))
	case len(answers) > config.MaxTaskInputBytes:
		return refuse(invalidArgument(fmt.Sprintf("inputResponses may be at most %d KiB", config.MaxTaskInputBytes>>10)))
	case !hasMember([]byte(answers)):
		return refuse(invalidArgument("inputResponses must answer at least one input request"))
	}
	rec, call, err := s.readTask(ctx, req.GetServer(), req.GetTaskId())
	if err != nil {
		return refuse(err)
	}
	if bid := call.BackendTaskID; bid != "" && call.LegacyBackend {
		// Refused once the task's tool is admitted: a task whose tool the
		// caller may no longer call is missing, as for every request.
		r := taskAdmission(config.RateMethodTasksUpdate, audit.KindTaskUpdate, req.GetServer(), rec, call)
		r.prepare = ranBy(rec, call, func(*admitted) error {
			return invalidArgument("this task's backend (2025-11-25) takes no answers through tasks/update")
		})
		return serve(ctx, s, r, func(*admitted) (*aggregatorv1.UpdateTaskResponse, error) { return nil, nil })
	} else if bid != "" {
		r := proxiedAdmission(config.RateMethodTasksUpdate, audit.KindTaskUpdate, req.GetServer(), rec, call, req.GetContext().GetSubjectToken())
		return serve(ctx, s, r, func(a *admitted) (*aggregatorv1.UpdateTaskResponse, error) {
			answers := map[string]json.RawMessage{"inputResponses": json.RawMessage(req.GetInputResponsesJson())}
			if _, err := s.backendTaskRequest(a, "tasks/update", bid, answers); err != nil {
				return nil, err
			}
			return &aggregatorv1.UpdateTaskResponse{Task: taskOf(call, rec, false)}, nil
		})
	}
	// The next round is the same call with the answers: it is admitted
	// as a call of the tool would be, under tasks/update's name.
	next := &aggregatorv1.CallToolRequest{Principal: svcauth.PrincipalFrom(ctx), Name: rec.GetTool(), Server: req.GetServer(),
		ArgumentsJson: string(call.Arguments), Task: &aggregatorv1.TaskRequest{TtlMs: call.TTLMs},
		Context: &aggregatorv1.RequestContext{ClientCapabilitiesJson: string(call.ClientCapabilities), SubjectToken: req.GetContext().GetSubjectToken()}}
	var tc toolCall
	r := toolCallAdmission(next, &tc, false)
	r.method, r.trail, r.args = config.RateMethodTasksUpdate, audit.KindTaskUpdate, ""
	r.prepare = ranBy(rec, call, r.prepare)
	return serve(ctx, s, r, func(a *admitted) (*aggregatorv1.UpdateTaskResponse, error) {
		t := s.tasks
		resp, err := t.store.AnswerTask(ctx, &indexerv1.AnswerTaskRequest{Ref: ref(ctx, rec.GetKey(), req.GetServer()),
			InputResponsesJson: req.GetInputResponsesJson(), Runner: t.id, LeaseExpiresAt: timestamppb.New(time.Now().Add(leaseDuration))})
		if err != nil {
			return nil, storeError(err)
		}
		after := resp.GetRecord()
		if resp.GetResume() {
			if err := s.resumeTask(a, next, &tc, after); err != nil {
				return nil, err
			}
		}
		return &aggregatorv1.UpdateTaskResponse{Task: taskOf(call, after, false)}, nil
	})
}

// resumeTask runs the next round of a task whose answers are all in.
func (s *Server) resumeTask(a *admitted, next *aggregatorv1.CallToolRequest, tc *toolCall, rec *indexerv1.TaskRecord) error {
	t := s.tasks
	answers, err := backendResponses(rec.GetRound()-1, rec.GetInputResponsesJson())
	if err != nil {
		return err
	}
	next.InputResponsesJson, next.RequestState = answers, rec.GetRequestState()
	// The round's params carry the answers: built again.
	if err := prepareToolCall(next, a, tc); err != nil {
		return err
	}
	cancel, done := s.startRound(a, next, tc, rec.GetExpiresAt().AsTime())
	t.hold(rec.GetKey(), rec.GetRound(), cancel)
	go t.finish(rec.GetKey(), rec.GetRound(), rec.GetExpiresAt().AsTime(), done, s.afterRound(a, next, time.Now(), rec.GetKey(), rec.GetRound()))
	return nil
}

// ListTasks answers tasks/list: the principal's tasks in the server.
func (s *Server) ListTasks(ctx context.Context, req *aggregatorv1.ListTasksRequest) (*aggregatorv1.ListTasksResponse, error) {
	resp, err := s.listTasks(ctx, req)
	return resp, s.fail(ctx, "ListTasks", err)
}

func (s *Server) listTasks(ctx context.Context, req *aggregatorv1.ListTasksRequest) (resp *aggregatorv1.ListTasksResponse, err error) {
	if s.tasks == nil {
		return &aggregatorv1.ListTasksResponse{}, nil
	}
	start := time.Now()
	r := admission{method: config.RateMethodTasksList, trail: audit.KindTaskList, server: req.GetServer()}
	defer func() {
		outcome, detail := admissionOutcome(resp, err)
		s.auditAdmission(ctx, r, start, "", outcome, detail)
	}()
	// Refusals take their token as every admission's do (refused), so a
	// client cannot fill the trail with them faster than its limit.
	if req.GetPageSize() > 100 || len(req.GetCursor()) > 1024 {
		return nil, s.refused(ctx, r, invalidArgument("page_size is at most 100 and cursor at most 1,024 bytes"))
	}
	// A server that is not configured is NOT_FOUND, as for every RPC
	// that names one, before the store is asked.
	if _, _, err := s.e.ServerSnapshot(req.GetServer()); err != nil {
		return nil, s.refused(ctx, r, err)
	}
	if s.limiter != nil && !operatorRead(ctx, r) {
		if err := s.limit(ctx, ratelimit.Request{Method: config.RateMethodTasksList, Server: req.GetServer()}); err != nil {
			return nil, err
		}
	}
	owner := svcauth.PrincipalFrom(ctx).GetSubject()
	if owner == "" {
		// The anonymous principal's tasks are every anonymous client's:
		// a list would hand each client the others' ids, which, 256
		// random bits each, are all that guards them.
		return &aggregatorv1.ListTasksResponse{}, nil
	}
	page, err := s.tasks.store.ListTasks(ctx, &indexerv1.ListTasksRequest{Owner: owner,
		Server: req.GetServer(), PageSize: req.GetPageSize(), Cursor: req.GetCursor()})
	if status.Code(err) == codes.InvalidArgument && req.GetCursor() != "" {
		// The server and the owner are the aggregator's to know good
		// (above, and svcauth's bounds): what the store refuses is the
		// client's cursor.
		return nil, catalog.ErrInvalidCursor
	}
	if err != nil {
		return nil, storeError(err)
	}
	out := &aggregatorv1.ListTasksResponse{NextCursor: page.GetNextCursor()}
	for _, rec := range page.GetRecords() {
		call, err := storedCall(rec)
		if err != nil {
			continue
		}
		rec.Tool = s.taskTool(req.GetServer(), rec, call)
		// As tasks/get: a task whose tool the principal may no longer
		// call through the server is not shown.
		a, err := s.route(ctx, req.GetServer(), catalog.KindTools, rec.GetTool())
		if err != nil && !errors.Is(err, engine.ErrBackendDown) || a == nil || ranBy(rec, call, nil)(a) != nil {
			continue
		}
		out.Tasks = append(out.Tasks, taskOf(call, rec, false))
	}
	return out, nil
}

// readTask reads the caller's task by id through server; anything but
// its own task is errTaskNotFound, which the request is refused with
// through its admission (refuseTask).
func (s *Server) readTask(ctx context.Context, server, id string) (*indexerv1.TaskRecord, taskCall, error) {
	if s.tasks == nil || id == "" || len(id) > maxTaskIDBytes {
		return nil, taskCall{}, errTaskNotFound
	}
	resp, err := s.tasks.store.GetTask(ctx, &indexerv1.GetTaskRequest{Ref: ref(ctx, taskKey(id), server)})
	if err != nil {
		return nil, taskCall{}, storeError(err)
	}
	rec := resp.GetRecord()
	call, err := storedCall(rec)
	if err != nil {
		return nil, taskCall{}, err
	}
	rec.Tool = s.taskTool(server, rec, call)
	return rec, call, nil
}

// refuseTask refuses a request about a task, through the admission of
// its method, with err: readTask's (a task that is not the caller's is
// refused like a missing item, and takes its token from the limits per
// principal, so that a client probing task ids is held to them), or the
// request's own. Like every refusal it leaves its event in the trail.
func refuseTask[T any](ctx context.Context, s *Server, method string, trail audit.Kind, server string, err error) (T, error) {
	r := admission{method: method, trail: trail, server: server, refusal: err}
	return serve(ctx, s, r, func(*admitted) (T, error) {
		var none T
		return none, err
	})
}

// taskTool is the name the task's tool goes by in server now: the one the
// task was made under, or the tool's new name after a reload renamed it,
// found by its backend and the backend's own name for it. A request about
// the task is admitted under it, as a call of that tool would be; ranBy
// refuses one whose name no longer names the tool.
func (s *Server) taskTool(server string, rec *indexerv1.TaskRecord, call taskCall) string {
	name := rec.GetTool()
	if call.Tool == "" {
		return name
	}
	snap, _, err := s.e.ServerSnapshot(server)
	if err != nil {
		return name
	}
	same := func(it *catalog.Item[*aggregatorv1.Tool]) bool {
		return it.Backend == rec.GetBackend() && it.Original == call.Tool
	}
	if it, ok := snap.Tool(name); ok && same(it) {
		return name
	}
	for i := range snap.Tools {
		if same(&snap.Tools[i]) {
			return snap.Tools[i].Key
		}
	}
	return name
}

// storedCall reads the call a task record keeps, once for every use of it
// a request makes.
func storedCall(rec *indexerv1.TaskRecord) (taskCall, error) {
	var call taskCall
	if err := json.Unmarshal([]byte(rec.GetCallJson()), &call); err != nil || call.ID == "" {
		return taskCall{}, fmt.Errorf("task %s: its stored call is unreadable", rec.GetKey())
	}
	return call, nil
}

// ref names the caller's task under key in server.
func ref(ctx context.Context, key, server string) *indexerv1.TaskRef {
	return &indexerv1.TaskRef{Key: key, Owner: svcauth.PrincipalFrom(ctx).GetSubject(), Server: server}
}

// taskAdmission admits a request about the task rec as a call of its
// tool, which sends the backend nothing.
func taskAdmission(method string, trail audit.Kind, server string, rec *indexerv1.TaskRecord, call taskCall) admission {
	return admission{method: method, trail: trail, server: server, kind: catalog.KindTools, key: rec.GetTool(), taskState: true,
		prepare: ranBy(rec, call, nil)}
}

// ranBy refuses a request about the task rec, as for a task that does not
// exist, once rec's tool belongs to another backend than the one that ran
// it (a reload, or a backend that stopped listing it under the priority
// strategy): the task's id, its state and the caller's credentials are
// that backend's, and would go to the other. So it does once the name
// names another tool of the same backend (a reload's rename): the task
// would be authorized, and its next round sent, as that tool. next, if
// set, follows.
func ranBy(rec *indexerv1.TaskRecord, call taskCall, next func(*admitted) error) func(*admitted) error {
	return func(a *admitted) error {
		if a.owner != rec.GetBackend() || call.Tool != "" && (a.tool == nil || a.tool.Original != call.Tool) {
			return errTaskNotFound
		}
		if next != nil {
			return next(a)
		}
		return nil
	}
}

// taskOf is the API's task of call as rec stands; detailed adds what goes
// with its status (input requests still unanswered, result, error).
func taskOf(call taskCall, rec *indexerv1.TaskRecord, detailed bool) *aggregatorv1.Task {
	// The TTL is the one the task was given, exactly (its expiry is
	// counted from the aggregator's clock, its creation from the
	// database's).
	t := &aggregatorv1.Task{TaskId: call.ID, Status: rec.GetStatus(), StatusMessage: rec.GetStatusMessage(),
		CreatedAt: rec.GetCreatedAt(), LastUpdatedAt: rec.GetUpdatedAt(), PollIntervalMs: int64(rec.GetPollIntervalMs()),
		Tool: rec.GetTool(), TtlMs: call.TTLMs}
	if rec.GetStatus() == mcpspec.TaskCompleted {
		t.ResultIsError = rec.GetStatusMessage() == toolErrorMessage || resultIsError([]byte(rec.GetResultJson()))
	}
	if !detailed {
		return t
	}
	switch rec.GetStatus() {
	case "input_required":
		t.InputRequestsJson = outstanding(rec.GetInputRequestsJson(), rec.GetInputResponsesJson())
	case "completed":
		t.ResultJson = rec.GetResultJson()
	case "failed":
		t.ErrorJson = rec.GetErrorJson()
	}
	return t
}

// outstanding are the requests of a round not answered yet.
func outstanding(requests, answers string) string {
	var req, ans map[string]json.RawMessage
	if json.Unmarshal([]byte(requests), &req) != nil {
		return "{}"
	}
	_ = json.Unmarshal([]byte(answers), &ans) // none yet: empty
	for k := range ans {
		delete(req, k)
	}
	b, _ := json.Marshal(req) // raw values that parsed
	return string(b)
}

// RunTaskLeases renews the leases of the rounds this replica runs until
// ctx ends, and stops those whose task ended elsewhere (cancelled through
// another replica, expired).
func (s *Server) RunTaskLeases(ctx context.Context) {
	if s.tasks == nil {
		return
	}
	t := s.tasks
	tick := time.NewTicker(leaseRenewal)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		t.mu.Lock()
		keys := make([]string, 0, len(t.running))
		rounds := make(map[string]uint32, len(t.running))
		for k, h := range t.running {
			keys = append(keys, k)
			rounds[k] = h.round
		}
		t.mu.Unlock()
		for len(keys) > 0 {
			batch := keys[:min(len(keys), maxLeaseBatch)]
			keys = keys[len(batch):]
			resp, err := t.store.RenewTaskLeases(ctx, &indexerv1.RenewTaskLeasesRequest{Runner: t.id, Keys: batch,
				LeaseExpiresAt: timestamppb.New(time.Now().Add(leaseDuration))})
			if err != nil {
				t.log.WarnContext(ctx, "renewing the leases of running tasks failed", "tasks", len(batch), "err", err)
				continue
			}
			for _, k := range resp.GetEndedKeys() {
				t.stop(k, rounds[k], errTaskEnded)
			}
		}
	}
}

// maxLeaseBatch is RenewTaskLeases' bound on keys.
const maxLeaseBatch = 1000

// hasMember reports whether the JSON object b has a member.
func hasMember(b []byte) bool {
	found := false
	rawjson.Each(b, func(rawjson.Member) bool { found = true; return false })
	return found
}
