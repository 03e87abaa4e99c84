package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// testLimits are roomy bounds; tests that exercise one bound lower it.
var testLimits = Limits{Subscriptions: MaxSubscriptions, URIBytes: 4096, PerPrincipal: 16, PrincipalBytes: 1 << 20, TotalBytes: 4 << 20}

// TestRepliesAreSessionScoped: an answer is delivered only to the waiter of
// the same session and request id, once.
func TestRepliesAreSessionScoped(t *testing.T) {
	l := NewLocal(testLimits)
	id := json.RawMessage(`"sb-1"`)
	ch, forget := l.AwaitReply("session-a", id)
	defer forget()
	reply := json.RawMessage(`{"result":{"action":"accept"}}`)

	l.DeliverReply("session-b", id, reply)
	l.DeliverReply("session-a", json.RawMessage(`"sb-other"`), reply)
	select {
	case <-ch:
		t.Fatal("an answer of another session or request was delivered")
	default:
	}
	l.DeliverReply("session-a", id, reply)
	if got := <-ch; string(got) != string(reply) {
		t.Fatalf("delivered %s", got)
	}
	// A second answer to the same request finds no waiter and is dropped.
	l.DeliverReply("session-a", id, reply)
	if len(l.waiters) != 0 {
		t.Fatalf("%d waiters left", len(l.waiters))
	}
}

// TestCancelEndsTheNamedCall: notifications/cancelled ends the call of its
// session with that id, in whichever JSON spelling of the id, and no other.
func TestCancelEndsTheNamedCall(t *testing.T) {
	l := NewLocal(testLimits)
	ctx, cancel := context.WithCancel(t.Context())
	cancelled, done := l.Track("session-a", json.RawMessage(`"req-\u00e9"`), cancel)
	other, cancelOther := context.WithCancel(t.Context())
	_, doneOther := l.Track("session-a", json.RawMessage(`7`), cancelOther)
	defer doneOther()

	if l.Cancel("session-b", json.RawMessage(`"req-é"`)) || l.Cancel("session-a", json.RawMessage(`"req-e"`)) {
		t.Fatal("a cancellation of another session or id found a call")
	}
	if ctx.Err() != nil || cancelled() {
		t.Fatal("cancelled by a notification that did not name it")
	}
	if !l.Cancel("session-a", json.RawMessage(`"req-é"`)) {
		t.Fatal("the call was not found")
	}
	if ctx.Err() == nil || !cancelled() || other.Err() != nil {
		t.Fatalf("after Cancel: ctx %v, cancelled %v, other %v", ctx.Err(), cancelled(), other.Err())
	}
	done()
	if l.Cancel("session-a", json.RawMessage(`"req-é"`)) {
		t.Fatal("a finished call can still be cancelled")
	}
	if len(l.calls) != 1 {
		t.Fatalf("%d calls tracked, want the one in flight", len(l.calls))
	}
}

// A session's subscriptions are a set that signals every change, is
// bounded, and is kept apart from other sessions'.
func TestSubscriptions(t *testing.T) {
	s := NewLocal(testLimits)
	expires := time.Now().Add(time.Hour)
	if uris, changed := s.Subscriptions("one", expires); uris != nil || changed != nil {
		t.Fatalf("a session without state or stream has %v, %v", uris, changed)
	}
	// A GET stream open before the first subscription hears of it, and
	// holds no state.
	closeStream := s.OpenStream("one", nil)
	uris, changed := s.Subscriptions("one", expires)
	if len(uris) != 0 || changed == nil {
		t.Fatalf("new session with a stream has %v, %v", uris, changed)
	}
	if n, _ := s.Held(); n != 0 {
		t.Fatalf("an open stream holds state for %d sessions", n)
	}
	if err := s.Subscribe("one", "alice", "a://1", expires); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("subscribe did not signal a change")
	}
	closeStream()
	if len(s.streams) != 0 {
		t.Fatal("a closed stream stays registered")
	}
	uris, changed = s.Subscriptions("one", expires)
	if !slices.Equal(uris, []string{"a://1"}) {
		t.Fatalf("subscribed %v", uris)
	}
	if err := s.Subscribe("one", "alice", "a://2", expires); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("a second subscribe did not signal a change")
	}
	s.Unsubscribe("one", "a://2")
	uris, changed = s.Subscriptions("one", expires)
	_ = s.Subscribe("one", "alice", "a://1", expires)
	select {
	case <-changed:
		t.Fatal("subscribing again signalled a change")
	default:
	}
	if other, _ := s.Subscriptions("two", expires); len(other) != 0 {
		t.Fatalf("another session sees %v", other)
	}
	s.Unsubscribe("one", "a://1")
	select {
	case <-changed:
	default:
		t.Fatal("unsubscribe did not signal a change")
	}
	if !slices.Equal(uris, []string{"a://1"}) {
		t.Fatalf("subscribed %v", uris)
	}
	if uris, _ = s.Subscriptions("one", expires); len(uris) != 0 {
		t.Fatalf("after unsubscribe: %v", uris)
	}
	for i := range MaxSubscriptions {
		if err := s.Subscribe("one", "alice", fmt.Sprintf("a://%d", i), expires); err != nil {
			t.Fatalf("subscription %d refused: %v", i, err)
		}
	}
	if err := s.Subscribe("one", "alice", "a://too-many", expires); !errors.Is(err, ErrTooManySubscriptions) {
		t.Fatalf("subscription past the bound: %v", err)
	}
	if err := s.Subscribe("two", "alice", "a://"+strings.Repeat("x", testLimits.URIBytes), expires); !errors.Is(err, ErrURITooLong) {
		t.Fatalf("a URI past the bound: %v", err)
	}
	_, changed = s.Subscriptions("one", expires)
	s.Forget("one")
	select {
	case <-changed:
	default:
		t.Fatal("deleting the session did not signal a change")
	}
	if n, b := s.Held(); n != 0 || b != 0 {
		t.Fatalf("after Forget: %d sessions, %d bytes held", n, b)
	}
}

// TestStateBounds: the state of one principal's sessions and of all is
// bounded in sessions and bytes; a refused change leaves nothing behind;
// expired sessions make room again.
func TestStateBounds(t *testing.T) {
	limits := Limits{Subscriptions: MaxSubscriptions, URIBytes: 1000, PerPrincipal: 3,
		PrincipalBytes: 3*(sessionOverhead+5) + 4*(1000+uriOverhead), TotalBytes: 6*sessionOverhead + 15 + 8*(1000+uriOverhead)}
	l := NewLocal(limits)
	now := time.Now()
	l.now = func() time.Time { return now }
	soon, later := now.Add(time.Minute), now.Add(time.Hour)
	// 1000 bytes each.
	uri := func(i int) string { return fmt.Sprintf("u://%04d/%s", i, strings.Repeat("x", 1000-9)) }

	// Sessions per principal (a level costs its 5 bytes).
	for i := range 3 {
		if err := l.SetLogLevel(fmt.Sprintf("alice-%d", i), "alice", "debug", soon); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.SetLogLevel("alice-3", "alice", "debug", later); !errors.Is(err, ErrPrincipalFull) {
		t.Fatalf("a fourth session of alice: %v", err)
	}
	if n, _ := l.Held(); n != 3 {
		t.Fatalf("%d sessions held after refusals, want 3", n)
	}
	// Bytes per principal: four URIs fit, the fifth does not.
	for i := range 4 {
		if err := l.Subscribe("alice-0", "alice", uri(i), soon); err != nil {
			t.Fatalf("uri %d: %v", i, err)
		}
	}
	if err := l.Subscribe("alice-1", "alice", uri(4), soon); !errors.Is(err, ErrPrincipalFull) {
		t.Fatalf("alice past her bytes: %v", err)
	}
	// Other principals fill the rest, then the replica is full.
	for i := range 3 {
		if err := l.Subscribe(fmt.Sprintf("bob-%d", i), "bob", uri(i), later); err != nil {
			t.Fatalf("bob %d: %v", i, err)
		}
	}
	if err := l.Subscribe("carol-0", "carol", uri(0), later); !errors.Is(err, ErrFull) {
		t.Fatalf("past the replica's bytes: %v", err)
	}
	_, heldBytes := l.Held()
	if heldBytes > limits.TotalBytes {
		t.Fatalf("%d bytes held, bound %d", heldBytes, limits.TotalBytes)
	}
	if l.principals["carol"] != nil {
		t.Fatal("a refused session left its principal's usage behind")
	}

	// Alice's sessions expire: their state goes, and there is room again
	// (pruning when a bound is reached happens at most once a second).
	now = now.Add(2 * time.Minute)
	if l.LogLevel("alice-0") != "" {
		t.Fatal("an expired session's level is served")
	}
	if err := l.Subscribe("carol-0", "carol", uri(0), later); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	if n, _ := l.Held(); n != 4 {
		t.Fatalf("%d sessions held, want bob's three and carol's", n)
	}
}

// TestLogLevels: a level is per session and forgotten once the session
// expired.
func TestLogLevels(t *testing.T) {
	l := NewLocal(testLimits)
	if err := l.SetLogLevel("one", "alice", "debug", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	_ = l.SetLogLevel("old", "alice", "info", time.Now().Add(-time.Second))
	if l.LogLevel("one") != "debug" || l.LogLevel("two") != "" || l.LogLevel("old") != "" {
		t.Fatal("levels")
	}
}

// TestSessionsWithoutStateCostNothing: a session that unsubscribes from
// everything, or clears its log level, holds no state and no longer
// counts against the principal's sessions.
func TestSessionsWithoutStateCostNothing(t *testing.T) {
	limits := testLimits
	limits.PerPrincipal = 2
	l := NewLocal(limits)
	later := time.Now().Add(time.Hour)
	for _, s := range []string{"s1", "s2"} {
		if err := l.Subscribe(s, "alice", "u://readme", later); err != nil {
			t.Fatal(err)
		}
	}
	l.Unsubscribe("s1", "u://readme")
	if err := l.SetLogLevel("s2", "alice", "debug", later); err != nil {
		t.Fatal(err)
	}
	l.Unsubscribe("s2", "u://readme")
	if err := l.SetLogLevel("s2", "alice", "", later); err != nil {
		t.Fatal(err)
	}
	if n, _ := l.Held(); n != 0 {
		t.Fatalf("%d sessions held, want none: none holds state", n)
	}
	if err := l.Subscribe("s3", "alice", "u://readme", later); err != nil {
		t.Fatalf("a third session's subscription: %v", err)
	}
}
