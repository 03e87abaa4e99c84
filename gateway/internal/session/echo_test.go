package session

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// A change waits for the stream to carry its version back and then as long
// again as the change has taken: at once when it took no time and was
// already carried, the change's own duration after the echo, and echoWait
// (from the change's start) when the echo never comes. The test runs on
// synctest's clock, so every wait is exact whatever the machine's load.
func TestEchoWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEchoes()
		e.carried("s1", 3)
		start := time.Now()
		e.wait(context.Background(), "s1", 2, start)
		e.wait(context.Background(), "s1", 3, time.Now())
		if took := time.Since(start); took != 0 {
			t.Fatalf("waited %v for versions already carried by a change that took no time", took)
		}
		// A change that took 100 ms to record, whose echo came first, waits
		// as long again for the other replicas to apply it.
		start = time.Now()
		e.wait(context.Background(), "s1", 3, start.Add(-100*time.Millisecond))
		if took := time.Since(start); took != 100*time.Millisecond {
			t.Fatalf("waited %v after a change that took 100ms, want 100ms more", took)
		}

		done := make(chan time.Duration, 1)
		start = time.Now()
		go func() { e.wait(context.Background(), "s2", 7, start); done <- time.Since(start) }()
		e.carried("s2", 6) // an older version does not end the wait
		<-time.After(50 * time.Millisecond)
		synctest.Wait()
		select {
		case took := <-done:
			t.Fatalf("returned after %v on an older version", took)
		default:
		}
		e.carried("s2", 7)
		if took := <-done; took != 100*time.Millisecond {
			t.Fatalf("returned %v after start, want 100ms: the echo at 50ms and as long again", took)
		}

		start = time.Now()
		e.wait(context.Background(), "never", 1, start)
		if took := time.Since(start); took != echoWait {
			t.Fatalf("returned after %v without an echo, want %v", took, echoWait)
		}
		// The bound counts from the change's start, not from the wait's.
		start = time.Now()
		e.wait(context.Background(), "never", 1, start.Add(-echoWait/4))
		if took := time.Since(start); took != echoWait*3/4 {
			t.Fatalf("a change that took %v waited %v more without an echo, want %v", echoWait/4, took, echoWait*3/4)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		start = time.Now()
		e.wait(ctx, "never", 1, start)
		if took := time.Since(start); took != 0 {
			t.Fatalf("a cancelled wait took %v", took)
		}
	})
}
