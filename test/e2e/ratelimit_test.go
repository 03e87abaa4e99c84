package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.yaml.in/yaml/v3"

	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// rawCall is one Modern tools/call of alpha_echo as the holder of key,
// with the answer's status, Retry-After and JSON-RPC error code.
func rawCall(t *testing.T, url, key string) (status int, retryAfter string, code int) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"alpha_echo","arguments":{"n":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"e2e","version":"0"}}}}`
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "alpha_echo", "Authorization": "Bearer " + key} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var msg struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") == "application/json" {
		_ = json.Unmarshal(raw, &msg)
	}
	if msg.Error != nil {
		code = msg.Error.Code
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), code
}

// TestRateLimitsLive: rate limits written into the configuration file of
// running processes take effect without a restart (and without a
// "needs a restart" warning); with the indexer down, a request whose
// tokens cannot be taken is admitted (onUnavailable: open) and counted.
func TestRateLimitsLive(t *testing.T) {
	var aggOps string
	c := harness.Start(t, harness.Options{Backends: []harness.Backend{{Name: "alpha"}}, Configure: func(cfg *config.Config) {
		cfg.Reload.Interval = config.Duration(200 * time.Millisecond)
		aggOps = harness.FreeAddr(t)
		cfg.Aggregator.HTTPListen = aggOps
		withAggregatorIndexer(t, cfg)
		cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: aliceKey, Subject: "alice"}, {Key: bobKey, Subject: "bob"}}}
	}})
	for i := range 5 {
		testkit.Eventually(t, "alpha_echo is served", 30*time.Second, func() error {
			if status, _, _ := rawCall(t, c.MCPURL, aliceKey); status != http.StatusOK {
				return fmt.Errorf("call %d: %d", i, status)
			}
			return nil
		})
	}

	file := *c.Config
	file.RateLimits = config.RateLimits{Limits: []config.RateLimit{{Name: "live", Per: config.RatePerPrincipal, Rate: "1/h", Burst: 2}}}
	raw, err := yaml.Marshal(&file)
	if err != nil {
		t.Fatal(err)
	}
	writeAtomically(t, c.ConfigPath, raw)
	testkit.Eventually(t, "the aggregator reloads", 10*time.Second, func() error {
		if got := metric(t, aggOps, `switchboard_config_reloads_total{result="ok"}`); got != "1" {
			return fmt.Errorf("ok reloads %q", got)
		}
		return nil
	})
	var statuses []int
	for range 3 {
		status, retryAfter, code := rawCall(t, c.MCPURL, aliceKey)
		statuses = append(statuses, status)
		if status == http.StatusTooManyRequests {
			if n, err := strconv.Atoi(retryAfter); err != nil || n < 1 || code != 429 {
				t.Fatalf("refusal: Retry-After %q, code %d", retryAfter, code)
			}
		}
	}
	if fmt.Sprint(statuses) != "[200 200 429]" {
		t.Fatalf("after the reload: %v, want the burst of 2 then 429", statuses)
	}
	if log := c.Aggregator.Log(1 << 20); strings.Contains(log, "needs a restart") {
		t.Fatalf("the aggregator wants a restart for rateLimits:\n%s", log)
	}

	// The indexer goes: bob, whose bucket this aggregator never asked
	// for, is admitted (fail open), and the metric says so.
	c.Indexer.Stop()
	if status, _, _ := rawCall(t, c.MCPURL, bobKey); status != http.StatusOK {
		t.Fatalf("bob with the indexer down: %d, want admitted (onUnavailable: open)", status)
	}
	if got := metric(t, aggOps, `switchboard_aggregator_ratelimit_unavailable_total{decision="open"}`); got != "1" {
		t.Fatalf("unavailable_total{open} = %q, want 1", got)
	}
	// alice's bucket is known empty for the hour: still refused.
	if status, _, _ := rawCall(t, c.MCPURL, aliceKey); status != http.StatusTooManyRequests {
		t.Fatalf("alice with the indexer down: %d, want 429 (her bucket is known empty)", status)
	}
}

// TestLegacySubscriptionsCountedOnce: each resource a Legacy session
// subscribes to takes one token and leaves one event, however many it
// subscribes to after it. The gateway opens the session's watch again
// with every subscription at each change; the watch renews those it had,
// so four subscriptions one by one fit a burst of four and every one
// stays delivered (each once re-admitted all those before it: ten tokens,
// and the limit then dropped subscriptions the client had been answered).
func TestLegacySubscriptionsCountedOnce(t *testing.T) {
	const spec = `
tools:
  - {name: echo, behaviour: echo}
resources:
  - {uri: "alpha://r1", name: r1, text: "1"}
  - {uri: "alpha://r2", name: r2, text: "2"}
  - {uri: "alpha://r3", name: r3, text: "3"}
  - {uri: "alpha://r4", name: r4, text: "4"}
`
	trail := filepath.Join(t.TempDir(), "audit.jsonl")
	c := harness.Start(t, harness.Options{Backends: []harness.Backend{{Name: "alpha", Spec: spec}},
		Configure: func(cfg *config.Config) {
			cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: "alice-key", Subject: "alice"}}}
			withAggregatorIndexer(t, cfg) // the buckets live in the indexer
			cfg.RateLimits = config.RateLimits{Limits: []config.RateLimit{{Name: "subs", Per: config.RatePerPrincipal,
				Methods: []string{config.RateMethodResourceSubscribe}, Rate: "1/h", Burst: 4}}}
			cfg.Audit = config.Audit{Sink: config.AuditFile, File: trail}
		}})
	updated := make(chan string, 64)
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "0"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) { updated <- req.Params.URI },
	})
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: c.MCPURL,
		HTTPClient: &http.Client{Transport: bearer("alice-key")}, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: harness.Legacy})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	uris := []string{"alpha://r1", "alpha://r2", "alpha://r3", "alpha://r4"}
	delivered := func(uri string) {
		t.Helper()
		testkit.Eventually(t, "updates of "+uri+" delivered", 20*time.Second, func() error {
			drain(updated)
			touch(t, c.BackendURLs["alpha"], uri)
			return awaitUpdate(updated, uri)
		})
	}
	for _, uri := range uris {
		if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatalf("subscribe %s: %v", uri, err)
		}
		// The session's watch has it (its GET stream open) before the next.
		delivered(uri)
	}
	delivered("alpha://r1")
	testkit.Eventually(t, "one resource_subscribe event, ok, per URI", 10*time.Second, func() error {
		raw, err := os.ReadFile(trail)
		if err != nil {
			return err
		}
		events := map[string][]audit.Outcome{}
		for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			var e audit.Event
			if json.Unmarshal([]byte(line), &e) == nil && e.Kind == audit.KindResourceSubscribe {
				events[e.Resource] = append(events[e.Resource], e.Outcome)
			}
		}
		for _, uri := range uris {
			if got := events[uri]; len(got) != 1 || got[0] != audit.OutcomeOK {
				return fmt.Errorf("events %v, want one ok for each of %v", events, uris)
			}
		}
		return nil
	})
}

// A multi-round-trip retry that a rate limit refuses (429) keeps its
// requestState: the client sends the same retry again once the limit
// allows, and it completes, once; the state is still good for one use
// only. Before, the gateway used the state up before the aggregator's
// limit refused the retry, so the client's retry after Retry-After was
// refused as a replay and the request was lost.
func TestRateLimitedRetryKeepsItsState(t *testing.T) {
	c := harness.Start(t, harness.Options{
		Backends: []harness.Backend{{Name: "shop", Spec: refusalSpec}},
		Configure: func(cfg *config.Config) {
			withAggregatorIndexer(t, cfg)
			cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: refusalKey, Subject: "alice"}}}
			// One call, then one every five seconds: the retry right
			// after the first round is refused.
			cfg.RateLimits.Limits = []config.RateLimit{{Name: "slow", Per: config.RatePerPrincipal, Rate: "12/m", Burst: 1}}
		},
	})
	pay := func(extra string) refusalReply {
		_, r := refusalPost(t, c.MCPURL, modernHeader("tools/call", "shop_pay"), modernBody("tools/call", `"name":"shop_pay","arguments":{"amount":3}`+extra))
		return r
	}
	first := pay("")
	var state string
	if first.Error != nil || string(first.Result["resultType"]) != `"input_required"` || json.Unmarshal(first.Result["requestState"], &state) != nil {
		t.Fatalf("the first round: %s, want input_required with a requestState", first)
	}
	retry := `,"inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}},"requestState":` + jsonQuoted(state)
	if r := pay(retry); r.status != http.StatusTooManyRequests {
		t.Fatalf("the retry within the limit's interval: %s, want HTTP 429", r)
	}
	testkit.Eventually(t, "the retry completes once the limit allows", 30*time.Second, func() error {
		r := pay(retry)
		switch {
		case r.status == http.StatusTooManyRequests:
			return fmt.Errorf("still limited: %s", r)
		case r.Error != nil || string(r.Result["resultType"]) != `"complete"`:
			t.Fatalf("the retry after the limit allowed it: %s, want the complete result", r)
		}
		return nil
	})
	testkit.Eventually(t, "a replay of the completed retry is refused", 30*time.Second, func() error {
		r := pay(retry)
		switch {
		case r.status == http.StatusTooManyRequests:
			return fmt.Errorf("still limited: %s", r)
		case r.Error == nil || r.Error.Code != -32602:
			t.Fatalf("the replay: %s, want -32602 (already used)", r)
		}
		return nil
	})
}

// TestRefusedSearchesTakeTokens: a find_tool refused as it stands (past
// its length bound, too many keywords, only spaces, an empty or missing
// description) takes a token from the principal's find_tool limits, as
// every refused request does: each is an event in the trail, and a
// client could otherwise send them without any limit. Once the bucket is
// empty they are refused as rate limited, and so is a good search. An
// empty or missing description was once refused by the gateway itself,
// never limited.
func TestRefusedSearchesTakeTokens(t *testing.T) {
	optimizer := true
	c := harness.Start(t, harness.Options{Backends: []harness.Backend{{Name: "tickets"}}, Configure: func(cfg *config.Config) {
		cfg.Servers = append(cfg.Servers, config.Server{Name: "find", Backends: []string{"tickets"}, Optimizer: &optimizer})
		// Not /optimized, where the searches that wait for the indexer
		// run.
		cfg.RateLimits.Limits = []config.RateLimit{{Name: "find-user", Per: config.RatePerPrincipal, Rate: "1/h", Burst: 5,
			Methods: []string{config.RateMethodFindTool}, Match: config.RateLimitMatch{Servers: []string{"find"}}}}
	}})
	ready := harness.Connect(t, c.MCPURL+"/optimized", harness.Modern)
	testkit.Eventually(t, "find_tool answers", 60*time.Second, func() error {
		res, err := ready.CallTool(t.Context(), &mcp.CallToolParams{Name: "find_tool", Arguments: map[string]any{"tool_description": "echo"}})
		if err != nil || res.IsError {
			return fmt.Errorf("find_tool: %v %v", text(res), err)
		}
		return nil
	})
	cs := harness.Connect(t, strings.TrimSuffix(c.MCPURL, "/mcp")+"/mcp/find", harness.Modern)
	find := func(args map[string]any) (*mcp.CallToolResult, error) {
		return cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "find_tool", Arguments: args})
	}
	for _, args := range []map[string]any{
		{"tool_description": strings.Repeat("echo ", 1000)},
		{"tool_description": "echo", "tool_keywords": make([]string, 40)},
		{"tool_description": "   "},
		{"tool_description": ""},
		{},
	} {
		if res, err := find(args); err != nil || !res.IsError {
			t.Fatalf("a search refused as it stands: %q, %v; want a tool error", text(res), err)
		} else if _, given := args["tool_description"]; !given && !strings.Contains(text(res), "find_tool needs tool_description") {
			t.Fatalf("a search without a description: %q; want what find_tool needs", text(res))
		}
	}
	for _, args := range []map[string]any{{"tool_description": strings.Repeat("echo ", 1000)}, {}, {"tool_description": "echo"}} {
		if res, err := find(args); err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
			t.Fatalf("find_tool past the burst: %q, %v; want HTTP 429", text(res), err)
		}
	}
}

// TestGatewayRefusalsTakeTokens: a request the gateway refuses itself
// (here a tools/call whose arguments are not an object, which never
// reaches the aggregator) takes a token from its principal's limits, from
// the same shared bucket as the calls the aggregator admits, as
// configuration.md (rateLimits) says of every refusal: once the bucket is
// empty it is refused as rate limited (HTTP 429, error 429), and its
// audit event says rate_limited, as the aggregator's of a call it limits
// does. An accepted call costs the gateway no token request. Before, such
// refusals took no token: with the bucket empty each was still answered
// -32602 and wrote an invalid event, without any bound.
func TestGatewayRefusalsTakeTokens(t *testing.T) {
	trail := filepath.Join(t.TempDir(), "audit.jsonl")
	c := harness.Start(t, harness.Options{
		Backends: []harness.Backend{{Name: "shop", Spec: refusalSpec}},
		Configure: func(cfg *config.Config) {
			withAggregatorIndexer(t, cfg)
			cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: refusalKey, Subject: "alice", Groups: []string{"support"}}}}
			cfg.Gateway.HTTP.TrustClientTraceparent = true
			cfg.Audit = config.Audit{Sink: config.AuditFile, File: trail}
			// A burst of two, and no refill within the test: one token
			// for the malformed call, one for a good one.
			cfg.RateLimits = config.RateLimits{Limits: []config.RateLimit{{Name: "each-user", Per: config.RatePerPrincipal, Rate: "1/h", Burst: 2}}}
		},
	})
	metrics := strings.TrimSuffix(c.MCPURL, "/mcp") + "/metrics"
	call := func(body string) (string, refusalReply) {
		return refusalPost(t, c.MCPURL, modernHeader("tools/call", "shop_lookup"), body)
	}
	valid := modernBody("tools/call", `"name":"shop_lookup","arguments":{"order":"1"}`)
	malformed := modernBody("tools/call", `"name":"shop_lookup","arguments":["1"]`)

	if _, r := call(valid); r.status != http.StatusOK || r.Error != nil {
		t.Fatalf("a valid call: %s, want HTTP 200", r)
	}
	if m := metricsText(t, metrics); strings.Contains(m, "switchboard_gateway_ratelimit_lease_acquisitions_total{") {
		t.Fatalf("an accepted call made the gateway take tokens:\n%s", m)
	}
	refusedTrace, r := call(malformed)
	if r.status != http.StatusBadRequest || r.Error == nil || r.Error.Code != -32602 {
		t.Fatalf("a malformed call with a token left: %s, want HTTP 400 -32602", r)
	}
	if _, r := call(valid); r.status != http.StatusTooManyRequests {
		t.Fatalf("a valid call after the malformed one: %s, want HTTP 429 (the refusal took the last token)", r)
	}
	limited := map[string]bool{}
	for range 5 {
		trace, r := call(malformed)
		if r.status != http.StatusTooManyRequests || r.Error == nil || r.Error.Code != 429 {
			t.Fatalf("a malformed call with the bucket empty: %s, want HTTP 429, error 429", r)
		}
		limited[trace] = true
	}
	// The same client naming a tool that does not exist reaches the
	// aggregator, which holds it to the same empty bucket.
	if _, r := refusalPost(t, c.MCPURL, modernHeader("tools/call", "shop_nothing"),
		modernBody("tools/call", `"name":"shop_nothing","arguments":{}`)); r.status != http.StatusTooManyRequests {
		t.Fatalf("an unknown tool with the bucket empty: %s, want HTTP 429", r)
	}
	testkit.Eventually(t, "the gateway's refusals in the trail", 10*time.Second, func() error {
		events, err := trailEvents(trail, audit.KindToolCall)
		if err != nil {
			return err
		}
		outcomes := map[string][]audit.Outcome{}
		for _, e := range events {
			if e.TraceID == refusedTrace || limited[e.TraceID] {
				if e.Service != "gateway" {
					return fmt.Errorf("trace %s recorded by %s, want the gateway", e.TraceID, e.Service)
				}
				outcomes[e.TraceID] = append(outcomes[e.TraceID], e.Outcome)
			}
		}
		if got := outcomes[refusedTrace]; len(got) != 1 || got[0] != audit.OutcomeInvalid {
			return fmt.Errorf("the refusal with a token left: outcomes %v, want one invalid", got)
		}
		for trace := range limited {
			if got := outcomes[trace]; len(got) != 1 || got[0] != audit.OutcomeRateLimited {
				return fmt.Errorf("a refusal with the bucket empty: outcomes %v, want one rate_limited", got)
			}
		}
		return nil
	})
}
