package follow

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// Run retries after each break, tells down of the first break of an
// outage only once as first, starts the backoff over once the stream was
// up, and stops when ctx ends.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := Backoff{Min: time.Millisecond, Max: 4 * time.Millisecond}
	attempts := 0
	var firsts []bool
	var waits []time.Duration
	Run(ctx, b, func(_ context.Context, connected func()) error {
		attempts++
		if attempts == 4 {
			connected() // up once, then broken again
		}
		if attempts == 6 {
			cancel()
		}
		return errors.New("broken")
	}, func(_ error, first bool, wait time.Duration) {
		firsts = append(firsts, first)
		waits = append(waits, wait)
	})
	if attempts != 6 {
		t.Fatalf("%d attempts, want 6 (the last one ends with ctx)", attempts)
	}
	if want := []bool{true, false, false, true, false}; !slices.Equal(firsts, want) {
		t.Errorf("first flags %v, want %v", firsts, want)
	}
	for i, w := range waits {
		max := []time.Duration{b.Min, 2 * b.Min, 4 * b.Min, b.Min, 2 * b.Min}[i]
		if w < max/2 || w > max {
			t.Errorf("wait %d = %v, want between %v and %v", i, w, max/2, max)
		}
	}
}
