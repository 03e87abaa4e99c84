package edge

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// The test aggregator's tasks: the kit's fake aggregator serves the
// catalog and the other calls; taskAggregator adds the task RPCs of the
// aggregator's API and two tools that run as tasks. They are not listed,
// so the listings the other tests check stay as they are:
//   - beta_job runs as a task when the call carries a TaskRequest, and
//     answers at once otherwise (taskSupport "optional");
//   - beta_batch runs only as a task: a call without a TaskRequest is
//     FAILED_PRECONDITION with reason ERROR_REASON_TASK_REQUIRED.
//
// A task is created working; a test moves it on with setTask. A task is
// its creator's, at the server it was created through: another principal
// or server finds none, as the aggregator promises.
type taskAggregator struct {
	*testkit.FakeAggregator
	b *backends
}

// taskCreated is the fixed creation time of every test task, with
// milliseconds, so that their rendering shows.
var taskCreated = time.Date(2026, 7, 28, 10, 30, 0, 123_000_000, time.UTC)

// heldTask is one task of the fake and whose it is.
type heldTask struct {
	task            *aggregatorv1.Task
	subject, server string
}

// taskState is the fake's record of tasks and of the task requests it got.
type taskState struct {
	mu    sync.Mutex
	next  int
	tasks map[string]*heldTask
	order []string // creation order
	// calls are the CallToolRequests of the task tools; gets, updates,
	// cancels and lists the task RPCs' requests, in order.
	calls   []*aggregatorv1.CallToolRequest
	gets    []*aggregatorv1.GetTaskRequest
	updates []*aggregatorv1.UpdateTaskRequest
	cancels []*aggregatorv1.CancelTaskRequest
	lists   []*aggregatorv1.ListTasksRequest
	// onUpdate, when set, moves a task on when its input is answered.
	onUpdate func(t *aggregatorv1.Task, responses string)
}

// registerTasks registers the task-serving aggregator on s.
func (b *backends) registerTasks(s grpc.ServiceRegistrar) {
	aggregatorv1.RegisterAggregatorServiceServer(s, &taskAggregator{FakeAggregator: b.agg, b: b})
}

func (a *taskAggregator) CallTool(ctx context.Context, req *aggregatorv1.CallToolRequest) (*aggregatorv1.CallToolResponse, error) {
	name := req.GetName()
	if name != "beta_job" && name != "beta_batch" {
		return a.FakeAggregator.CallTool(ctx, req)
	}
	ts := &a.b.tasks
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.calls = append(ts.calls, proto.CloneOf(req))
	if req.GetTask() == nil {
		if name == "beta_batch" {
			return nil, apierr.New(codes.FailedPrecondition, commonv1.ErrorReason_ERROR_REASON_TASK_REQUIRED, "beta_batch runs only as a task")
		}
		return &aggregatorv1.CallToolResponse{ResultType: "complete", ResultJson: textResult("done at once")}, nil
	}
	ts.next++
	ttl := req.GetTask().GetTtlMs()
	if ttl == 0 {
		ttl = 600_000
	}
	t := &aggregatorv1.Task{TaskId: fmt.Sprintf("t1.task-%d", ts.next), Status: "working", Tool: name,
		CreatedAt: timestamppb.New(taskCreated), LastUpdatedAt: timestamppb.New(taskCreated), TtlMs: ttl, PollIntervalMs: 20}
	if ts.tasks == nil {
		ts.tasks = map[string]*heldTask{}
	}
	ts.tasks[t.TaskId] = &heldTask{task: t, subject: svcauth.PrincipalFrom(ctx).GetSubject(), server: req.GetServer()}
	ts.order = append(ts.order, t.TaskId)
	return &aggregatorv1.CallToolResponse{ResultType: "task", Task: proto.CloneOf(t), Backend: "beta"}, nil
}

// heldLocked is the caller's task id at server, or NOT_FOUND.
func (ts *taskState) heldLocked(ctx context.Context, server, id string) (*heldTask, error) {
	h, ok := ts.tasks[id]
	if !ok || h.subject != svcauth.PrincipalFrom(ctx).GetSubject() || h.server != server {
		return nil, apierr.New(codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND, "unknown task "+id)
	}
	return h, nil
}

func (a *taskAggregator) GetTask(ctx context.Context, req *aggregatorv1.GetTaskRequest) (*aggregatorv1.GetTaskResponse, error) {
	ts := &a.b.tasks
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.gets = append(ts.gets, proto.CloneOf(req))
	h, err := ts.heldLocked(ctx, req.GetServer(), req.GetTaskId())
	if err != nil {
		return nil, err
	}
	return &aggregatorv1.GetTaskResponse{Task: proto.CloneOf(h.task)}, nil
}

func (a *taskAggregator) UpdateTask(ctx context.Context, req *aggregatorv1.UpdateTaskRequest) (*aggregatorv1.UpdateTaskResponse, error) {
	ts := &a.b.tasks
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.updates = append(ts.updates, proto.CloneOf(req))
	h, err := ts.heldLocked(ctx, req.GetServer(), req.GetTaskId())
	if err != nil {
		return nil, err
	}
	if ts.onUpdate != nil {
		ts.onUpdate(h.task, req.GetInputResponsesJson())
	}
	// As the aggregator's: the task without what goes with its status
	// (input requests, result, error), which tasks/get reads.
	t := proto.CloneOf(h.task)
	t.ResultJson, t.ErrorJson, t.InputRequestsJson = "", "", ""
	return &aggregatorv1.UpdateTaskResponse{Task: t}, nil
}

func (a *taskAggregator) CancelTask(ctx context.Context, req *aggregatorv1.CancelTaskRequest) (*aggregatorv1.CancelTaskResponse, error) {
	ts := &a.b.tasks
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.cancels = append(ts.cancels, proto.CloneOf(req))
	h, err := ts.heldLocked(ctx, req.GetServer(), req.GetTaskId())
	if err != nil {
		return nil, err
	}
	h.task.Status, h.task.StatusMessage = "cancelled", "cancelled by request"
	return &aggregatorv1.CancelTaskResponse{Task: proto.CloneOf(h.task)}, nil
}

// ListTasks pages through the caller's tasks at the server, newest first,
// one a page, with the next task's id as the cursor.
func (a *taskAggregator) ListTasks(ctx context.Context, req *aggregatorv1.ListTasksRequest) (*aggregatorv1.ListTasksResponse, error) {
	ts := &a.b.tasks
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.lists = append(ts.lists, proto.CloneOf(req))
	var mine []*aggregatorv1.Task
	for i := len(ts.order) - 1; i >= 0; i-- {
		if h, err := ts.heldLocked(ctx, req.GetServer(), ts.order[i]); err == nil {
			mine = append(mine, h.task)
		}
	}
	start := 0
	if c := req.GetCursor(); c != "" {
		start = -1
		for i, t := range mine {
			if t.TaskId == c {
				start = i
			}
		}
		if start < 0 {
			return nil, apierr.New(codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_CURSOR, "invalid cursor")
		}
	}
	resp := &aggregatorv1.ListTasksResponse{}
	if start < len(mine) {
		// Listed tasks carry no result or error.
		t := proto.CloneOf(mine[start])
		t.ResultJson, t.ErrorJson, t.InputRequestsJson = "", "", ""
		resp.Tasks = []*aggregatorv1.Task{t}
	}
	if start+1 < len(mine) {
		resp.NextCursor = mine[start+1].TaskId
	}
	return resp, nil
}

// setTask changes task id as the aggregator would as it runs.
func (b *backends) setTask(id string, change func(t *aggregatorv1.Task)) {
	b.tasks.mu.Lock()
	defer b.tasks.mu.Unlock()
	change(b.tasks.tasks[id].task)
}

// taskRequests returns copies of what the task RPCs and task tools got.
func (b *backends) taskRequests() (calls []*aggregatorv1.CallToolRequest, gets []*aggregatorv1.GetTaskRequest, updates []*aggregatorv1.UpdateTaskRequest, cancels []*aggregatorv1.CancelTaskRequest, lists []*aggregatorv1.ListTasksRequest) {
	b.tasks.mu.Lock()
	defer b.tasks.mu.Unlock()
	return append(calls, b.tasks.calls...), append(gets, b.tasks.gets...), append(updates, b.tasks.updates...),
		append(cancels, b.tasks.cancels...), append(lists, b.tasks.lists...)
}
