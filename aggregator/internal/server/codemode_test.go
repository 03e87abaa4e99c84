package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"

	"github.com/switchboard-mcp/switchboard/services/audit"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// withWeather gives a backend forecast (a city's high, in structured
// content), secret, and ask, which asks the client a question
// (input_required) before it answers.
func withWeather(b *testBackend) {
	b.server.AddTool(&mcp.Tool{Name: "forecast", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct{ City string }
		_ = json.Unmarshal(req.Params.Arguments, &in)
		return &mcp.CallToolResult{StructuredContent: map[string]any{"city": in.City, "highC": len(in.City) * 3},
			Content: []mcp.Content{&mcp.TextContent{Text: in.City}}}, nil
	})
	b.server.AddTool(&mcp.Tool{Name: "secret", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "the secret"}}}, nil
	})
	b.server.AddTool(&mcp.Tool{Name: "ask", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"ok": &mcp.ElicitParams{Message: "sure?",
			RequestedSchema: map[string]any{"type": "object"}}}, RequestState: "state"}, nil
	})
}

const codePolicy = `
permit (principal in Group::"users", action, resource);
forbid (principal in Group::"nosecret", action == Action::"call_tool", resource == Tool::"weather_secret");
`

// TestCodeModeCallsAreAdmittedLikeDirectOnes: a program's tool calls go
// through the one admission: a tool the caller may not call (denied,
// filtered out by its server, or missing) is not there for the program
// either, the rate limits count each call, and each call's audit event
// names the run, whose own event names it too. A tool that asks for
// input is refused clearly; a server without code mode has no run_code.
func TestCodeModeCallsAreAdmittedLikeDirectOnes(t *testing.T) {
	weather := newTestBackend(t, "weather", backendOptions{extra: withWeather})
	file := t.TempDir() + "/audit.jsonl"
	h := startAggregatorFile(t, `
aggregator:
  authz: {policyFile: `+writeFile(t, "policy.cedar", codePolicy)+`}
  backends:
    - {name: weather, url: `+weather.url()+`}
  codeMode: {enabled: true, maxConcurrent: 2}
servers:
  - {name: public, backends: [weather], tools: {exclude: [weather_secret]}}
  - {name: plain, backends: [weather], codeMode: false}
rateLimits:
  limits:
    - {name: forecasts, per: principal, match: {tools: [weather_forecast]}, rate: 1/h, burst: 3, methods: [tools/call]}
audit:
  sink: file
  file: `+file+`
`)
	ctx := context.Background()
	alice, carol := principal("alice", "users"), principal("carol", "users", "nosecret")
	run := func(p *commonv1.Principal, server, program string) map[string]any {
		t.Helper()
		resp, err := h.gateway.RunCode(ctx, &aggregatorv1.RunCodeRequest{Principal: p, Server: server, Program: program})
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		var res struct {
			StructuredContent map[string]any `json:"structuredContent"`
			IsError           bool           `json:"isError"`
		}
		if err := json.Unmarshal([]byte(resp.GetResultJson()), &res); err != nil {
			t.Fatal(err)
		}
		return res.StructuredContent
	}

	got := run(alice, "", `
best = None
for c in ["Oslo", "Lisbon", "Rome"]:
    f = weather_forecast(city=c)
    if best == None or f["highC"] > best["highC"]:
        best = f
result = best["city"]
`)
	if got["result"] != "Lisbon" || got["calls"] != float64(3) {
		t.Fatalf("result %v", got)
	}
	if n := weather.received("tools/call"); n != 3 {
		t.Fatalf("the backend got %d calls, want 3", n)
	}

	// Denied, filtered out and missing look alike, and can be caught: no
	// function of the name, and call() refused the same way.
	const probe = `
b, eb = try_call(call, "weather_secret")
c, ec = try_call(call, "weather_nonexistent")
result = [eb, ec]
`
	want := []any{`no tool named "weather_secret" is available to you (find tools with find_tool)`,
		`no tool named "weather_nonexistent" is available to you (find tools with find_tool)`}
	for who, c := range map[string]struct {
		p      *commonv1.Principal
		server string
	}{"carol (denied)": {carol, ""}, "alice at public (filtered)": {alice, "public"}} {
		got := run(c.p, c.server, probe)
		if res, _ := got["result"].([]any); len(res) != 2 || res[0] != want[0] || res[1] != want[1] {
			t.Errorf("%s: %v", who, got)
		}
		for _, name := range []string{"weather_secret", "weather_nonexistent"} {
			got := run(c.p, c.server, "x = 1\n"+name+"()\n")
			if got["error"] != "undefined: "+name || got["line"] != float64(2) {
				t.Errorf("%s calling %s: %v", who, name, got)
			}
		}
	}
	if n := weather.received("tools/call"); n != 3 {
		t.Fatalf("a refused call reached the backend: %d calls", n)
	}

	// The rate limit counts a program's calls: alice took three. The
	// program is told what a direct caller is, when to retry, and not
	// the limit's name, which is not sent to MCP clients (the program's
	// result is the client's): it was "rate limited (forecasts)".
	got = run(alice, "", `v, err = try_call(weather_forecast, city="Oslo")
result = err`)
	if e, _ := got["result"].(string); !strings.HasPrefix(e, "weather_forecast: rate limited: retry after ") || strings.Contains(e, "forecasts") {
		t.Errorf("a fourth forecast: %v", got)
	}

	// A tool that asks for input: its backend is told the client cannot
	// answer, and go-sdk's refuses; the program gets what a direct
	// caller would, with the line. (A backend that asks anyway is
	// test/e2e's.)
	got = run(alice, "", "x = 1\nweather_ask()\n")
	if e, _ := got["error"].(string); !strings.HasPrefix(e, "weather_ask failed: ") || got["line"] != float64(2) {
		t.Errorf("input_required: %v", got)
	}

	// Code mode off for a server: no run_code, as for a missing tool.
	_, err := h.gateway.RunCode(ctx, &aggregatorv1.RunCodeRequest{Principal: alice, Server: "plain", Program: "result = 1"})
	wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	// An unknown server is answered alike, and recorded alike (it once
	// took a rate-limit token and left no event).
	_, err = h.gateway.RunCode(ctx, &aggregatorv1.RunCodeRequest{Principal: alice, Server: "no-such", Program: "result = 1"})
	wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	for server, want := range map[string]bool{"": true, "public": true, "plain": false} {
		d, err := h.gateway.Discover(ctx, &aggregatorv1.DiscoverRequest{Principal: alice, Server: server})
		if err != nil || d.GetCodeMode() != want {
			t.Errorf("server %q: code_mode %v (%v), want %v", server, d.GetCodeMode(), err, want)
		}
	}

	// The trail: each run, and each call naming its run.
	h.audit.Close()
	runs := map[string]bool{}
	var inner []audit.Event
	refusedRuns := map[string]audit.Outcome{}
	for _, e := range readTrail(t, file) {
		switch e.Kind {
		case audit.KindCodeRun:
			if e.Server == "plain" || e.Server == "no-such" {
				refusedRuns[e.Server] = e.Outcome
			}
			if id, ok := strings.CutPrefix(e.Detail, "run "); ok {
				id, _, _ = strings.Cut(id, ":")
				runs["run_code "+id] = true
			}
		case audit.KindToolCall:
			inner = append(inner, e)
		}
	}
	if len(runs) != 9 {
		t.Errorf("%d runs recorded, want 9 (the ones refused name none)", len(runs))
	}
	if refusedRuns["plain"] != audit.OutcomeNotFound || refusedRuns["no-such"] != audit.OutcomeNotFound {
		t.Errorf("refused runs recorded as %v, want not_found for plain and no-such", refusedRuns)
	}
	outcomes := map[audit.Outcome]int{}
	for _, e := range inner {
		if !runs[e.Via] {
			t.Errorf("call %s (%s) names run %q, not a recorded one", e.Tool, e.Outcome, e.Via)
		}
		outcomes[e.Outcome]++
	}
	if outcomes[audit.OutcomeOK] != 3 || outcomes[audit.OutcomeDenied] != 1 || outcomes[audit.OutcomeNotFound] != 3 || outcomes[audit.OutcomeRateLimited] != 1 {
		t.Errorf("inner call outcomes %v", outcomes)
	}
}

// TestCodeModeNeedsACredentialThatMayCallTools: a program's calls are
// CallTools, so a credential allowed RunCode but not CallTool (one that
// may assert any principal) runs none: it once called any tool as
// anyone through a program, which its allow list refuses it directly.
func TestCodeModeNeedsACredentialThatMayCallTools(t *testing.T) {
	weather := newTestBackend(t, "weather", backendOptions{extra: withWeather})
	h := startAggregatorFile(t, `
aggregator:
  backends:
    - {name: weather, url: `+weather.url()+`}
  codeMode: {enabled: true, maxConcurrent: 1}
`)
	ctx := context.Background()
	alice := principal("alice", "users")
	_, err := h.coder.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: alice, Name: "weather_secret"})
	wantStatus(t, err, codes.PermissionDenied, commonv1.ErrorReason_ERROR_REASON_METHOD_NOT_ALLOWED)
	_, err = h.coder.RunCode(ctx, &aggregatorv1.RunCodeRequest{Principal: alice, Program: "result = weather_secret()\n"})
	wantStatus(t, err, codes.PermissionDenied, commonv1.ErrorReason_ERROR_REASON_METHOD_NOT_ALLOWED)
	if n := weather.received("tools/call"); n != 0 {
		t.Fatalf("the backend got %d calls from a credential that may call no tool", n)
	}
	if _, err := h.gateway.RunCode(ctx, &aggregatorv1.RunCodeRequest{Principal: alice, Program: "result = weather_secret()\n"}); err != nil {
		t.Fatalf("the gateway's run: %v", err)
	}
}
