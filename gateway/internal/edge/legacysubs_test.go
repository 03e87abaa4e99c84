package edge

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// A session's subscriptions are a set that signals every change, is
// bounded, and is kept apart from other sessions'.
func TestSessionResources(t *testing.T) {
	s := newSessionResources()
	expires := time.Now().Add(time.Hour)
	uris, changed := s.get("one", expires)
	if len(uris) != 0 {
		t.Fatalf("new session has %v", uris)
	}
	s.subscribe("one", "a://1", expires)
	select {
	case <-changed:
	default:
		t.Fatal("subscribe did not signal a change")
	}
	uris, changed = s.get("one", expires)
	s.subscribe("one", "a://1", expires)
	select {
	case <-changed:
		t.Fatal("subscribing again signalled a change")
	default:
	}
	if other, _ := s.get("two", expires); len(other) != 0 {
		t.Fatalf("another session sees %v", other)
	}
	s.unsubscribe("one", "a://1", expires)
	select {
	case <-changed:
	default:
		t.Fatal("unsubscribe did not signal a change")
	}
	if !slices.Equal(uris, []string{"a://1"}) {
		t.Fatalf("subscribed %v", uris)
	}
	if uris, _ = s.get("one", expires); len(uris) != 0 {
		t.Fatalf("after unsubscribe: %v", uris)
	}
	for i := range maxResourceSubscriptions {
		if !s.subscribe("one", fmt.Sprintf("a://%d", i), expires) {
			t.Fatalf("subscription %d refused", i)
		}
	}
	if s.subscribe("one", "a://too-many", expires) {
		t.Fatal("subscription past the bound accepted")
	}
	s.subscribe("old", "a://1", time.Now().Add(-time.Second))
	s.get("one", expires)
	if s.sessions["old"] != nil {
		t.Fatal("an expired session's subscriptions are kept")
	}
}
