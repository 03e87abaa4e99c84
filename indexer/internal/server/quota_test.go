package server

import (
	"errors"
	"testing"
	"time"
)

func TestRevocationQuota(t *testing.T) {
	q := newRevocationQuota(2)
	now := time.Now()
	take := func(caller string, at time.Time, recorded bool, expires time.Time) error {
		done, err := q.reserve(caller, at)
		if err == nil {
			done(recorded, expires)
		}
		return err
	}
	if err := take("gw", now, true, now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	// A write that failed gives its place back.
	if err := take("gw", now, false, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := take("gw", now, true, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := take("gw", now, true, now.Add(time.Hour)); !errors.Is(err, errTooManyRevocations) {
		t.Fatalf("third live revocation of a caller allowed two: %v", err)
	}
	// Places being written count too.
	if _, err := q.reserve("other", now); err != nil {
		t.Fatal(err)
	}
	if _, err := q.reserve("other", now); err != nil {
		t.Fatal(err)
	}
	if _, err := q.reserve("other", now); !errors.Is(err, errTooManyRevocations) {
		t.Fatalf("a third pending revocation: %v", err)
	}
	// Callers are counted apart, and an expired revocation frees its place.
	if err := take("gw", now.Add(2*time.Second), true, now.Add(time.Hour)); err != nil {
		t.Fatalf("after one of gw's expired: %v", err)
	}
}

// The bound on each caller's open streams (rpc.StreamQuota) is
// rpc.StreamQuota's, tested there (services/rpc TestStreamQuota).

// A principal's live relayed answers are bounded by count and by bytes;
// failed writes give their place back, expired answers free theirs, and
// principals are counted apart.
func TestRelayQuota(t *testing.T) {
	var q relayQuota
	now := time.Now()
	take := func(p string, size int64, recorded bool, expires time.Time) error {
		done, err := q.reserve(p, now, size, maxInputResponsesPerPrincipal)
		if err == nil {
			done(recorded, expires)
		}
		return err
	}
	big := int64(maxInputResponseBytesPerPrincipal / 4)
	for range 4 {
		if err := take("p1", big, true, now.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if err := take("p1", 1, true, now.Add(time.Minute)); !errors.Is(err, errPrincipalRelaysFull) {
		t.Fatalf("past the principal's bytes: %v", err)
	}
	if err := take("p2", big, false, now.Add(time.Minute)); err != nil {
		t.Fatalf("another principal: %v", err)
	}
	for range maxInputResponsesPerPrincipal {
		if err := take("p2", 1, true, now.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if err := take("p2", 1, true, now.Add(time.Second)); !errors.Is(err, errPrincipalRelaysFull) {
		t.Fatalf("past the principal's count: %v", err)
	}
	now = now.Add(2 * time.Second)
	if err := take("p2", 1, true, now.Add(time.Second)); err != nil {
		t.Fatalf("after the answers expired: %v", err)
	}
}

// TestCancellationRateQuota: on a frozen clock a caller relays exactly its
// burst, then none until a token has refilled; callers are apart; past
// the bound on callers a new one is refused while no tracked bucket is
// full, and takes the place of one that is.
func TestCancellationRateQuota(t *testing.T) {
	q := newRateQuota(200, 400, 2)
	now := time.Now()
	for i := range 400 {
		if !q.allow("gw-1", now) {
			t.Fatalf("relay %d of the burst of 400 refused", i+1)
		}
	}
	if q.allow("gw-1", now) {
		t.Fatal("relay 401 on a frozen clock allowed")
	}
	if q.allow("gw-1", now.Add(4*time.Millisecond)) {
		t.Fatal("allowed after 4 ms at 200/s (0.8 of a token)")
	}
	if !q.allow("gw-1", now.Add(5*time.Millisecond)) || q.allow("gw-1", now.Add(5*time.Millisecond)) {
		t.Fatal("after 5 ms at 200/s, want exactly one more")
	}
	if !q.allow("gw-2", now) {
		t.Fatal("another caller refused for gw-1's flood")
	}
	// Two callers tracked, neither full (gw-2 holds 399.4 after 2 ms): a
	// third waits.
	if q.allow("gw-3", now.Add(2*time.Millisecond)) {
		t.Fatal("a third caller tracked past the bound of two")
	}
	// gw-2 is full again after 5 ms; gw-1 (none left at 5 ms) is not.
	at := now.Add(10 * time.Millisecond)
	if !q.allow("gw-3", at) {
		t.Fatal("a third caller refused although gw-2's bucket is full again")
	}
	if !q.allow("gw-1", at) {
		t.Fatal("gw-1, still tracked, refused a refilled token")
	}
}
