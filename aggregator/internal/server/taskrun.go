package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	"github.com/switchboard-mcp/switchboard/services/backenderr"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/rawjson"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
	"github.com/switchboard-mcp/switchboard/services/textcut"
)

// Tasks Switchboard runs. A tools/call of a tool whose override sets
// taskSupport, from a client that can take a task (CallToolRequest.task),
// runs detached from the client's request on the replica that admitted it:
//
//  1. the task is stored in the indexer (CreateTask), working, before the
//     call starts and the client hears of it. For a tool whose override
//     sets taskAfterInput, the call starts first: if it ends within
//     firstRoundWait asking for input (a multi-round-trip
//     input_required), that is the answer and no task is made (the
//     client retries as for any call, and the retry may become the
//     task); otherwise the task is stored then, working, or already
//     ended when the round ended within the wait;
//  2. the client gets the task;
//  3. the round runs on under a lease this replica renews every
//     leaseRenewal; its end is stored (AdvanceTask): completed, failed, or
//     input_required with the backend's input requests, whose keys are
//     made unique over the task's life by the round's number;
//  4. answers come through any replica (tasks/update, UpdateTask); the one
//     whose answers complete a round runs the next under its own lease.
//
// A replica that stops takes its leases with it: the indexer fails a task
// whose lease lapsed instead of resuming it, because a tool call may not
// be idempotent. Cancelling a task ends its round's call at once on the
// replica running it, and at its next renewal elsewhere.

const (
	// firstRoundWait is how long a call that may become a task is given to
	// end, or to ask for input, before the task is made.
	firstRoundWait = 250 * time.Millisecond
	// leaseDuration and leaseRenewal: a lease outlives two renewals that
	// fail.
	leaseDuration = 30 * time.Second
	leaseRenewal  = 10 * time.Second
	// advanceTimeout bounds storing a round's end.
	advanceTimeout = 10 * time.Second
	// taskIDPrefix versions the form of task ids.
	taskIDPrefix = "t1."
)

var (
	errTaskRequired     = errors.New("this tool runs only as a task: call it as a client that takes tasks")
	errTaskNotSupported = errors.New("this tool does not run as a task: call it without asking for one")
	errTasksFull        = errors.New("the principal holds as many tasks as it may (aggregator.tasks.maxPerPrincipal), or the cluster does (maxTasks); try again once some expire")
	errTaskNotFound     = errors.New("task not found")
	errTasksUnavailable = errors.New("task store unavailable")
)

// taskRunner keeps the tasks of one aggregator replica.
type taskRunner struct {
	store indexerv1.ClusterStateServiceClient
	cfg   config.Tasks
	// id names this replica as the runner of its tasks' rounds.
	id  string
	log *slog.Logger

	mu sync.Mutex
	// running is the round of each task this replica runs, by task key.
	running map[string]heldRound
	// unanswered are the timers failing the tasks whose rounds this
	// replica left waiting for their client's answers (failUnanswered),
	// by task key.
	unanswered map[string]*time.Timer
}

// WithTasks makes calls of task-supporting tools tasks, kept in store
// under cfg (config.Tasks with its defaults); runner names this replica.
// Without it, those calls run as any other.
func (s *Server) WithTasks(store indexerv1.ClusterStateServiceClient, cfg config.Tasks, runner string) *Server {
	s.tasks = &taskRunner{store: store, cfg: cfg, id: runner, log: s.log, running: map[string]heldRound{}}
	return s
}

// taskRoute is how an admitted call runs: as any call, as a task
// Switchboard runs, or as a task its backend runs (taskproxy.go).
type taskRoute int

const (
	noTask taskRoute = iota
	switchboardTask
	backendTask
)

// taskRouteOf says how an admitted call runs. A 2026-07-28 backend that
// runs tasks itself runs them for every tool; otherwise the tool's override
// decides, and without one, a 2025-11-25 backend whose listing of the tool
// says it takes tasks runs them (taskproxy.go). A call whose client also
// asked for its notifications (a streamed call) becomes a task all the
// same, as the client asked: the task's own notifications are not
// relayed, as it runs past the request that made it.
func (s *Server) taskRouteOf(a *admitted, req *aggregatorv1.CallToolRequest, tc *toolCall, forwarded bool) taskRoute {
	switch {
	case s.tasks == nil || req.GetTask() == nil || forwarded:
		return noTask
	case backendRunsTasks(a.b):
		return backendTask
	case tc.tool.Override.TaskSupport() != "":
		return switchboardTask
	case legacyTaskTool(a.b, tc.tool.Msg.GetDefinitionJson()):
		return backendTask
	}
	return noTask
}

// taskCall is what the next round of a task's call needs, kept with the
// task (TaskRecord.call_json); never a credential.
// TTLMs comes first: taskOf reads it without decoding the rest.
type taskCall struct {
	TTLMs int64  `json:"ttlMs"`
	ID    string `json:"id"`
	// BackendTaskID names the backend's own task, for a backend that runs
	// tasks itself (taskproxy.go); empty for a task Switchboard runs.
	BackendTaskID string `json:"backendTaskId,omitempty"`
	// LegacyBackend marks a backend task of a 2025-11-25 backend.
	LegacyBackend bool `json:"legacyBackend,omitempty"`
	// Tool is the backend's own name of the task's tool: a request about
	// the task is refused once its advertised name (the record's) names
	// another tool (ranBy). Empty in tasks made before it was kept.
	Tool               string          `json:"tool,omitempty"`
	Arguments          json.RawMessage `json:"arguments,omitempty"`
	ClientCapabilities json.RawMessage `json:"clientCapabilities,omitempty"`
}

// newTaskID mints an unguessable task id and its key.
func newTaskID() (id, key string) {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	id = taskIDPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	return id, taskKey(id)
}

// taskKey is the key the indexer keeps a task under.
func taskKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// roundOutcome is how a round of a task's call ended.
type roundOutcome struct {
	resp *aggregatorv1.CallToolResponse
	err  error
}

// startRound runs an admitted call detached from the client's request
// (its values, the caller's credentials among them, are kept), until its
// tool's timeout, the task's expiry or a cancellation ends it. Its
// outcome is redacted as what is kept (backend.Client.RedactKept).
func (s *Server) startRound(a *admitted, req *aggregatorv1.CallToolRequest, tc *toolCall, expires time.Time) (context.CancelCauseFunc, <-chan roundOutcome) {
	ctx, stop := context.WithDeadline(context.WithoutCancel(a.ctx), expires)
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan roundOutcome, 1)
	go func() {
		defer stop()
		resp, err := s.runToolCall(ctx, req, tc, nil)
		if resp != nil {
			// The outcome is kept, in the cluster's database, and shown
			// to operators: the caller's own exchanged token, which a
			// plain call's result keeps for the caller, leaves it.
			resp.ResultJson = a.b.RedactKept(ctx, resp.GetResultJson())
		}
		done <- roundOutcome{resp, err}
	}()
	return cancel, done
}

// startTask runs an admitted call as a task (see above).
func (s *Server) startTask(ctx context.Context, a *admitted, req *aggregatorv1.CallToolRequest, tc *toolCall) (*aggregatorv1.CallToolResponse, error) {
	t := s.tasks
	ttl := t.ttl(req.GetTask().GetTtlMs())
	now := time.Now()
	id, key := newTaskID()
	call := taskCall{ID: id, Arguments: json.RawMessage(req.GetArgumentsJson()), Tool: tc.tool.Original,
		ClientCapabilities: rawOrNil(req.GetContext().GetClientCapabilitiesJson()), TTLMs: ttl.Milliseconds()}
	callJSON, err := json.Marshal(call)
	if err != nil {
		return nil, err
	}
	if len(callJSON) > config.MaxTaskCallBytes {
		// Refused before the call starts: the task could not be kept.
		return nil, invalidArgument(fmt.Sprintf("a task keeps at most %d KiB of its call's arguments; call the tool without a task, or with less", config.MaxTaskCallBytes>>10))
	}
	rec := &indexerv1.TaskRecord{Key: key, Owner: svcauth.PrincipalFrom(ctx).GetSubject(), Server: req.GetServer(),
		Tool: req.GetName(), Backend: a.b.Name(), Status: "working", ExpiresAt: timestamppb.New(now.Add(ttl)),
		PollIntervalMs: uint32(time.Duration(t.cfg.PollInterval).Milliseconds()), CallJson: string(callJSON)}
	made := func(stored *indexerv1.TaskRecord) *aggregatorv1.CallToolResponse {
		return &aggregatorv1.CallToolResponse{ResultType: "task", Backend: rec.Backend, Task: taskOf(call, stored, false)}
	}
	if !tc.tool.Override.TaskAfterInput() {
		// Stored before the call starts: a client never hears of a task
		// that any replica could not answer for.
		rec.Runner, rec.LeaseExpiresAt = t.id, timestamppb.New(now.Add(leaseDuration))
		stored, err := t.create(ctx, rec)
		if err != nil {
			return nil, err
		}
		cancel, done := s.startRound(a, req, tc, now.Add(ttl))
		t.hold(key, 0, cancel)
		go t.finish(key, 0, now.Add(ttl), done, s.afterRound(a, req, now, key, 0))
		return made(stored), nil
	}
	cancel, done := s.startRound(a, req, tc, now.Add(ttl))
	timer := time.NewTimer(firstRoundWait)
	defer timer.Stop()
	select {
	case out := <-done:
		cancel(nil)
		if out.err == nil && out.resp.GetResultType() == "input_required" {
			return out.resp, nil
		}
		t.settle(rec, 0, out)
		stored, err := t.create(ctx, rec)
		if err != nil {
			// The call ran: its result is not lost for want of a task.
			return out.resp, out.err
		}
		s.taskEnded(a, req, now)(rec.GetStatus(), out)
		return made(stored), nil
	case <-timer.C:
	case <-ctx.Done():
		// The client went away: the call goes on, as any task's does,
		// and is kept as a task (its id is the client's to have lost).
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(context.WithoutCancel(ctx), detachedStoreTimeout)
		defer stop()
	}
	rec.Runner, rec.LeaseExpiresAt = t.id, timestamppb.New(time.Now().Add(leaseDuration))
	t.hold(key, 0, cancel)
	stored, err := t.create(ctx, rec)
	if err != nil {
		t.release(key, 0)
		// The call started and may have acted: it runs to its end, and
		// its outcome is the answer, as a plain call's would be, where
		// the task could not be kept.
		out := <-done
		cancel(nil)
		return out.resp, out.err
	}
	go t.finish(key, 0, now.Add(ttl), done, s.afterRound(a, req, now, key, 0))
	return made(stored), nil
}

// detachedStoreTimeout bounds storing the task of a call whose client went
// away while it started.
const detachedStoreTimeout = 10 * time.Second

// ttl is the TTL of a new task: what the client asked for, or the
// default, at least minTaskTTL, within the cap.
func (t *taskRunner) ttl(askedMs int64) time.Duration {
	limit := time.Duration(t.cfg.MaxTTL)
	return min(max(cappedTTL(askedMs, time.Duration(t.cfg.DefaultTTL), limit), minTaskTTL), limit)
}

// minTaskTTL is the shortest TTL a task gets, whatever its client asks
// (unless aggregator.tasks.maxTTL is shorter): one of a few milliseconds
// expired before its client could poll it, or even before the store took
// it (refused as malformed). A receiver may choose the TTL, and says
// which it chose.
const minTaskTTL = 10 * time.Second

// cappedTTL is askedMs milliseconds, or def when not positive, at most
// limit. The cap applies before the conversion: a client's (or a
// backend's) number of milliseconds past about 292 years overflows a
// Duration and would wrap to a negative or tiny TTL.
func cappedTTL(askedMs int64, def, limit time.Duration) time.Duration {
	if askedMs <= 0 {
		return min(def, limit)
	}
	return time.Duration(min(askedMs, limit.Milliseconds())) * time.Millisecond
}

// create stores a new task.
func (t *taskRunner) create(ctx context.Context, rec *indexerv1.TaskRecord) (*indexerv1.TaskRecord, error) {
	resp, err := t.store.CreateTask(ctx, &indexerv1.CreateTaskRequest{Record: rec,
		Limits: &indexerv1.TaskLimits{PerOwner: uint32(t.cfg.MaxPerPrincipal), Total: uint32(t.cfg.MaxTasks)}})
	if err != nil {
		return nil, storeError(err)
	}
	return resp.GetRecord(), nil
}

// storeError is the error of a failed request to the task store.
func storeError(err error) error {
	switch status.Code(err) {
	case codes.NotFound:
		return errTaskNotFound
	case codes.ResourceExhausted:
		if apierr.Reason(err) == commonv1.ErrorReason_ERROR_REASON_TASKS_FULL {
			return errTasksFull
		}
	case codes.Canceled, codes.DeadlineExceeded:
		return err
	case codes.InvalidArgument:
		// The store's bounds, which the requests are checked against
		// first: the request's fault, not an outage to retry.
		return invalidArgument("the task store refused the request as larger than a task may keep, or malformed")
	}
	return fmt.Errorf("%w: %w", errTasksUnavailable, err)
}

// hold and release keep the cancel of the round this replica runs.
// unkeptOutcome fails the task under key (its round, run by runner) whose
// outcome the store refused to keep.
func unkeptOutcome(key, runner string, round uint32) *indexerv1.AdvanceTaskRequest {
	return &indexerv1.AdvanceTaskRequest{Key: key, Runner: runner, Round: round, Status: "failed",
		StatusMessage: "the call's outcome could not be kept",
		ErrorJson:     `{"code":-32603,"message":"the call's outcome is larger than a task keeps"}`}
}

// settle fills rec with how a round ended: input_required with its
// requests (keys prefixed by the round), completed with the result, or
// failed with the JSON-RPC error.
func (t *taskRunner) settle(rec *indexerv1.TaskRecord, round uint32, out roundOutcome) {
	if out.err != nil {
		rec.Status, rec.ErrorJson = "failed", t.taskError(out.err)
		rec.StatusMessage = "the call failed"
		return
	}
	result := []byte(out.resp.GetResultJson())
	if out.resp.GetResultType() == "input_required" {
		var shape struct {
			InputRequests map[string]json.RawMessage `json:"inputRequests"`
			RequestState  string                     `json:"requestState"`
		}
		if json.Unmarshal(result, &shape) == nil && len(shape.InputRequests) > 0 {
			prefixed := make(map[string]json.RawMessage, len(shape.InputRequests))
			for k, v := range shape.InputRequests {
				prefixed[roundKey(round, k)] = v
			}
			requests, _ := json.Marshal(prefixed) // raw values that parsed
			if len(requests) > config.MaxTaskInputBytes || len(shape.RequestState) > config.MaxTaskRequestStateBytes {
				// The store would refuse the round: the task fails
				// saying why, rather than when its lease lapses.
				rec.Status = "failed"
				rec.ErrorJson = fmt.Sprintf(`{"code":-32603,"message":"the backend's questions (%d bytes) or state (%d bytes) are larger than a task keeps (%d and %d)"}`,
					len(requests), len(shape.RequestState), config.MaxTaskInputBytes, config.MaxTaskRequestStateBytes)
				return
			}
			rec.Status, rec.InputRequestsJson, rec.RequestState = "input_required", string(requests), shape.RequestState
			rec.StatusMessage = "the call needs input"
			return
		}
		rec.Status, rec.ErrorJson = "failed", `{"code":-32603,"message":"the backend asked for input in a form Switchboard cannot relay"}`
		return
	}
	if len(result) > t.cfg.MaxResultBytes {
		rec.Status = "failed"
		rec.ErrorJson = fmt.Sprintf(`{"code":-32603,"message":"the result of %d bytes is larger than a task keeps (aggregator.tasks.maxResultBytes)"}`, len(result))
		return
	}
	rec.Status, rec.ResultJson = "completed", string(result)
	if resultIsError(result) {
		rec.StatusMessage = toolErrorMessage
	}
}

// toolErrorMessage is the status message of a task completed with a tool
// error (isError): the record says so where its result is not read (a
// page of tasks/list), and 2025-11-25 calls such a task failed.
const toolErrorMessage = "the tool reported an error"

// resultIsError reports whether a CallToolResult is a tool error.
func resultIsError(result []byte) bool {
	isError, _ := rawjson.Get(result, "isError")
	return string(isError) == "true"
}

// rawOrNil is s as raw JSON, nil when empty.
func rawOrNil(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// roundKey is the key of a backend's input request of round: unique over
// the task's life, as the tasks extension wants, where a backend may use
// the same key in two rounds.
func roundKey(round uint32, key string) string { return fmt.Sprintf("%d.%s", round, key) }

// backendResponses are a round's answers under the backend's own keys.
func backendResponses(round uint32, answers string) (string, error) {
	var in map[string]json.RawMessage
	if err := json.Unmarshal([]byte(answers), &in); err != nil {
		return "", err
	}
	prefix := roundKey(round, "")
	out := make(map[string]json.RawMessage, len(in))
	for k, v := range in {
		if len(k) > len(prefix) && k[:len(prefix)] == prefix {
			out[k[len(prefix):]] = v
		}
	}
	b, err := json.Marshal(out)
	return string(b), err
}

// taskError is the JSON-RPC error object a failed round keeps: the
// backend's own error, or the one the gateway would have answered the
// call with (code -32603, the client-safe message and its reason).
func (t *taskRunner) taskError(err error) string {
	st := toStatus(context.Background(), t.log, "task", err)
	if be, ok := backenderr.From(st); ok {
		return t.keptError(be.GetCode(), be.GetMessage(), json.RawMessage(be.GetDataJson()))
	}
	msg := status.Convert(st).Message()
	switch {
	case errors.Is(err, errTaskEnded):
		msg = "the task ended"
	case errors.Is(err, errHeldCallGone):
		// The plain call's advice (call again without requestState) is
		// no task client's to follow.
		msg = "the backend's call no longer waits for the answers (its input wait passed, or the aggregator replica holding it stopped); call the tool again"
	}
	return t.keptError(jsonrpcInternalError, msg, nil)
}

// keptError is the JSON-RPC error object a task keeps. A result and an
// error are bounded alike (aggregator.tasks.maxResultBytes): past it the
// error keeps its code and the start of its message, without data.
func (t *taskRunner) keptError(code int64, message string, data json.RawMessage) string {
	obj := map[string]any{"code": code, "message": message}
	if len(data) > 0 && json.Valid(data) {
		obj["data"] = data
	}
	b, _ := json.Marshal(obj)
	if len(b) <= t.cfg.MaxResultBytes {
		return string(b)
	}
	kept := textcut.Prefix(message, 1024)
	if kept != message {
		kept += "…"
	}
	b, _ = json.Marshal(map[string]any{"code": code,
		"message": fmt.Sprintf("%s (the error of %d bytes is larger than a task keeps: aggregator.tasks.maxResultBytes)", kept, len(b))})
	return string(b)
}
