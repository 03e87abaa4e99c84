package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
)

// withElicitingConfirm adds a tool that asks for a confirmation by
// elicitation only when the client declared it can answer one.
func withElicitingConfirm(b *testBackend) {
	b.server.AddTool(&mcp.Tool{Name: "confirm", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if caps := req.ClientCapabilities(); caps == nil || caps.Elicitation == nil {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "no elicitation declared"}}}, nil
		}
		if len(req.Params.InputResponses) == 0 {
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"ok": &mcp.ElicitParams{
				Message: "sure?", RequestedSchema: map[string]any{"type": "object"},
			}}, RequestState: "asked"}, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "confirmed"}}}, nil
	})
}

// The client's declared capabilities reach a Modern backend on each call
// (plain and streamed), so it asks only for input the client can give.
func TestClientCapabilitiesReachModernBackend(t *testing.T) {
	modern := newTestBackend(t, "modern", backendOptions{extra: withElicitingConfirm})
	h := startAggregator(t, parseConfig(t, `
aggregator:
  catalogTTL: 1h
  backends:
    - name: modern
      url: `+modern.url()+`
      timeout: 5s
`))
	ctx := context.Background()
	for _, tc := range []struct {
		caps     string
		wantType string
	}{
		{"", "complete"},
		{`{}`, "complete"},
		{`{"roots":{}}`, "complete"},
		{`{"elicitation":{"form":{}}}`, "input_required"},
	} {
		rc := &aggregatorv1.RequestContext{ClientCapabilitiesJson: tc.caps}
		resp, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Name: "modern_confirm", Context: rc})
		if err != nil {
			t.Fatalf("caps %s: %v", tc.caps, err)
		}
		if resp.GetResultType() != tc.wantType {
			t.Fatalf("caps %s: result type %s (%s), want %s", tc.caps, resp.GetResultType(), resp.GetResultJson(), tc.wantType)
		}
		rc.ProgressTokenJson = `"t"`
		_, streamed := streamCall(t, h.gateway, &aggregatorv1.CallToolRequest{Name: "modern_confirm", Context: rc})
		if streamed.GetResultType() != tc.wantType {
			t.Fatalf("caps %s, streamed: result type %s, want %s", tc.caps, streamed.GetResultType(), tc.wantType)
		}
	}
	_, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Name: "modern_confirm", Context: &aggregatorv1.RequestContext{ClientCapabilitiesJson: `[1]`}})
	if err == nil || !strings.Contains(err.Error(), "client_capabilities_json") {
		t.Fatalf("malformed capabilities: %v", err)
	}
}
