package server

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// TestStopEndsOnlyTheRoundNamed: a lease renewal's "ended" is for the
// round that was running when it was asked; a round started here since
// (the client answered at once) goes on, where it once was cancelled.
// A cancellation of the task ends whichever round runs.
func TestStopEndsOnlyTheRoundNamed(t *testing.T) {
	r := &taskRunner{running: map[string]heldRound{}}
	ctx, cancel := context.WithCancelCause(context.Background())
	r.hold("k", 1, cancel)
	r.release("k", 0) // round 0's end, stored late
	r.stop("k", 0, errTaskEnded)
	if ctx.Err() != nil {
		t.Fatal("round 1 was stopped by round 0's renewal")
	}
	r.stop("k", anyRound, errTaskEnded)
	if !errors.Is(context.Cause(ctx), errTaskEnded) {
		t.Fatalf("a cancellation of the task did not end round 1: %v", context.Cause(ctx))
	}
	ctx2, cancel2 := context.WithCancelCause(context.Background())
	r.hold("k", 2, cancel2)
	r.stop("k", 2, errTaskEnded)
	if ctx2.Err() == nil {
		t.Fatal("round 2's own renewal did not end it")
	}
}

// countedAdvances counts the AdvanceTask calls a task store gets.
type countedAdvances struct {
	indexerv1.ClusterStateServiceClient
	n atomic.Int32
}

func (c *countedAdvances) AdvanceTask(context.Context, *indexerv1.AdvanceTaskRequest, ...grpc.CallOption) (*indexerv1.AdvanceTaskResponse, error) {
	c.n.Add(1)
	return &indexerv1.AdvanceTaskResponse{}, nil
}

// TestAnsweredRoundStopsItsTimer: a round waiting for its client's
// answers fails its task once its held call stops waiting, unless the
// answers came (a round starts here) or the task ended here: then its
// timer is stopped and the store is not asked again.
func TestAnsweredRoundStopsItsTimer(t *testing.T) {
	store := &countedAdvances{}
	r := &taskRunner{store: store, running: map[string]heldRound{}, log: slog.New(slog.DiscardHandler)}
	noop := func(string, roundOutcome) {}
	r.failUnanswered("answered", 0, time.Hour, noop)
	r.hold("answered", 1, func(error) {})
	r.failUnanswered("cancelled", 0, time.Hour, noop)
	r.stop("cancelled", anyRound, errTaskEnded)
	if len(r.unanswered) != 0 {
		t.Fatalf("%d timers kept after their rounds were answered or ended", len(r.unanswered))
	}
	r.failUnanswered("late", 0, time.Millisecond, noop)
	testkit.Eventually(t, "the unanswered task failed", 5*time.Second, func() bool { return store.n.Load() == 1 })
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.unanswered) != 0 {
		t.Fatal("a fired timer kept")
	}
}
