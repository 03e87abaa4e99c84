package server

import (
	"context"
	"errors"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// The rounds of tasks this replica runs: held while their call runs and
// until its outcome is stored, their leases renewed meanwhile
// (RunTaskLeases), and stopped when their task ends elsewhere.

// heldRound is a round this replica runs, and how to end it.
type heldRound struct {
	round  uint32
	cancel context.CancelCauseFunc
}

// anyRound, given to stop, ends whichever round of the task runs here.
const anyRound = ^uint32(0)

func (t *taskRunner) hold(key string, round uint32, cancel context.CancelCauseFunc) {
	t.mu.Lock()
	t.running[key] = heldRound{round, cancel}
	t.answeredLocked(key)
	t.mu.Unlock()
}

// answeredLocked stops the timer failing the task under key for want of
// its client's answers: they came (a round starts here), or the task
// ended. Answers taken on another replica leave it to fire, and find
// the task in a later round. Call with t.mu held.
func (t *taskRunner) answeredLocked(key string) {
	if timer, ok := t.unanswered[key]; ok {
		timer.Stop()
		delete(t.unanswered, key)
	}
}

// release forgets round of key, if it is the one held.
func (t *taskRunner) release(key string, round uint32) {
	t.mu.Lock()
	if h, ok := t.running[key]; ok && h.round == round {
		delete(t.running, key)
	}
	t.mu.Unlock()
}

// stop ends round of the task under key (anyRound: whichever), if this
// replica runs it. A round is named so that a lease renewal answered for
// one round cannot end the next, started here meanwhile.
func (t *taskRunner) stop(key string, round uint32, cause error) {
	t.mu.Lock()
	h, ok := t.running[key]
	ok = ok && (round == anyRound || h.round == round)
	if ok {
		delete(t.running, key)
	}
	if round == anyRound {
		t.answeredLocked(key)
	}
	t.mu.Unlock()
	if ok {
		h.cancel(cause)
	}
}

// errTaskEnded is the cause of a round stopped because its task ended
// (cancelled, expired) elsewhere.
var errTaskEnded = errors.New("the task ended")

// finish stores how round of the task under key, which expires at until,
// ended, and tells ended the status stored (not when the task had ended
// meanwhile: cancelled, expired, its lease lapsed). The round stays held,
// its lease renewed, until its outcome is stored or the task is gone: an
// indexer away for longer than a few tries (a rolling restart) once made
// the outcome be dropped and, the lease lapsing, the task fail as if this
// replica had stopped.
func (t *taskRunner) finish(key string, round uint32, until time.Time, done <-chan roundOutcome, ended func(status string, out roundOutcome)) {
	out := <-done
	defer t.release(key, round)
	rec := &indexerv1.TaskRecord{}
	t.settle(rec, round, out)
	req := &indexerv1.AdvanceTaskRequest{Key: key, Runner: t.id, Round: round, Status: rec.Status, StatusMessage: rec.StatusMessage,
		InputRequestsJson: rec.InputRequestsJson, RequestState: rec.RequestState, ResultJson: rec.ResultJson, ErrorJson: rec.ErrorJson}
	refused := false
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), advanceTimeout)
		resp, err := t.store.AdvanceTask(ctx, req)
		cancel()
		switch {
		case err == nil:
			if resp.GetApplied() || storedAlready(resp.GetRecord(), req) {
				ended(req.GetStatus(), out)
			}
			return
		case status.Code(err) == codes.NotFound:
			return
		case status.Code(err) == codes.InvalidArgument && !refused:
			// The store refused what the round left, past a bound settle
			// does not know: the task fails saying so, now, not when its
			// lease lapses.
			refused = true
			req = unkeptOutcome(key, t.id, round)
			continue
		}
		wait := min(time.Duration(attempt)*time.Second, maxAdvanceWait)
		if !t.holds(key, round) || time.Now().Add(wait).After(until) {
			// Ended elsewhere (the lease renewal stopped the round), or
			// expired before another try.
			t.log.Error("a task's round ended and its outcome could not be stored before the task ended", "status", rec.Status, "attempts", attempt, "err", err)
			return
		}
		t.log.Warn("storing a task's round failed; trying again", "attempt", attempt, "status", rec.Status, "err", err)
		time.Sleep(wait)
	}
}

// storedAlready reports whether rec, a task an outcome was not applied
// to, holds that outcome already: an earlier try stored it and its
// answer was lost (the indexer restarting), so this try found the task
// ended. A task cancelled or lapsed meanwhile has a status or a message
// of its own.
func storedAlready(rec *indexerv1.TaskRecord, req *indexerv1.AdvanceTaskRequest) bool {
	return rec != nil && rec.GetRound() == req.GetRound() && rec.GetStatus() == req.GetStatus() && rec.GetStatusMessage() == req.GetStatusMessage()
}

// maxAdvanceWait caps the wait between tries to store a round's outcome.
const maxAdvanceWait = 5 * time.Second

// holds reports whether this replica still holds round of key.
func (t *taskRunner) holds(key string, round uint32) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	h, ok := t.running[key]
	return ok && h.round == round
}

// afterRound is what follows a round of the task under key once its
// outcome is stored: the audit event of a task that ended (taskEnded),
// and for a round that left its call held for the client's answers, the
// task's failure once that call stops waiting (failUnanswered).
func (s *Server) afterRound(a *admitted, req *aggregatorv1.CallToolRequest, start time.Time, key string, round uint32) func(status string, out roundOutcome) {
	ended := s.taskEnded(a, req, start)
	return func(status string, out roundOutcome) {
		ended(status, out)
		if status == mcpspec.TaskInputRequired && out.resp.GetHeld() {
			s.tasks.failUnanswered(key, round, a.b.InputWait(), ended)
		}
	}
}

// errAnswersLate ends a task whose held call stopped waiting for the
// client's answers.
var errAnswersLate = errors.New("the client's answers did not come before the backend's call stopped waiting")

// failUnanswered fails the task under key, input_required in round,
// once the call that round left held stops waiting for the client's
// answers (wait, the backend's inputWait), unless the client answered
// (the task is in a later round) or the task ended meanwhile. The task
// once stayed input_required until it expired, up to a day later, and
// the answers, when they came, failed it with the advice given a plain
// call's retry. A replica that stops takes the timer with it: then the
// answers fail the task (taskError).
func (t *taskRunner) failUnanswered(key string, round uint32, wait time.Duration, ended func(status string, out roundOutcome)) {
	// Made and kept under t.mu, which its function takes first: however
	// soon it fires, it finds itself kept, and forgets itself.
	t.mu.Lock()
	defer t.mu.Unlock()
	var timer *time.Timer
	timer = time.AfterFunc(wait, func() {
		t.mu.Lock()
		if t.unanswered[key] == timer {
			delete(t.unanswered, key)
		}
		t.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), advanceTimeout)
		defer cancel()
		// Runner "": nobody runs a task that waits for its client.
		resp, err := t.store.AdvanceTask(ctx, &indexerv1.AdvanceTaskRequest{Key: key, Round: round, Status: mcpspec.TaskFailed,
			StatusMessage: "the client's answers did not come in time",
			ErrorJson:     t.keptError(jsonrpcInternalError, "the backend's call waited "+wait.String()+" for the answers to its questions and ended; call the tool again", nil)})
		switch {
		case err != nil:
			t.log.Warn("a task whose held call stopped waiting for its answers could not be failed; it fails when they come", "err", err)
		case resp.GetApplied():
			ended(mcpspec.TaskFailed, roundOutcome{err: errAnswersLate})
		}
	})
	if t.unanswered == nil {
		t.unanswered = map[string]*time.Timer{}
	}
	t.answeredLocked(key)
	t.unanswered[key] = timer
}

// releaseHeldRound ends the call a task's round left held for the
// client's answers (rec's requestState names it), on this replica or on
// the one holding it, as a client's cancelled retry does (release_held):
// the task was cancelled, so the answers will not come, and the
// backend's tool hears so now rather than when its inputWait runs out.
func (s *Server) releaseHeldRound(a *admitted, rec *indexerv1.TaskRecord) {
	state := rec.GetRequestState()
	if rec.GetStatus() != mcpspec.TaskInputRequired || !strings.HasPrefix(state, backend.HeldStatePrefix) {
		return
	}
	release := &aggregatorv1.CallToolRequest{Principal: svcauth.PrincipalFrom(a.ctx), Name: rec.GetTool(), Server: rec.GetServer(),
		RequestState: state, ReleaseHeld: true}
	_, err := s.routeToolCall(a.ctx, release, &toolCall{b: a.b}, nil)
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, errHeldCallGone) && status.Code(err) != codes.Canceled {
		s.log.InfoContext(a.ctx, "the call a cancelled task held for its client's answers could not be released; it ends when its input wait passes", "err", err)
	}
}
