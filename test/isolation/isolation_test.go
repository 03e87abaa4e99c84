package isolation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// seedEnv reruns the test with a given seed.
const seedEnv = "SWITCHBOARD_ISOLATION_SEED"

// cases is how many policies one run checks; each restarts the aggregator.
const cases = 8

// pageSize is small so that every view spans several pages.
const pageSize = 3

const pollDeadline = 60 * time.Second

var eras = []struct{ name, pin string }{{"modern", harness.Modern}, {"legacy", harness.Legacy}}

// TestIdentityIsolation generates backends with random tools, then for
// each of several random Cedar policies restarts the aggregator with it and
// checks every principal, in both eras, on the raw view and the optimizer
// view, against the oracle: every listed page and every find_tool hit is
// permitted, every permitted tool is listed and callable, and a denied
// tool's call is answered exactly like an unknown tool's.
func TestIdentityIsolation(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(seedEnv); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", seedEnv, s, err)
		}
	}
	t.Logf("seed %d", seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("FAILED with seed %d; rerun with %s=%d", seed, seedEnv, seed)
		}
	})
	w := generate(rand.New(rand.NewPCG(seed, seed>>1|1)), cases)

	policyPath := filepath.Join(t.TempDir(), "policy.cedar")
	writePolicy(t, policyPath, w.cases[0].policy)
	var backends []harness.Backend
	for name, tools := range w.backends {
		backends = append(backends, harness.Backend{Name: name, Spec: spec(tools)})
	}
	slices.SortFunc(backends, func(a, b harness.Backend) int { return strings.Compare(a.Name, b.Name) })
	c := harness.Start(t, harness.Options{Backends: backends, Configure: func(cfg *config.Config) {
		cfg.Logging.Level = "info"
		cfg.Aggregator.PageSize = pageSize
		cfg.Aggregator.Authz.PolicyFile = policyPath
		// Each case restarts the aggregator; the gateway's and indexer's
		// catalog watch streams would otherwise hold it for the default
		// ten-second grace.
		cfg.Aggregator.ShutdownGrace = config.Duration(500 * time.Millisecond)
		cfg.Gateway.Optimizer.Limit = 50
		cfg.Gateway.Cache.TTL = config.Duration(time.Millisecond)
		cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys"}
		seen := map[string]bool{}
		for _, tc := range w.cases {
			for _, p := range tc.principals {
				if !seen[p.subject] {
					seen[p.subject] = true
					cfg.Gateway.Auth.APIKeys = append(cfg.Gateway.Auth.APIKeys, config.APIKey{Key: p.key(), Subject: p.subject, Groups: p.groups})
				}
			}
		}
	}})
	optimizedURL := strings.TrimSuffix(c.MCPURL, "/mcp") + "/mcp/optimized"

	for i, tc := range w.cases {
		if i > 0 {
			writePolicy(t, policyPath, tc.policy)
			c.Aggregator.Stop()
			c.Aggregator.Restart()
		}
		o := newOracle(t, tc.policy)
		ok := t.Run(fmt.Sprintf("case%d", i), func(t *testing.T) {
			t.Logf("policy:\n%s", tc.policy)
			waitForView(t, c.MCPURL, optimizedURL, w, o)
			probeCursor, probeLast := firstPage(t, c.MCPURL, probe)
			for _, p := range tc.principals {
				view := o.view(w, p)
				t.Logf("%s %v may call %v", p.subject, p.groups, view)
				for _, era := range eras {
					raw := connect(t, c.MCPURL, era.pin, p)
					checkList(t, raw, p, era.name, view)
					checkReplayedCursor(t, raw, p, era.name, view, probeCursor, probeLast)
					checkCalls(t, raw, w, o, p, era.name+" raw", directCall)
					opt := connect(t, optimizedURL, era.pin, p)
					checkSearch(t, opt, w, o, p, era.name)
					checkCalls(t, opt, w, o, p, era.name+" optimized", callThrough)
				}
			}
		})
		if !ok {
			t.Fatalf("seed %d: case %d leaked or failed (policy above); later cases are skipped", seed, i)
		}
	}
	for _, p := range []*harness.Proc{c.Aggregator, c.Gateway, c.Indexer} {
		if !p.Running() || strings.Contains(p.Log(8<<20), "panic") {
			t.Errorf("%s crashed or logged a panic", p.Name)
		}
	}
}

func writePolicy(t *testing.T, path, policy string) {
	if err := os.WriteFile(path, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
}

// waitForView polls until the restarted aggregator serves the probe's
// whole view (the catalog is built and the policy is the new one) and the
// indexer, whose connection to the aggregator may still be in its
// reconnect back-off, answers find_tool again.
func waitForView(t *testing.T, url, optimizedURL string, w world, o oracle) {
	t.Helper()
	want := o.view(w, probe)
	cs := connect(t, url, harness.Modern, probe)
	opt := connect(t, optimizedURL, harness.Modern, probe)
	took := testkit.Eventually(t, "the probe's view after the restart", pollDeadline, func() error {
		got, err := listAll(t.Context(), cs)
		if err != nil || !slices.Equal(got, want) {
			return fmt.Errorf("%v %v, want %v", got, err, want)
		}
		res, err := opt.CallTool(t.Context(), &mcp.CallToolParams{Name: "find_tool", Arguments: map[string]any{"tool_description": "records"}})
		if err != nil {
			return err
		}
		if res.IsError {
			return errors.New(toolText(res))
		}
		return nil
	})
	t.Logf("the stack served the new policy %v after the restart", took.Round(time.Millisecond))
}

func listAll(ctx context.Context, cs *mcp.ClientSession) ([]string, error) {
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		names = append(names, tool.Name)
	}
	return names, nil
}

// bearer authenticates every request with one principal's API key.
type bearer struct{ key string }

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(req)
}

func connect(t *testing.T, url, pin string, p principal) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "switchboard-isolation", Version: "0"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{
		Endpoint:             url,
		HTTPClient:           &http.Client{Transport: bearer{p.key()}, Timeout: 30 * time.Second},
		MaxRetries:           -1,
		DisableStandaloneSSE: true,
	}, &mcp.ClientSessionOptions{ProtocolVersion: pin})
	if err != nil {
		t.Fatalf("%s: connect to %s (version %q): %v", p.subject, url, pin, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// checkList walks the raw view page by page: each page is at most
// pageSize, sorted after the previous one, and every item permitted; the
// union is exactly the view.
func checkList(t *testing.T, cs *mcp.ClientSession, p principal, era string, view []string) {
	t.Helper()
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > len(view)+2 {
			t.Fatalf("%s %s: more pages than the view has items: %v", era, p.subject, got)
		}
		res, err := cs.ListTools(t.Context(), &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			t.Fatalf("%s %s: tools/list page %d: %v", era, p.subject, pages, err)
		}
		if len(res.Tools) > pageSize {
			t.Errorf("%s %s: page %d has %d tools, page size %d", era, p.subject, pages, len(res.Tools), pageSize)
		}
		for _, tool := range res.Tools {
			if !slices.Contains(view, tool.Name) {
				t.Errorf("LEAK: %s %s: page %d lists %s, which the policy denies", era, p.subject, pages, tool.Name)
			}
			got = append(got, tool.Name)
		}
		if res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
	}
	if !slices.IsSorted(got) || !slices.Equal(got, view) {
		t.Errorf("%s %s: listed %v, want exactly %v", era, p.subject, got, view)
	}
}

// answer is a call's outcome with the tool's name taken out, so a denied
// tool's answer can be compared with an unknown tool's.
type answer struct {
	ok      bool
	by      string // the backend and tool that answered a success
	kind    string // "mcp error" or "tool error"
	code    int64
	message string
	data    string
}

// caller calls a tool on a session of one view.
type caller func(ctx context.Context, cs *mcp.ClientSession, name string) (*mcp.CallToolResult, error)

func directCall(ctx context.Context, cs *mcp.ClientSession, name string) (*mcp.CallToolResult, error) {
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"from": "isolation"}})
}

func callThrough(ctx context.Context, cs *mcp.ClientSession, name string) (*mcp.CallToolResult, error) {
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{
		"tool_name": name, "parameters": map[string]any{"from": "isolation"},
	}})
}

func callAnswer(ctx context.Context, cs *mcp.ClientSession, call caller, name string) answer {
	res, err := call(ctx, cs, name)
	if err != nil {
		var we *jsonrpc.Error
		if !errors.As(err, &we) {
			return answer{kind: "transport error", message: err.Error()}
		}
		return answer{kind: "mcp error", code: we.Code, message: strings.ReplaceAll(we.Message, name, "<tool>"),
			data: strings.ReplaceAll(string(we.Data), name, "<tool>")}
	}
	if res.IsError {
		return answer{kind: "tool error", message: strings.ReplaceAll(toolText(res), name, "<tool>")}
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var echo struct{ Backend, Tool string }
	_ = json.Unmarshal(raw, &echo)
	return answer{ok: true, by: echo.Backend + "_" + echo.Tool}
}

// checkCalls calls every tool of the world and two unknown names: a
// permitted tool is answered by its own backend; a denied one exactly as
// an unknown one.
func checkCalls(t *testing.T, cs *mcp.ClientSession, w world, o oracle, p principal, what string, call caller) {
	t.Helper()
	unknown := callAnswer(t.Context(), cs, call, w.tools[0].backend+"_no_such_tool")
	if unknown.ok || unknown.kind == "transport error" {
		t.Fatalf("%s %s: an unknown tool's call: %+v", what, p.subject, unknown)
	}
	if other := callAnswer(t.Context(), cs, call, "zulu_search_invoice"); other != unknown {
		t.Errorf("%s %s: two unknown tools are answered differently: %+v and %+v", what, p.subject, unknown, other)
	}
	for _, tool := range w.tools {
		got := callAnswer(t.Context(), cs, call, tool.advertised())
		switch {
		case o.allowed(p, tool) && (!got.ok || got.by != tool.advertised()):
			t.Errorf("%s %s: calling permitted %s: %+v", what, p.subject, tool.advertised(), got)
		case !o.allowed(p, tool) && got.ok:
			t.Errorf("LEAK: %s %s: called %s, which the policy denies: %+v", what, p.subject, tool.advertised(), got)
		case !o.allowed(p, tool) && got != unknown:
			t.Errorf("LEAK: %s %s: denied %s is answered %+v, an unknown tool %+v (an existence oracle)", what, p.subject, tool.advertised(), got, unknown)
		}
	}
}

// checkSearch runs find_tool with each tool's description and two broad
// queries: every hit is permitted, and a permitted tool is found by its own
// description.
func checkSearch(t *testing.T, cs *mcp.ClientSession, w world, o oracle, p principal, era string) {
	t.Helper()
	queries := []string{"records in the system", "search create delete update list export archive send"}
	for _, tool := range w.tools {
		queries = append(queries, tool.description)
	}
	for i, q := range queries {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "find_tool", Arguments: map[string]any{"tool_description": q}})
		if err != nil {
			t.Errorf("%s %s: find_tool %q: %v", era, p.subject, q, err)
			continue
		}
		if res.IsError {
			t.Errorf("%s %s: find_tool %q: isError: %s", era, p.subject, q, toolText(res))
			continue
		}
		raw, _ := json.Marshal(res.StructuredContent)
		var found struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(raw, &found); err != nil {
			t.Fatalf("%s %s: find_tool result %s: %v", era, p.subject, raw, err)
		}
		var hits []string
		for _, hit := range found.Tools {
			hits = append(hits, hit.Name)
			if !slices.Contains(o.view(w, p), hit.Name) {
				t.Errorf("LEAK: %s %s: find_tool %q found %s, which the policy denies", era, p.subject, q, hit.Name)
			}
		}
		if i >= 2 {
			if tool := w.tools[i-2]; o.allowed(p, tool) && !slices.Contains(hits, tool.advertised()) {
				t.Errorf("%s %s: find_tool with the description of permitted %s found only %v", era, p.subject, tool.advertised(), hits)
			}
		}
	}
}

func toolText(res *mcp.CallToolResult) string {
	var text []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	return strings.Join(text, " ")
}

// firstPage returns the cursor after p's first page and that page's last
// name ("" when the view fits on one page).
func firstPage(t *testing.T, url string, p principal) (cursor, last string) {
	t.Helper()
	res, err := connect(t, url, harness.Modern, p).ListTools(t.Context(), nil)
	if err != nil {
		t.Fatalf("%s: first page: %v", p.subject, err)
	}
	if res.NextCursor == "" || len(res.Tools) == 0 {
		return "", ""
	}
	return res.NextCursor, res.Tools[len(res.Tools)-1].Name
}

// checkReplayedCursor presents another principal's cursor: it is refused
// as invalid params, or it pages through this principal's own view only,
// after the cursor's key.
func checkReplayedCursor(t *testing.T, cs *mcp.ClientSession, p principal, era string, view []string, cursor, last string) {
	t.Helper()
	if cursor == "" {
		return
	}
	res, err := cs.ListTools(t.Context(), &mcp.ListToolsParams{Cursor: cursor})
	if err != nil {
		var we *jsonrpc.Error
		if !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("%s %s: a replayed cursor: %v, want a page or invalid params", era, p.subject, err)
		}
		return
	}
	for _, tool := range res.Tools {
		if !slices.Contains(view, tool.Name) {
			t.Errorf("LEAK: %s %s: a replayed cursor lists %s, which the policy denies", era, p.subject, tool.Name)
		}
		if tool.Name <= last {
			t.Errorf("%s %s: a replayed cursor after %s lists %s", era, p.subject, last, tool.Name)
		}
	}
}
