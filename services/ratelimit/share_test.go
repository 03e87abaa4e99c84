package ratelimit

import "testing"

// FairShare is the whole share up to half the bound, then shrinks with
// what is left, and is never less than one.
func TestFairShare(t *testing.T) {
	for _, c := range []struct{ held, want int }{
		{0, 1000}, {50_000, 1000}, {75_000, 500}, {99_000, 20}, {99_999, 1}, {100_000, 1},
	} {
		if got := FairShare(1000, c.held, 100_000); got != c.want {
			t.Errorf("FairShare(1000, %d, 100000) = %d, want %d", c.held, got, c.want)
		}
	}
}
