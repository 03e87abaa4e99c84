package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// TestTasksExtensionIsNotDeclaredToBackends: a client's declaration of
// the tasks extension is not passed on to backends (its other
// capabilities and extensions are): a backend that answered with a task
// would hand the client a task id no replica could serve tasks/get for.
func TestTasksExtensionIsNotDeclaredToBackends(t *testing.T) {
	_, h := capsEcho(t)
	alice := principal("alice")
	caps := `{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{},"example.com/other":{"on":true}}}`
	resp, err := h.gateway.CallTool(context.Background(), &aggregatorv1.CallToolRequest{Principal: alice, Name: "eng_caps", ArgumentsJson: "{}",
		Context: &aggregatorv1.RequestContext{ClientCapabilitiesJson: caps}})
	if err != nil {
		t.Fatal(err)
	}
	got := resp.GetResultJson()
	if strings.Contains(got, "io.modelcontextprotocol/tasks") || !strings.Contains(got, "example.com/other") || !strings.Contains(got, "elicitation") {
		t.Fatalf("the backend was declared %s", got)
	}
}

// capsEcho starts an aggregator over a Modern backend, eng, whose tool
// caps answers with the client capabilities it was declared, and waits
// until it is listed.
func capsEcho(t *testing.T) (*testBackend, *harness) {
	eng := newTestBackend(t, "eng", backendOptions{extra: func(b *testBackend) {
		b.server.AddTool(&mcp.Tool{Name: "caps", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			raw, _ := json.Marshal(req.Params.Meta["io.modelcontextprotocol/clientCapabilities"])
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(raw)}}}, nil
		})
	}})
	h := startAggregator(t, parseConfig(t, `
aggregator:
  backends:
    - {name: eng, url: `+eng.url()+`, protocol: 2026-07-28}
`))
	testkit.Eventually(t, "eng listed", 10*time.Second, func() bool { return len(listToolNames(t, h.gateway, principal("alice"), 0)) > 0 })
	return eng, h
}
