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

// TestDetachIsBounded: what a stream would keep is bounded, whichever
// member a client pads: a long id, a padded _meta or notifications is
// refused with -32602, and the message keeps nothing of its body.
func TestDetachIsBounded(t *testing.T) {
	pad := strings.Repeat("x", MaxStreamKeptBytes)
	for name, body := range map[string]string{
		"id":            `{"jsonrpc":"2.0","id":"` + strings.Repeat("i", MaxStreamIDBytes) + `","method":"subscriptions/listen","params":{}}`,
		"_meta":         `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"_meta":{"pad":"` + pad + `"}}}`,
		"notifications": `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"pad":"` + pad + `"}}}`,
	} {
		m, _, rerr := Parse([]byte(body))
		if rerr != nil {
			t.Fatal(rerr)
		}
		if rerr := m.Detach("_meta", "notifications"); rerr == nil || rerr.Code != CodeInvalidParams {
			t.Errorf("a padded %s: %v, want -32602", name, rerr)
		}
	}
	m, _, _ := Parse([]byte(`{"jsonrpc":"2.0","id":"` + strings.Repeat("i", MaxStreamIDBytes-2) + `","method":"subscriptions/listen","params":{"_meta":{"pad":"` + strings.Repeat("x", MaxStreamKeptBytes-32) + `"}}}`))
	if rerr := m.Detach("_meta", "notifications"); rerr != nil {
		t.Errorf("within the bounds: %v", rerr)
	}
}
