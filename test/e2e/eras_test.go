package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/demobackend"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

const alphaSpec = `
tools:
  - {name: echo, description: Echo the arguments., behaviour: echo}
  - {name: hello, description: Say hello., behaviour: text, text: "hello from {backend}"}
resources:
  - {uri: "alpha://readme", name: readme, mimeType: text/plain, text: "readme of {backend}"}
`

const betaSpec = `
tools:
  - {name: echo, description: Echo the arguments., behaviour: echo}
  - {name: add, description: Add a and b., behaviour: add}
resourceTemplates:
  - {uriTemplate: "beta://items/{id}", name: item, text: "{uri} from {backend}"}
prompts:
  - name: greet
    text: "Greet {who} from {backend}"
    arguments: [{name: who, required: true, values: [alice, albert, bob]}]
`

const gammaSpec = `
tools:
  - {name: echo, description: Echo the arguments., behaviour: echo}
`

// TestThroughGateway runs one cluster (three demo backends, one of them
// Legacy-only, aggregator, indexer on PostgreSQL, gateway) and speaks to it
// with a default (Modern) go-sdk client and one pinned to Legacy: both see
// every tool under its prefixed name, and each call, read, prompt and
// completion is answered by the backend that owns it. The optimizer view
// finds and calls tools, the README's try-it request works, and a tool
// added to a running backend is announced and callable.
func TestThroughGateway(t *testing.T) {
	c := harness.Start(t, harness.Options{Backends: []harness.Backend{
		{Name: "alpha", Spec: alphaSpec},
		{Name: "beta", Spec: betaSpec},
		// Legacy sessions only: the aggregator must fall back to
		// 2025-11-25 for it, invisibly to clients of either era.
		{Name: "gamma", Spec: gammaSpec, Stateful: true},
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
			want := []string{"alpha_echo", "alpha_hello", "beta_add", "beta_echo", "gamma_echo"}
			if got := harness.ToolNames(t, cs); !slices.Equal(got, want) {
				t.Fatalf("tools = %v, want %v", got, want)
			}
			for _, backend := range []string{"alpha", "beta", "gamma"} {
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
			testResourcesAndPrompts(t, cs)
		})
	}
	for _, era := range []struct{ name, pin string }{{"optimizer-modern", harness.Modern}, {"optimizer-legacy", harness.Legacy}} {
		t.Run(era.name, func(t *testing.T) { testOptimizer(t, strings.TrimSuffix(c.MCPURL, "/mcp")+"/mcp/optimized", era.pin) })
	}
	t.Run("readme", func(t *testing.T) { testReadmeCurl(t, c.MCPURL) })
	t.Run("list_changed", func(t *testing.T) { testListChanged(t, c) })
}

// testResourcesAndPrompts reads a resource and a templated resource, gets
// a prompt and completes its argument, each routed to its own backend.
func testResourcesAndPrompts(t *testing.T, cs *mcp.ClientSession) {
	var uris []string
	for r, err := range cs.Resources(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		uris = append(uris, r.URI)
	}
	if !slices.Equal(uris, []string{"alpha://readme"}) {
		t.Fatalf("resources = %v, want [alpha://readme]", uris)
	}
	for uri, want := range map[string]string{
		"alpha://readme":  "readme of alpha",
		"beta://items/42": "beta://items/42 from beta",
	} {
		read, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatalf("read %s: %v", uri, err)
		}
		if len(read.Contents) != 1 || read.Contents[0].Text != want {
			t.Fatalf("read %s = %+v, want text %q", uri, read.Contents, want)
		}
	}
	prompt, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "beta_greet", Arguments: map[string]string{"who": "bob"}})
	if err != nil {
		t.Fatal(err)
	}
	if text, ok := prompt.Messages[0].Content.(*mcp.TextContent); !ok || text.Text != "Greet bob from beta" {
		t.Fatalf("prompt beta_greet = %+v", prompt.Messages[0].Content)
	}
	comp, err := cs.Complete(t.Context(), &mcp.CompleteParams{
		Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "beta_greet"},
		Argument: mcp.CompleteParamsArgument{Name: "who", Value: "al"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := comp.Completion.Values; !slices.Equal(got, []string{"alice", "albert"}) {
		t.Fatalf("completion of beta_greet who=al = %v, want [alice albert]", got)
	}
}

// testOptimizer uses find_tool and call_tool: the search runs through the
// indexer over PostgreSQL, the call reaches the owning backend.
func testOptimizer(t *testing.T, url, pin string) {
	cs := harness.Connect(t, url, pin)
	got := harness.ToolNames(t, cs)
	slices.Sort(got)
	if !slices.Equal(got, []string{"call_tool", "find_tool"}) {
		t.Fatalf("optimizer tools = %v, want [call_tool find_tool]", got)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "find_tool",
		Arguments: map[string]any{"tool_description": "add two numbers", "tool_keywords": []string{"add"}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("find_tool failed: %v", res.Content)
	}
	found, _ := res.StructuredContent.(map[string]any)
	hits, _ := found["tools"].([]any)
	if len(hits) == 0 || hits[0].(map[string]any)["name"] != "beta_add" {
		t.Fatalf("find_tool(add two numbers) = %v, want beta_add first", found)
	}
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "call_tool",
		Arguments: map[string]any{"tool_name": "beta_add", "parameters": map[string]any{"a": 1, "b": 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if answer := structured(t, res); answer["sum"] != 3.0 || answer["backend"] != "beta" {
		t.Fatalf("call_tool beta_add = %v", answer)
	}
}

// testListChanged adds a tool to a running backend and removes it again:
// clients of both eras are notified each time, and list and call the new
// tool, without any restart.
func testListChanged(t *testing.T, c *harness.Cluster) {
	notified := map[string]chan struct{}{}
	sessions := map[string]*mcp.ClientSession{}
	for era, pin := range map[string]string{"modern": harness.Modern, "legacy": harness.Legacy} {
		ch := make(chan struct{}, 16)
		notified[era] = ch
		sessions[era] = harness.ConnectWith(t, c.MCPURL, pin, &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { ch <- struct{}{} },
		})
	}
	// awaitListing waits for notifications until the listing satisfies ok:
	// one change may be announced more than once.
	awaitListing := func(era, what string, ok func([]string) bool) {
		deadline := time.After(30 * time.Second)
		for {
			select {
			case <-notified[era]:
			case <-deadline:
				t.Fatalf("%s: no notifications/tools/list_changed leading to a listing %s within 30s", era, what)
			}
			if ok(harness.ToolNames(t, sessions[era])) {
				return
			}
		}
	}

	c.AddTool(t, "alpha", demobackend.ToolSpec{Name: "late", Description: "Added while running.",
		Behaviour: demobackend.BehaviourText, Text: "late on {backend}"})
	for era, cs := range sessions {
		awaitListing(era, "with alpha_late", func(names []string) bool { return slices.Contains(names, "alpha_late") })
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "alpha_late"})
		if err != nil {
			t.Fatal(err)
		}
		if answer := structured(t, res); answer["text"] != "late on alpha" {
			t.Fatalf("%s: alpha_late = %v", era, answer)
		}
	}

	c.RemoveTool(t, "alpha", "late")
	for era := range sessions {
		awaitListing(era, "without alpha_late", func(names []string) bool { return !slices.Contains(names, "alpha_late") })
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
