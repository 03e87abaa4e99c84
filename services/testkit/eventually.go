// Package testkit is what the tests of every module share: Eventually,
// which waits for a condition to hold, and a fake aggregator and a fake
// indexer (FakeAggregator, FakeIndexer) that Serve serves over real gRPC
// behind the services' own authentication.
package testkit

import (
	"errors"
	"testing"
	"time"
)

// Condition is what Eventually polls: a func() bool that holds when it
// returns true, or a func() error that holds when it returns nil (its
// last error then says why it did not).
type Condition interface {
	func() bool | func() error
}

// errFalse is a func() bool condition's "not yet".
var errFalse = errors.New("false")

// Eventually polls cond until it holds and reports how long that took.
// It polls at once, then after 5ms, the wait doubling up to 100ms. Once
// deadline has passed it fails the test with what, the deadline and
// cond's last error. Tests wait for a change to reach another goroutine
// or process this way, never with a fixed sleep.
func Eventually[C Condition](t testing.TB, what string, deadline time.Duration, cond C) time.Duration {
	t.Helper()
	check := func() error {
		switch c := any(cond).(type) {
		case func() bool:
			if !c() {
				return errFalse
			}
			return nil
		default:
			return c.(func() error)()
		}
	}
	start := time.Now()
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		err := check()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > deadline {
			if err == errFalse {
				t.Fatalf("%s: not within %v", what, deadline)
			}
			t.Fatalf("%s: not within %v: %v", what, deadline, err)
		}
		time.Sleep(wait)
	}
}
