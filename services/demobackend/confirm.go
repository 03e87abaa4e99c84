package demobackend

import (
	"crypto/rand"
	"encoding/hex"
	"maps"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The confirm behaviour is a multi-round-trip request as a Modern backend
// makes it: the first call answers input_required with an elicitation
// (key "confirm", a form with one boolean "ok") and a requestState of the
// backend's own; a retry that echoes a state this backend issued for the
// same tool or resource and accepts the elicitation gets the answer. Like
// many real backends it keeps no record of the states it issued, so it
// accepts a replayed retry as often as it comes: what stops a replay is
// the gateway in front of it.

// confirmStatePrefix starts every requestState the backend hands out.
const confirmStatePrefix = "demo-confirm:"

// confirmRequest is what a confirm call still needs.
type confirmRequest struct {
	requests mcp.InputRequestMap
	state    string
}

// confirmation returns the input_required answer of a call of target
// (a tool name or a resource URI), or nil when responses and state
// confirm it.
func (b *Backend) confirmation(target string, responses mcp.InputResponseMap, state string) *confirmRequest {
	if strings.HasPrefix(state, confirmStatePrefix+target+":") {
		if res, ok := responses["confirm"].(*mcp.ElicitResult); ok && res != nil && res.Action == "accept" && res.Content["ok"] == true {
			return nil
		}
	}
	nonce := make([]byte, 8)
	_, _ = rand.Read(nonce)
	return &confirmRequest{
		requests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{
			Mode:    "form",
			Message: "Confirm " + target + " on " + b.name + "?",
			RequestedSchema: map[string]any{
				"type":       "object",
				"properties": map[string]any{"ok": map[string]any{"type": "boolean"}},
				"required":   []string{"ok"},
			},
		}},
		state: confirmStatePrefix + target + ":" + hex.EncodeToString(nonce),
	}
}

func (b *Backend) count(key string) {
	b.mu.Lock()
	b.calls[key]++
	b.mu.Unlock()
}

// Calls returns how many requests reached each tool and resource handler,
// by "tools/call <tool>" and "resources/read <uri>": every round of a
// multi-round-trip request counts.
func (b *Backend) Calls() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.calls)
}
