package methods

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/switchboard-mcp/switchboard/gateway/internal/mcperr"
	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

// The Legacy tasks/result: it blocks until the task ends and answers as
// the tools/call would have (2025-11-25). The task is polled at its
// pollInterval; while it waits for input, its input requests go to the
// client on the response stream, and the answers to the task
// (UpdateTask). The request timeout bounds each call to the services, not
// the wait: the task's TTL does (an expired task is not found), and a
// client that goes away or cancels ends it.

// Bounds of the poll interval a task names: often enough that a result is
// not held back long, seldom enough not to load the aggregator.
const (
	defaultTaskPoll = time.Second
	minTaskPoll     = 50 * time.Millisecond
	maxTaskPoll     = 5 * time.Second
)

// taskPoll is how long to wait before reading task t again.
func taskPoll(t *aggregatorv1.Task) time.Duration {
	d := time.Duration(t.GetPollIntervalMs()) * time.Millisecond
	if d <= 0 {
		return defaultTaskPoll
	}
	return min(max(d, minTaskPoll), maxTaskPoll)
}

// inputRound names the input a task waits for, so that input already
// answered is not asked again while the task has not yet moved on: a new
// round has other requests or at least a later lastUpdatedAt.
func inputRound(t *aggregatorv1.Task) string {
	return t.GetInputRequestsJson() + "\x00" + t.GetLastUpdatedAt().AsTime().String()
}

func (s *Server) taskResult(ctx context.Context, req *Request, resp Responder) (json.RawMessage, *wire.Error) {
	id, rerr := taskID(req.Params)
	if rerr != nil {
		return nil, rerr
	}
	// It waits no longer than its session lives: it acts for the session
	// (it asks the session's client, and answers the task for it).
	if !req.SessionExpiry.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, req.SessionExpiry)
		defer cancel()
	}
	keepAlive := time.NewTicker(s.cfg.KeepAlive)
	defer keepAlive.Stop()
	answered, rounds, waiting := "", 0, false
	// One request: its first read is admitted as a tasks/get (a token, an
	// event), the reads that follow are polled.
	t, rerr := s.fetchTask(ctx, req, id, false)
	for {
		if rerr != nil {
			return nil, waitEnded(ctx, req, rerr)
		}
		if req.Session != "" && s.revoked(req.Session) {
			return nil, wire.NewError(wire.CodeInvalidRequest, "the session was deleted: initialize a new session and call tasks/result again")
		}
		switch t.GetStatus() {
		case wire.TaskCompleted:
			result, err := wire.TaskCallResult([]byte(t.GetResultJson()), id, mcpspec.EraLegacy)
			if err != nil || !json.Valid(result) {
				return nil, malformedTask()
			}
			return result, nil
		case wire.TaskFailed:
			return nil, mcperr.TaskFailed(t.GetErrorJson(), req.Era, req.ClientCaps)
		case wire.TaskCancelled:
			return nil, mcperr.TaskCancelled(id)
		case wire.TaskInputRequired:
			if round := inputRound(t); round != answered {
				if rounds == maxInputRounds {
					return nil, wire.NewError(wire.CodeInternalError, "the task kept asking the client for input; giving up (the task goes on: call tasks/result again)")
				}
				rounds++
				answered = round
				// The task is read again for its next state: UpdateTask's
				// task has no input requests, result or error.
				if rerr := s.answerTaskInput(ctx, req, resp, t); rerr != nil {
					return nil, rerr
				}
			}
		}
		if !waiting {
			// A wait holds a goroutine here and reads the task at its
			// poll interval for as long as the task lives (up to a day):
			// it takes a place among the principal's open streams, which
			// it is. A task that has ended is answered without one.
			release, rerr := s.limits.acquire(req.Principal)
			if rerr != nil {
				// The aggregator recorded the read; the refusal is the
				// gateway's to record.
				req.Trail.Asked = false
				return nil, rerr
			}
			defer release()
			defer s.streams("task_result")()
			waiting = true
		}
		if rerr := s.awaitPoll(ctx, resp, keepAlive.C, taskPoll(t)); rerr != nil {
			return nil, waitEnded(ctx, req, rerr)
		}
		t, rerr = s.fetchTask(ctx, req, id, true)
	}
}

// waitEnded is rerr, or, when the wait ended with its session (it
// expired) or its credential (removed by a reload, or an expired token:
// the context's cause), an error that says so: the client's to renew, and
// call tasks/result again, not a failure of the gateway's.
func waitEnded(ctx context.Context, req *Request, rerr *wire.Error) *wire.Error {
	if ctx.Err() == nil {
		return rerr
	}
	if !req.SessionExpiry.IsZero() && !time.Now().Before(req.SessionExpiry) {
		return wire.NewError(wire.CodeInvalidRequest, "the session expired: initialize a new session and call tasks/result again")
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) && !errors.Is(cause, context.DeadlineExceeded) {
		return wire.NewError(wire.CodeInvalidRequest, cause.Error()+": call tasks/result again with a valid credential")
	}
	return rerr
}

// answerTaskInput asks the client the task's input requests, each tied
// to the task in its _meta, and gives the answers to the task.
func (s *Server) answerTaskInput(ctx context.Context, req *Request, resp Responder, t *aggregatorv1.Task) *wire.Error {
	requests, rerr := parseInputRequests(json.RawMessage(t.GetInputRequestsJson()))
	if rerr != nil || len(requests) == 0 {
		return rerr
	}
	for key, r := range requests {
		params, err := wire.WithRelatedTask(r.Params, t.GetTaskId())
		if err != nil {
			return malformedTask()
		}
		r.Params = params
		requests[key] = r
	}
	answers, rerr := s.askLegacyClient(ctx, req, resp, requests, time.Time{})
	if rerr != nil {
		return rerr
	}
	rc, rerr := s.requestContext(req)
	if rerr != nil {
		return rerr
	}
	callCtx, cancel := s.serviceCall(ctx)
	defer cancel()
	if _, err := s.agg.UpdateTask(callCtx, &aggregatorv1.UpdateTaskRequest{Principal: req.Principal, Server: req.Server,
		TaskId: t.GetTaskId(), InputResponsesJson: answers, Context: rc}); err != nil {
		return mcperr.FromError(ctx, s.log, err, req.Era, req.Method)
	}
	return nil
}

// awaitPoll waits d, keeping the response stream alive, so that proxies
// keep it open and a client that went away is noticed.
func (s *Server) awaitPoll(ctx context.Context, resp Responder, keepAlive <-chan time.Time, d time.Duration) *wire.Error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			return nil
		case <-keepAlive:
			if resp.Comment("keep-alive") != nil {
				return wire.NewError(wire.CodeInternalError, "request cancelled")
			}
		case <-ctx.Done():
			return wire.NewError(wire.CodeInternalError, "request cancelled")
		case <-s.closing:
			return wire.NewError(wire.CodeInternalError, "the gateway is shutting down; call tasks/result again")
		}
	}
}
