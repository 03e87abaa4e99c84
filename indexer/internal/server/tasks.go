package server

import (
	"context"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// The MCP tasks the aggregators run (tasks.proto): one handler per RPC,
// each checking its request (taskrequests.go) and who may make it, then
// asking the store, whose changes are the contract's (store.Tasks).

// Who may call the task RPCs, besides the allow lists: a credential that
// asserts principals (an aggregator's) acts for any owner; one that may not
// only for its own principal (the owner is the principal's subject, which
// it must have), as for audit events: it may read and cancel its
// principal's tasks, and runs none (methodAccess refuses it CreateTask,
// AnswerTask, AdvanceTask and RenewTaskLeases).
var errTaskOwnerNotAllowed = errors.New("this service credential may not assert principals: it names its own principal's tasks only")

func ownerAllowed(ctx context.Context, owner string) error {
	caller, _ := svcauth.CallerFrom(ctx)
	if caller.AssertPrincipals || caller.Bound.GetSubject() != "" && owner == caller.Bound.GetSubject() {
		return nil
	}
	return errTaskOwnerNotAllowed
}

// CreateTask stores a new task.
func (s *Server) CreateTask(ctx context.Context, req *indexerv1.CreateTaskRequest) (*indexerv1.CreateTaskResponse, error) {
	err := s.checkReady()
	var t store.Task
	if err == nil {
		t, err = s.newTask(req.GetRecord())
	}
	if err == nil {
		limits := store.TaskLimits{PerOwner: int(req.GetLimits().GetPerOwner()), Total: int(req.GetLimits().GetTotal())}
		t, err = s.Store.CreateTask(ctx, t, limits)
	}
	if err != nil {
		return nil, s.toStatus(ctx, "CreateTask", err)
	}
	return &indexerv1.CreateTaskResponse{Record: taskProto(t)}, nil
}

// GetTask reads a task.
func (s *Server) GetTask(ctx context.Context, req *indexerv1.GetTaskRequest) (*indexerv1.GetTaskResponse, error) {
	ref, err := s.taskRef(ctx, req.GetRef())
	var t store.Task
	if err == nil {
		t, err = s.Store.GetTask(ctx, ref)
	}
	if err != nil {
		return nil, s.toStatus(ctx, "GetTask", err)
	}
	return &indexerv1.GetTaskResponse{Record: taskProto(t)}, nil
}

// Task list pages: 50 tasks unless asked, at most 100.
const (
	defaultTaskPage = 50
	maxTaskPage     = 100
)

// ListTasks pages through an owner's tasks in one server, newest first.
func (s *Server) ListTasks(ctx context.Context, req *indexerv1.ListTasksRequest) (*indexerv1.ListTasksResponse, error) {
	resp, err := s.listTasks(ctx, req)
	if err != nil {
		return nil, s.toStatus(ctx, "ListTasks", err)
	}
	return resp, nil
}

func (s *Server) listTasks(ctx context.Context, req *indexerv1.ListTasksRequest) (*indexerv1.ListTasksResponse, error) {
	if err := s.checkReady(); err != nil {
		return nil, err
	}
	if err := checkTaskNames(req.GetOwner(), req.GetServer()); err != nil {
		return nil, err
	}
	size, err := pageSize(req.GetPageSize(), defaultTaskPage, maxTaskPage)
	if err != nil {
		return nil, err
	}
	var after *store.TaskPosition
	if c := req.GetCursor(); c != "" {
		pos, err := parseTaskCursor(c)
		if err != nil {
			return nil, err
		}
		after = &pos
	}
	if err := ownerAllowed(ctx, req.GetOwner()); err != nil {
		return nil, err
	}
	// One more than the page tells whether another page follows.
	tasks, err := s.Store.ListTasks(ctx, req.GetOwner(), req.GetServer(), after, size+1)
	if err != nil {
		return nil, err
	}
	resp := &indexerv1.ListTasksResponse{}
	if len(tasks) > size {
		tasks = tasks[:size]
		resp.NextCursor = taskCursor(tasks[size-1].Position())
	}
	for _, t := range tasks {
		// A page carries no task's payloads (result, error, questions,
		// answers, state: GetTask reads them): a page of tasks with
		// results of megabytes each would pass any message's bound.
		rec := taskProto(t)
		rec.ResultJson, rec.ErrorJson, rec.InputRequestsJson, rec.InputResponsesJson, rec.RequestState = "", "", "", "", ""
		resp.Records = append(resp.Records, rec)
	}
	return resp, nil
}

// A task list cursor is the position of the page's last task,
// "<created_at in unix microseconds>.<key>" in unpadded URL-safe base64.
func taskCursor(p store.TaskPosition) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(p.CreatedAt.UnixMicro(), 10) + "." + p.Key))
}

func parseTaskCursor(c string) (store.TaskPosition, error) {
	bad := invalidArgument("cursor is not one ListTasks returned")
	if len(c) > 128 {
		return store.TaskPosition{}, bad
	}
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return store.TaskPosition{}, bad
	}
	us, key, ok := strings.Cut(string(raw), ".")
	micros, err := strconv.ParseInt(us, 10, 64)
	if !ok || err != nil || !validTaskKey(key) || !cursorTime(micros) {
		return store.TaskPosition{}, bad
	}
	return store.TaskPosition{CreatedAt: time.UnixMicro(micros), Key: key}, nil
}

// cursorTime reports whether micros, a cursor's time, is one a row can
// have (a timestamp of years 1 to 9999): a forged one past PostgreSQL's
// range would overflow on its way there and page from nowhere.
func cursorTime(micros int64) bool {
	return timestamppb.New(time.UnixMicro(micros)).CheckValid() == nil
}

// AdvanceTask is a runner's change of its task.
func (s *Server) AdvanceTask(ctx context.Context, req *indexerv1.AdvanceTaskRequest) (*indexerv1.AdvanceTaskResponse, error) {
	err := s.checkReady()
	var a store.TaskAdvance
	if err == nil {
		a, err = taskAdvance(req)
	}
	var t store.Task
	var applied bool
	if err == nil {
		t, applied, err = s.Store.AdvanceTask(ctx, a)
	}
	if err != nil {
		return nil, s.toStatus(ctx, "AdvanceTask", err)
	}
	return &indexerv1.AdvanceTaskResponse{Record: taskProto(t), Applied: applied}, nil
}

// AnswerTask records a client's answers to an input_required task.
func (s *Server) AnswerTask(ctx context.Context, req *indexerv1.AnswerTaskRequest) (*indexerv1.AnswerTaskResponse, error) {
	ref, err := s.taskRef(ctx, req.GetRef())
	a := store.TaskAnswer{Ref: ref, InputResponsesJSON: req.GetInputResponsesJson(), Runner: req.GetRunner()}
	if err == nil {
		err = checkInputJSON("input_responses_json", a.InputResponsesJSON, true)
	}
	if err == nil {
		err = checkRunner(a.Runner)
	}
	if err == nil {
		a.LeaseExpiresAt, err = s.taskLease(req.GetLeaseExpiresAt())
	}
	var t store.Task
	var resume bool
	if err == nil {
		t, resume, err = s.Store.AnswerTask(ctx, a)
	}
	if err != nil {
		return nil, s.toStatus(ctx, "AnswerTask", err)
	}
	return &indexerv1.AnswerTaskResponse{Record: taskProto(t), Resume: resume}, nil
}

// CancelTask cancels a task that has not ended.
func (s *Server) CancelTask(ctx context.Context, req *indexerv1.CancelTaskRequest) (*indexerv1.CancelTaskResponse, error) {
	ref, err := s.taskRef(ctx, req.GetRef())
	if err == nil {
		err = checkTaskText("status_message", req.GetStatusMessage(), maxTaskStatusMessageBytes)
	}
	var t store.Task
	if err == nil {
		t, err = s.Store.CancelTask(ctx, ref, req.GetStatusMessage())
	}
	if err != nil {
		return nil, s.toStatus(ctx, "CancelTask", err)
	}
	return &indexerv1.CancelTaskResponse{Record: taskProto(t)}, nil
}

// maxRenewedTasks bounds the keys of one RenewTaskLeases.
const maxRenewedTasks = 1000

// RenewTaskLeases keeps a runner's tasks its own and names those that
// ended.
func (s *Server) RenewTaskLeases(ctx context.Context, req *indexerv1.RenewTaskLeasesRequest) (*indexerv1.RenewTaskLeasesResponse, error) {
	err := s.checkReady()
	if err == nil {
		err = checkRunner(req.GetRunner())
	}
	keys := req.GetKeys()
	if err == nil && len(keys) > maxRenewedTasks {
		err = invalidArgument("keys: at most 1000 per request")
	}
	for _, k := range keys {
		if err == nil && !validTaskKey(k) {
			err = invalidArgument("keys: each must be a task key, a lower-case hex SHA-256 (64 characters)")
		}
	}
	var until time.Time
	if err == nil {
		until, err = s.taskLease(req.GetLeaseExpiresAt())
	}
	var ended []string
	if err == nil && len(keys) > 0 {
		ended, err = s.Store.RenewTaskLeases(ctx, req.GetRunner(), keys, until)
	}
	if err != nil {
		return nil, s.toStatus(ctx, "RenewTaskLeases", err)
	}
	return &indexerv1.RenewTaskLeasesResponse{EndedKeys: ended}, nil
}

func taskProto(t store.Task) *indexerv1.TaskRecord {
	p := &indexerv1.TaskRecord{
		Key: t.Key, Owner: t.Owner, Server: t.Server, Tool: t.Tool, Backend: t.Backend, Status: t.Status,
		StatusMessage: t.StatusMessage, CreatedAt: timestamppb.New(t.CreatedAt), UpdatedAt: timestamppb.New(t.UpdatedAt),
		ExpiresAt: timestamppb.New(t.ExpiresAt), PollIntervalMs: t.PollIntervalMS, CallJson: t.CallJSON,
		InputRequestsJson: t.InputRequestsJSON, InputResponsesJson: t.InputResponsesJSON, RequestState: t.RequestState,
		ResultJson: t.ResultJSON, ErrorJson: t.ErrorJSON, Runner: t.Runner, Round: t.Round,
	}
	if !t.LeaseExpiresAt.IsZero() {
		p.LeaseExpiresAt = timestamppb.New(t.LeaseExpiresAt)
	}
	return p
}
