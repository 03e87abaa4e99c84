package server

import (
	"context"
	"errors"
	"testing"
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
