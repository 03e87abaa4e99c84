package methods

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

// TestSessionCapabilitiesAreBounded: only the capabilities input requests
// need are sealed into a session id, and oversized ones shrink.
func TestSessionCapabilitiesAreBounded(t *testing.T) {
	got := sessionCapabilities(wire.Object{"elicitation": json.RawMessage(`{"form":{}}`), "experimental": json.RawMessage(`{"x":1}`)})
	if string(got) != `{"elicitation":{"form":{}}}` {
		t.Fatalf("kept %s", got)
	}
	huge := json.RawMessage(`{"pad":"` + strings.Repeat("x", 5000) + `"}`)
	got = sessionCapabilities(wire.Object{"sampling": huge, "roots": json.RawMessage(`{"listChanged":true}`)})
	if string(got) != `{"roots":{"listChanged":true},"sampling":{"pad":{}}}` {
		t.Fatalf("oversized kept %s", got)
	}
	// Shrunk, a capability declares no more than the client did.
	pad := `{"x":"` + strings.Repeat("a", 2000) + `"}`
	for name, caps := range map[string]string{
		"URL elicitation only": `{"elicitation":{"url":` + pad + `}}`,
		"a null elicitation":   `{"elicitation":null,"sampling":` + pad + `}`,
		"a URL flag":           `{"elicitation":{"url":"yes"},"sampling":` + pad + `}`,
		"a null URL":           `{"elicitation":{"url":null},"sampling":` + pad + `}`,
		"null modes":           `{"elicitation":{"form":null,"url":null},"sampling":` + pad + `}`,
	} {
		var declared wire.Object
		if err := json.Unmarshal([]byte(caps), &declared); err != nil {
			t.Fatal(err)
		}
		if got := sessionCapabilities(declared); mcpspec.Declares(got, "elicitation.form") {
			t.Errorf("%s: kept %s, which declares form elicitation", name, got)
		}
	}
	many := wire.Object{}
	for i := range 200 {
		many["x"+strings.Repeat("y", 20)+string(rune('a'+i%26))+strings.Repeat("z", i)] = json.RawMessage(`{}`)
	}
	if got := sessionCapabilities(wire.Object{"sampling": many.Encode()}); string(got) != `{}` {
		t.Fatalf("declarations past the bound kept %.100s", got)
	}
}

// TestEveryMethodHasAHandler: the method set is declared once (mcpspec);
// every method but initialize, which mints the session, has a handler
// here, and there is no handler for a method the spec does not define.
func TestEveryMethodHasAHandler(t *testing.T) {
	for m := range mcpspecMethods() {
		if _, ok := handlers[m]; !ok && m != "initialize" {
			t.Errorf("no handler for %s", m)
		}
	}
	for m := range handlers {
		if _, ok := mcpspecMethods()[m]; !ok {
			t.Errorf("handler for %s, which mcpspec does not define", m)
		}
	}
}

func mcpspecMethods() map[string]mcpspec.Method { return mcpspec.Methods }

// TestBackendResultIsComplete: a complete result from a backend carries
// resultType "complete" to a Modern client whatever the backend set (a
// value no revision defines is invalid), and none to a Legacy one.
func TestBackendResultIsComplete(t *testing.T) {
	s := &Server{}
	for era, want := range map[mcpspec.Era]string{mcpspec.EraModern: `{"content":[],"resultType":"complete"}`, mcpspec.EraLegacy: `{"content":[]}`} {
		got, rerr := s.shapeBackendResult(&Request{Era: era}, []byte(`{"content":[],"resultType":"bogus"}`), false, false)
		if rerr != nil || string(got) != want {
			t.Errorf("%s: %s %v, want %s", era, got, rerr, want)
		}
	}
}
