package edge

import (
	"encoding/json"
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
