package session

import (
	"context"
	"testing"
	"time"
)

// A change waits for the stream to carry its version back: at once when it
// already did, as soon as it does, and echoWait at most when it never does.
func TestEchoWait(t *testing.T) {
	e := newEchoes()
	e.carried("s1", 3)
	start := time.Now()
	e.wait(context.Background(), "s1", 2)
	e.wait(context.Background(), "s1", 3)
	if took := time.Since(start); took > echoWait/2 {
		t.Fatalf("waited %v for versions already carried", took)
	}

	done := make(chan time.Duration)
	start = time.Now()
	go func() { e.wait(context.Background(), "s2", 7); done <- time.Since(start) }()
	e.carried("s2", 6) // an older version does not end the wait
	select {
	case took := <-done:
		t.Fatalf("returned after %v on an older version", took)
	case <-time.After(50 * time.Millisecond):
	}
	e.carried("s2", 7)
	if took := <-done; took > echoWait/2 {
		t.Fatalf("returned %v after start, want soon after the echo", took)
	}

	start = time.Now()
	e.wait(context.Background(), "never", 1)
	if took := time.Since(start); took < echoWait {
		t.Fatalf("returned after %v without an echo, want %v", took, echoWait)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start = time.Now()
	e.wait(ctx, "never", 1)
	if took := time.Since(start); took > echoWait/2 {
		t.Fatalf("a cancelled wait took %v", took)
	}
}
