package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/demobackend"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// serversPolicy gives two principals different rights on one virtual
// server: support staff may call two tools, and only through the support
// server; engineers may use everything, everywhere.
const serversPolicy = `
permit (principal in Group::"support", action == Action::"call_tool", resource in Server::"support")
  when { resource == Tool::"tickets_echo" || resource == Tool::"docs_hello" };
permit (principal in Group::"eng", action, resource);
`

const (
	sueKey  = "sue-key-for-the-servers-test"
	erinKey = "erin-key-for-the-servers-test"
)

// startServersCluster runs two demo backends (echo, add, hello, fail,
// sleep each) behind two virtual servers: support (tickets' tools but
// sleep, and docs_hello) and ops (docs only, the optimizer at /mcp/ops).
func startServersCluster(t *testing.T) *harness.Cluster {
	t.Helper()
	policy := filepath.Join(t.TempDir(), "policy.cedar")
	if err := os.WriteFile(policy, []byte(serversPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	optimizer := true
	return harness.Start(t, harness.Options{
		Backends: []harness.Backend{{Name: "tickets"}, {Name: "docs", Stateful: true}},
		Configure: func(cfg *config.Config) {
			cfg.Aggregator.Authz.PolicyFile = policy
			cfg.Gateway.Auth.Mode = "apiKeys"
			cfg.Gateway.Auth.APIKeys = []config.APIKey{
				{Key: sueKey, Subject: "sue", Groups: []string{"support"}},
				{Key: erinKey, Subject: "erin", Groups: []string{"eng"}},
			}
			cfg.Servers = []config.Server{
				{Name: "support", Backends: []string{"tickets", "docs"}, Instructions: "Support desk: look tickets up.",
					Tools: config.ItemFilter{Include: []string{"tickets_*", "docs_hello"}, Exclude: []string{"*_sleep"}}},
				{Name: "ops", Backends: []string{"docs"}, Optimizer: &optimizer},
			}
		},
	})
}

// withKey authenticates every request with an API key.
type withKey struct{ key string }

func (k withKey) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+k.key)
	return http.DefaultTransport.RoundTrip(req)
}

func connectAs(t *testing.T, url, version, key string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "switchboard-servers-test", Version: "0"}, opts)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{
		Endpoint: url, MaxRetries: -1, HTTPClient: &http.Client{Transport: withKey{key}, Timeout: time.Minute},
	}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect to %s (version %q): %v", url, version, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestVirtualServers(t *testing.T) {
	c := startServersCluster(t)
	base := c.MCPURL
	all := []string{"docs_add", "docs_echo", "docs_fail", "docs_hello", "docs_sleep",
		"tickets_add", "tickets_echo", "tickets_fail", "tickets_hello", "tickets_sleep"}
	for _, era := range []struct{ name, version string }{{"modern", harness.Modern}, {"legacy", harness.Legacy}} {
		t.Run(era.name, func(t *testing.T) {
			views := []struct {
				who, key, url string
				want          []string
			}{
				{"erin", erinKey, base, all},
				{"erin", erinKey, base + "/support", []string{"docs_hello", "tickets_add", "tickets_echo", "tickets_fail", "tickets_hello"}},
				{"erin", erinKey, base + "/ops/raw", []string{"docs_add", "docs_echo", "docs_fail", "docs_hello", "docs_sleep"}},
				{"erin", erinKey, base + "/ops", []string{"find_tool", "call_tool"}},
				{"sue", sueKey, base + "/support", []string{"docs_hello", "tickets_echo"}},
				{"sue", sueKey, base, nil},
				{"sue", sueKey, base + "/ops/raw", nil},
			}
			for _, v := range views {
				cs := connectAs(t, v.url, era.version, v.key, nil)
				if got := harness.ToolNames(t, cs); !slices.Equal(got, v.want) {
					t.Errorf("%s at %s lists %v, want %v", v.who, v.url, got, v.want)
				}
			}

			ctx := t.Context()
			sue := connectAs(t, base+"/support", era.version, sueKey, nil)
			res, err := sue.CallTool(ctx, &mcp.CallToolParams{Name: "tickets_echo", Arguments: map[string]any{"q": "order 7"}})
			if err != nil || res.IsError || !strings.Contains(text(res), "order 7") {
				t.Fatalf("sue calls tickets_echo through support: %+v, %v", res, err)
			}
			// What sue may not call through support, what the server leaves
			// out and what does not exist all answer alike.
			_, missing := sue.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool"})
			for _, name := range []string{"tickets_add", "tickets_sleep", "docs_echo"} {
				_, err := sue.CallTool(ctx, &mcp.CallToolParams{Name: name})
				if err == nil || missing == nil || strings.ReplaceAll(err.Error(), name, "X") != strings.ReplaceAll(missing.Error(), "no_such_tool", "X") {
					t.Errorf("sue calling %s through support: %v; a missing tool: %v", name, err, missing)
				}
			}
			erin := connectAs(t, base+"/support", era.version, erinKey, nil)
			if res, err := erin.CallTool(ctx, &mcp.CallToolParams{Name: "tickets_add", Arguments: map[string]any{"a": 2, "b": 3}}); err != nil || res.IsError {
				t.Errorf("erin calls tickets_add through support: %+v, %v", res, err)
			}
			if got := erin.InitializeResult().Instructions; got != "Support desk: look tickets up." {
				t.Errorf("support's instructions %q", got)
			}

			// find_tool searches the server's view only.
			ops := connectAs(t, base+"/ops", era.version, erinKey, nil)
			found, err := ops.CallTool(ctx, &mcp.CallToolParams{Name: "find_tool", Arguments: map[string]any{"tool_description": "add two numbers"}})
			if err != nil || found.IsError {
				t.Fatalf("find_tool in ops: %+v, %v", found, err)
			}
			if out := text(found); !strings.Contains(out, "docs_add") || strings.Contains(out, "tickets_") {
				t.Errorf("find_tool in ops found %s; want docs_add and no tickets tool", out)
			}
			called, err := ops.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"tool_name": "tickets_add", "parameters": map[string]any{"a": 1, "b": 1}}})
			if err == nil && !called.IsError {
				t.Errorf("call_tool in ops reached tickets_add, which ops does not serve: %s", text(called))
			}
		})
	}
}

// A server is its own endpoint: not configured is 404 (after
// authentication), and a Legacy session is good at its server only.
func TestVirtualServerEndpoints(t *testing.T) {
	c := startServersCluster(t)
	post := func(url, key, session string) int {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("MCP-Protocol-Version", harness.Legacy)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post(c.MCPURL+"/nope", "", ""); got != http.StatusUnauthorized {
		t.Errorf("anonymous POST to an unknown server: %d, want 401 (no name is confirmed or denied)", got)
	}
	if got := post(c.MCPURL+"/nope", erinKey, ""); got != http.StatusNotFound {
		t.Errorf("POST to an unknown server: %d, want 404", got)
	}

	// A session opened at /mcp/support: its id, taken to /mcp or another
	// server, is unknown there.
	var id string
	client := mcp.NewClient(&mcp.Implementation{Name: "servers-session", Version: "0"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: c.MCPURL + "/support", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: withKey{erinKey}}}, &mcp.ClientSessionOptions{ProtocolVersion: harness.Legacy})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	id = cs.ID()
	if id == "" {
		t.Fatal("no Legacy session id")
	}
	if got := post(c.MCPURL+"/support", erinKey, id); got != http.StatusOK {
		t.Errorf("the session at its own server: %d, want 200", got)
	}
	for _, other := range []string{c.MCPURL, c.MCPURL + "/ops", c.MCPURL + "/raw"} {
		if got := post(other, erinKey, id); got != http.StatusNotFound {
			t.Errorf("the support session at %s: %d, want 404", other, got)
		}
	}
}

// list_changed reaches the clients of a server whose tools changed.
func TestVirtualServerListChanged(t *testing.T) {
	c := startServersCluster(t)
	changed := make(chan struct{}, 8)
	opts := &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}}
	cs := connectAs(t, c.MCPURL+"/support", harness.Legacy, erinKey, opts)
	before := harness.ToolNames(t, cs)
	c.AddTool(t, "tickets", demobackend.ToolSpec{Name: "close", Description: "Close a ticket."})
	select {
	case <-changed:
	case <-time.After(harness.ReadyTimeout):
		t.Fatal("no notifications/tools/list_changed at /mcp/support after tickets gained a tool")
	}
	after := harness.ToolNames(t, cs)
	if !slices.Contains(after, "tickets_close") || slices.Contains(before, "tickets_close") {
		t.Errorf("support lists %v, then %v", before, after)
	}
}

// text joins a result's text content.
func text(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// Input requests work through a virtual server in both eras, against a
// Modern backend (input_required and the client's retry) and a Legacy one
// (the aggregator holds the backend's elicitation for the retry).
func TestVirtualServerInputRequests(t *testing.T) {
	const askSpec = "tools:\n  - {name: ask, description: Ask the client to confirm., behaviour: ask}\n"
	c := harness.Start(t, harness.Options{
		Backends:  []harness.Backend{{Name: "alpha", Spec: askSpec}, {Name: "legacy", Spec: askSpec, Stateful: true}},
		NoIndexer: true,
		Configure: func(cfg *config.Config) {
			cfg.Servers = []config.Server{{Name: "desk", Backends: []string{"alpha", "legacy"}}}
		},
	})
	for _, era := range []struct{ name, version string }{{"modern", harness.Modern}, {"legacy", harness.Legacy}} {
		t.Run(era.name, func(t *testing.T) {
			asked := 0
			cs := harness.ConnectWith(t, c.MCPURL+"/desk", era.version, &mcp.ClientOptions{
				ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					asked++
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
				},
			})
			for _, backend := range []string{"alpha", "legacy"} {
				res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: backend + "_ask"})
				if err != nil || res.IsError {
					t.Fatalf("%s_ask through /mcp/desk: %+v, %v", backend, res, err)
				}
				a, _ := res.StructuredContent.(map[string]any)
				if a["action"] != "accept" || a["backend"] != backend {
					t.Errorf("%s_ask answered %v, want the accepted answer from %s", backend, res.StructuredContent, backend)
				}
			}
			if asked != 2 {
				t.Errorf("the client was asked %d times, want 2", asked)
			}
		})
	}
}
