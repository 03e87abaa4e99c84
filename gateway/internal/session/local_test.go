package session

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestRepliesAreSessionScoped: an answer is delivered only to the waiter of
// the same session and request id, once.
func TestRepliesAreSessionScoped(t *testing.T) {
	l := NewLocal()
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

// A session's subscriptions are a set that signals every change, is
// bounded, and is kept apart from other sessions'.
func TestSubscriptions(t *testing.T) {
	s := NewLocal()
	expires := time.Now().Add(time.Hour)
	uris, changed := s.Subscriptions("one", expires)
	if len(uris) != 0 {
		t.Fatalf("new session has %v", uris)
	}
	s.Subscribe("one", "a://1", expires)
	select {
	case <-changed:
	default:
		t.Fatal("subscribe did not signal a change")
	}
	uris, changed = s.Subscriptions("one", expires)
	s.Subscribe("one", "a://1", expires)
	select {
	case <-changed:
		t.Fatal("subscribing again signalled a change")
	default:
	}
	if other, _ := s.Subscriptions("two", expires); len(other) != 0 {
		t.Fatalf("another session sees %v", other)
	}
	s.Unsubscribe("one", "a://1", expires)
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
		if !s.Subscribe("one", fmt.Sprintf("a://%d", i), expires) {
			t.Fatalf("subscription %d refused", i)
		}
	}
	if s.Subscribe("one", "a://too-many", expires) {
		t.Fatal("subscription past the bound accepted")
	}
	s.Subscribe("old", "a://1", time.Now().Add(-time.Second))
	s.Subscriptions("one", expires)
	if s.resources["old"] != nil {
		t.Fatal("an expired session's subscriptions are kept")
	}
}

// TestLogLevels: a level is per session and forgotten once the session
// expired.
func TestLogLevels(t *testing.T) {
	l := NewLocal()
	l.SetLogLevel("one", "debug", time.Now().Add(time.Hour))
	l.SetLogLevel("old", "info", time.Now().Add(-time.Second))
	if l.LogLevel("one") != "debug" || l.LogLevel("two") != "" || l.LogLevel("old") != "" {
		t.Fatal("levels")
	}
}
