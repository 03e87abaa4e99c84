package wire

import (
	"strings"
	"testing"
)

// TestDetach: a detached message shares no memory with its body and keeps
// only the members asked for.
func TestDetach(t *testing.T) {
	body := []byte(`{"jsonrpc":"2.0","id":"s-1","method":"subscriptions/listen","params":{"_meta":{"a":1},"notifications":{"toolsListChanged":true},"pad":"` + strings.Repeat("x", 1<<16) + `"}}`)
	m, _, rerr := Parse(body)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if rerr := m.Detach("_meta", "notifications"); rerr != nil {
		t.Fatal(rerr)
	}
	for i := range body {
		body[i] = '#'
	}
	if string(m.ID) != `"s-1"` || string(m.Params["_meta"]) != `{"a":1}` || string(m.Params["notifications"]) != `{"toolsListChanged":true}` {
		t.Fatalf("detached message changed with its body: id %s, params %v", m.ID, m.Params)
	}
	if _, ok := m.Params["pad"]; ok || len(m.Params) != 2 {
		t.Fatalf("members kept: %v", m.Params)
	}
}

// TestDetachIsBounded: a streaming request's id is bounded (the stream
// keeps it): a long one is refused with -32602.
func TestDetachIsBounded(t *testing.T) {
	m, _, rerr := Parse([]byte(`{"jsonrpc":"2.0","id":"` + strings.Repeat("i", MaxStreamIDBytes) + `","method":"subscriptions/listen","params":{}}`))
	if rerr != nil {
		t.Fatal(rerr)
	}
	if rerr := m.Detach("_meta", "notifications"); rerr == nil || rerr.Code != CodeInvalidParams {
		t.Errorf("a padded id: %v, want -32602", rerr)
	}
	m, _, _ = Parse([]byte(`{"jsonrpc":"2.0","id":"` + strings.Repeat("i", MaxStreamIDBytes-2) + `","method":"subscriptions/listen","params":{}}`))
	if rerr := m.Detach("_meta", "notifications"); rerr != nil {
		t.Errorf("an id within the bound: %v", rerr)
	}
}
