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
