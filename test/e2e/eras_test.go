package e2e

import (
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/test/harness"
)

const alphaSpec = `
tools:
  - {name: echo, description: Echo the arguments., behaviour: echo}
  - {name: hello, description: Say hello., behaviour: text, text: "hello from {backend}"}
`

const betaSpec = `
tools:
  - {name: echo, description: Echo the arguments., behaviour: echo}
  - {name: add, description: Add a and b., behaviour: add}
`

// TestBothEras lists and calls through the gateway in front of two demo
// backends, with a default (Modern) client and one pinned to Legacy: both
// see every tool under its prefixed name, and each call is answered by the
// backend that owns the tool.
func TestBothEras(t *testing.T) {
	c := harness.Start(t, harness.Options{Backends: []harness.Backend{
		{Name: "alpha", Spec: alphaSpec},
		{Name: "beta", Spec: betaSpec},
	}})
	for _, era := range []struct{ name, pin, negotiated string }{
		{"modern", harness.Modern, "2026-07-28"},
		{"legacy", harness.Legacy, "2025-11-25"},
	} {
		t.Run(era.name, func(t *testing.T) {
			cs := harness.Connect(t, c.MCPURL, era.pin)
			if got := cs.InitializeResult().ProtocolVersion; got != era.negotiated {
				t.Fatalf("negotiated %q, want %q", got, era.negotiated)
			}
			want := []string{"alpha_echo", "alpha_hello", "beta_add", "beta_echo"}
			if got := harness.ToolNames(t, cs); !slices.Equal(got, want) {
				t.Fatalf("tools = %v, want %v", got, want)
			}
			for _, backend := range []string{"alpha", "beta"} {
				res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{
					Name: backend + "_echo", Arguments: map[string]any{"era": era.name},
				})
				if err != nil {
					t.Fatalf("call %s_echo: %v", backend, err)
				}
				answer := structured(t, res)
				if answer["backend"] != backend || answer["tool"] != "echo" {
					t.Fatalf("%s_echo was answered by %v/%v, want %s/echo", backend, answer["backend"], answer["tool"], backend)
				}
				if args, _ := answer["arguments"].(map[string]any); args["era"] != era.name {
					t.Fatalf("%s_echo got arguments %v", backend, answer["arguments"])
				}
			}
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "beta_add", Arguments: map[string]any{"a": 2, "b": 40}})
			if err != nil {
				t.Fatal(err)
			}
			if answer := structured(t, res); answer["sum"] != 42.0 || answer["backend"] != "beta" {
				t.Fatalf("beta_add = %v", answer)
			}
		})
	}
}

// structured returns a demo backend's answer: its structured content,
// which must agree with the JSON in its text content.
func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool error: %v", res.Content)
	}
	answer, ok := res.StructuredContent.(map[string]any)
	if !ok {
		t.Fatalf("structuredContent is %T, want an object", res.StructuredContent)
	}
	if len(res.Content) != 1 {
		t.Fatalf("content has %d blocks, want 1", len(res.Content))
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	if !ok || !strings.Contains(text.Text, `"backend":"`+answer["backend"].(string)+`"`) {
		t.Fatalf("text content %v does not name backend %v", res.Content[0], answer["backend"])
	}
	return answer
}
