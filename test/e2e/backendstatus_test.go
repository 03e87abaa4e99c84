package e2e

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/test/harness"
)

// TestBackendRetryAfterReachesClients: a backend that answers a call
// HTTP 503 with Retry-After (down for maintenance, overloaded) says when
// to come back, and clients of both eras are told so in the error's
// data.retryAfterSeconds; a 503 without it is "retry later", without
// data. Neither takes the backend's tools out of the listing.
func TestBackendRetryAfterReachesClients(t *testing.T) {
	c := harness.Start(t, harness.Options{NoIndexer: true, Backends: []harness.Backend{{Name: "maint",
		Spec: "tools:\n  - {name: down, behaviour: unavailable, text: '7'}\n  - {name: busy, behaviour: unavailable, text: ''}\n"}}})
	for era, version := range map[string]string{"Modern": harness.Modern, "Legacy": harness.Legacy} {
		cs := harness.Connect(t, c.MCPURL, version)
		for tool, want := range map[string]struct {
			message    string
			retryAfter int
		}{
			"maint_down": {"the server behind this request is unavailable; retry after 7s", 7},
			"maint_busy": {"the server behind this request is unavailable; retry later", 0},
		} {
			_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
			var rpcErr *jsonrpc.Error
			if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInternalError || rpcErr.Message != want.message {
				t.Errorf("%s (%s): %v; want %q", tool, era, err, want.message)
				continue
			}
			var data struct {
				RetryAfterSeconds *int `json:"retryAfterSeconds"`
			}
			_ = json.Unmarshal(rpcErr.Data, &data)
			switch {
			case want.retryAfter == 0 && data.RetryAfterSeconds != nil,
				want.retryAfter != 0 && (data.RetryAfterSeconds == nil || *data.RetryAfterSeconds != want.retryAfter):
				t.Errorf("%s (%s): data %s, want retryAfterSeconds %d", tool, era, rpcErr.Data, want.retryAfter)
			}
		}
		if names := harness.ToolNames(t, cs); !slices.Contains(names, "maint_down") || !slices.Contains(names, "maint_busy") {
			t.Errorf("after the refusals (%s) the backend's tools are gone: %v", era, names)
		}
	}
}
