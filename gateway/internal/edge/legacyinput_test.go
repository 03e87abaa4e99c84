package edge

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestPendingRepliesAreSessionScoped: an answer is delivered only to the
// waiter of the same session and request id, once.
func TestPendingRepliesAreSessionScoped(t *testing.T) {
	p := newPendingReplies()
	id := newRequestID()
	ch := p.register(pendingKey("session-a", id))
	reply := object{"result": json.RawMessage(`{"action":"accept"}`)}

	p.deliver("session-b", id, reply)
	p.deliver("session-a", json.RawMessage(`"sb-other"`), reply)
	select {
	case <-ch:
		t.Fatal("an answer of another session or request was delivered")
	default:
	}
	p.deliver("session-a", id, reply)
	if got := <-ch; string(got["result"]) != `{"action":"accept"}` {
		t.Fatalf("delivered %v", got)
	}
	// A second answer to the same request finds no waiter and is dropped.
	p.deliver("session-a", id, reply)
	if len(p.waiters) != 0 {
		t.Fatalf("%d waiters left", len(p.waiters))
	}
}

// TestSessionCapabilitiesAreBounded: only the capabilities input requests
// need are sealed into a session id, and oversized ones shrink.
func TestSessionCapabilitiesAreBounded(t *testing.T) {
	got := sessionCapabilities(object{"elicitation": json.RawMessage(`{"form":{}}`), "experimental": json.RawMessage(`{"x":1}`)})
	if string(got) != `{"elicitation":{"form":{}}}` {
		t.Fatalf("kept %s", got)
	}
	huge := json.RawMessage(`{"pad":"` + strings.Repeat("x", 5000) + `"}`)
	got = sessionCapabilities(object{"sampling": huge, "roots": json.RawMessage(`{"listChanged":true}`)})
	if string(got) != `{"roots":{},"sampling":{}}` {
		t.Fatalf("oversized kept %s", got)
	}
}
