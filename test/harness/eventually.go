package harness

import (
	"testing"
	"time"
)

// Eventually polls cond every 100ms until it returns nil, and reports how
// long that took; once deadline has passed (or the test's context ended)
// it fails the test with cond's last error. Tests wait for a change to
// reach a process this way, never with a fixed sleep.
func Eventually(t testing.TB, what string, deadline time.Duration, cond func() error) time.Duration {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > deadline {
			t.Fatalf("%s: not within %v: %v", what, deadline, err)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("%s: %v", what, t.Context().Err())
		case <-tick.C:
		}
	}
}
