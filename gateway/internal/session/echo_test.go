package session

import (
	"context"
	"testing"
	"time"
)

// A change waits for the stream to carry its version back and then as long
// again as the change has taken: soon when it already did, soon after it
// does, and echoWait at most (from the change's start) when it never does.
func TestEchoWait(t *testing.T) {
	e := newEchoes()
	e.carried("s1", 3)
	start := time.Now()
	e.wait(context.Background(), "s1", 2, start)
	e.wait(context.Background(), "s1", 3, time.Now())
	if took := time.Since(start); took > echoWait/2 {
		t.Fatalf("waited %v for versions already carried", took)
	}
	// A change that took 100 ms to record, whose echo came first, waits
	// about as long again for the other replicas to apply it.
	start = time.Now()
	e.wait(context.Background(), "s1", 3, start.Add(-100*time.Millisecond))
	if took := time.Since(start); took < 100*time.Millisecond || took > echoWait/2 {
		t.Fatalf("waited %v after a change that took 100ms, want about 100ms more", took)
	}

	done := make(chan time.Duration)
	start = time.Now()
	go func() { e.wait(context.Background(), "s2", 7, start); done <- time.Since(start) }()
	e.carried("s2", 6) // an older version does not end the wait
	select {
	case took := <-done:
		t.Fatalf("returned after %v on an older version", took)
	case <-time.After(50 * time.Millisecond):
	}
	e.carried("s2", 7)
	if took := <-done; took < 100*time.Millisecond || took > echoWait/2 {
		t.Fatalf("returned %v after start, want soon after the echo and its margin (twice the 50ms or more it took)", took)
	}

	start = time.Now()
	e.wait(context.Background(), "never", 1, start)
	if took := time.Since(start); took < echoWait {
		t.Fatalf("returned after %v without an echo, want %v", took, echoWait)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start = time.Now()
	e.wait(ctx, "never", 1, start)
	if took := time.Since(start); took > echoWait/2 {
		t.Fatalf("a cancelled wait took %v", took)
	}
}
