package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/config"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

const (
	auditKey       = "audit-key-" + "c3d4c3d4c3d4c3d4"
	auditTraceID   = "4bf92f3577b34da6a3ce929d0e0e4736"
	auditHiddenVal = "tenant-hidden-" + "9e1f"
	auditPolicy    = `
permit (principal, action, resource);
forbid (principal, action == Action::"call_tool", resource == Tool::"shop_refund");
`
)

// auditTransport is a client's HTTP: its API key and a W3C traceparent
// on every request, so the trail's trace ids can be checked.
type auditTransport struct{}

func (auditTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+auditKey)
	r.Header.Set("traceparent", "00-"+auditTraceID+"-00f067aa0ba902b7-01")
	return http.DefaultTransport.RoundTrip(r)
}

func auditConnect(t *testing.T, url, version string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "switchboard-audit-test", Version: "0"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: auditTransport{}}}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect %s (%q): %v", url, version, err)
	}
	return cs
}

// TestAuditTrail: through the real processes, in both eras, a normal
// call, a call the Cedar policy denies (answered like a missing tool), a
// find_tool, a Legacy session's start and end and a configuration reload
// of each service appear in the trail with the right fields: in the JSON
// lines of the file sink and, shipped to the indexer, in PostgreSQL
// through the operator's QueryAuditEvents. A tool override's hidden value
// never appears, even with audit.arguments: values.
func TestAuditTrail(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.cedar")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	trail := filepath.Join(dir, "audit.jsonl")
	aggregatorToken := "aggregator-" + strings.Repeat("e5", 16)
	c := harness.Start(t, harness.Options{
		Backends: []harness.Backend{{Name: "shop", Spec: pinnedSpec}},
		Configure: func(cfg *config.Config) {
			cfg.ServiceAuth.Credentials = append(cfg.ServiceAuth.Credentials,
				config.ServiceCredential{Name: "aggregator", Token: aggregatorToken, AssertPrincipals: true, Allow: config.AggregatorMethods})
			// The aggregator reaches the indexer there, pinning off.
			cfg.Aggregator.Pinning.Indexer = config.Endpoint{Address: cfg.Indexer.Listen, Token: aggregatorToken}
			cfg.Aggregator.Authz.PolicyFile = policy
			cfg.Aggregator.ToolOverrides = []config.ToolOverride{{Backend: "shop", Tool: "lookup",
				Arguments: map[string]config.ArgumentOverride{"tenant": {Hidden: true, Value: auditHiddenVal}}}}
			cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: auditKey, Subject: "alice", Groups: []string{"support"}}}}
			cfg.Gateway.HTTP.TrustClientTraceparent = true
			cfg.Audit = config.Audit{Sink: config.AuditFile, File: trail, Arguments: config.AuditValues,
				Database: config.AuditDatabase{Enabled: true}}
			// Two lookups per principal, then none (the normal calls below
			// take both; the burst after them is refused).
			cfg.RateLimits = config.RateLimits{Limits: []config.RateLimit{{Name: "lookups", Per: "principal",
				Match: config.RateLimitMatch{Tools: []string{"shop_lookup"}}, Rate: "1/h", Burst: 2, Methods: []string{"tools/call"}}}}
		},
	})
	ctx := t.Context()
	testkit.Eventually(t, "the indexer knows the tools", 60*time.Second, func() error {
		if hits := findTool(t, auditConnect(t, strings.TrimSuffix(c.MCPURL, "/mcp")+"/mcp/optimized", harness.Modern), "look up an order"); len(hits) == 0 {
			return fmt.Errorf("find_tool found nothing")
		}
		return nil
	})
	for _, era := range []string{harness.Modern, harness.Legacy} {
		cs := auditConnect(t, c.MCPURL, era)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "shop_lookup", Arguments: map[string]any{"order": "A-" + era}})
		if err != nil || res.IsError {
			t.Fatalf("era %q: normal call: %v %v", era, res, err)
		}
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "shop_refund", Arguments: map[string]any{"order": "B"}}); err == nil {
			t.Fatalf("era %q: the denied call succeeded", era)
		}
		if err := cs.Close(); err != nil { // Legacy: DELETE ends the session
			t.Fatalf("era %q: close: %v", era, err)
		}
	}
	// A burst past the limit: refused as rate limited (HTTP 429, which
	// go-sdk's Modern client reports as the transport's answer; the JSON-RPC
	// error and Retry-After are test/e2e ratelimit_test.go's).
	burst := auditConnect(t, c.MCPURL, harness.Modern)
	for range 3 {
		_, err := burst.CallTool(ctx, &mcp.CallToolParams{Name: "shop_lookup", Arguments: map[string]any{"order": "C"}})
		if err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
			t.Fatalf("a call past the rate limit: %v; want 429 Too Many Requests", err)
		}
	}
	for _, p := range []*harness.Proc{c.Gateway, c.Aggregator, c.Indexer} {
		if err := syscall.Kill(p.Pid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}

	// The JSON lines: every event, with its fields.
	var events []audit.Event
	readTrail := func() error {
		raw, err := os.ReadFile(trail)
		if err != nil {
			return err
		}
		if strings.Contains(string(raw), auditHiddenVal) {
			t.Fatalf("the trail holds the hidden override value:\n%s", raw)
		}
		events = events[:0]
		lines := bufio.NewScanner(strings.NewReader(string(raw)))
		lines.Buffer(nil, 1<<20)
		for lines.Scan() {
			var e audit.Event
			if err := json.Unmarshal(lines.Bytes(), &e); err != nil {
				t.Fatalf("not a JSON line: %q: %v", lines.Text(), err)
			}
			events = append(events, e)
		}
		return nil
	}
	count := func(match func(audit.Event) bool) int {
		n := 0
		for _, e := range events {
			if match(e) {
				n++
			}
		}
		return n
	}
	call := func(tool string, outcome audit.Outcome) func(audit.Event) bool {
		return func(e audit.Event) bool {
			return e.Service == "aggregator" && e.Kind == audit.KindToolCall && e.Tool == tool && e.Outcome == outcome &&
				e.Subject == "alice" && len(e.Groups) == 1 && e.Groups[0] == "support" && e.Backend == "shop" &&
				e.TraceID == auditTraceID && len(e.ArgumentsSHA256) == 64 && e.LatencyMS > 0
		}
	}
	reload := func(service string) func(audit.Event) bool {
		return func(e audit.Event) bool {
			return e.Service == service && e.Kind == audit.KindConfigReload && e.Outcome == audit.OutcomeOK && e.Detail == "SIGHUP"
		}
	}
	testkit.Eventually(t, "every event in the JSON lines", 30*time.Second, func() error {
		if err := readTrail(); err != nil {
			return err
		}
		checks := map[string]int{
			"normal calls":       count(call("shop_lookup", audit.OutcomeOK)),
			"denied calls":       count(call("shop_refund", audit.OutcomeDenied)),
			"rate-limited calls": count(call("shop_lookup", audit.OutcomeRateLimited)),
			"find_tool": count(func(e audit.Event) bool {
				return e.Service == "indexer" && e.Kind == audit.KindFindTool && e.Subject == "alice" && e.Outcome == audit.OutcomeOK && e.TraceID == auditTraceID
			}),
			"session starts": count(func(e audit.Event) bool {
				return e.Service == "gateway" && e.Kind == audit.KindSessionStart && e.Outcome == audit.OutcomeOK && e.Subject == "alice" && len(e.Session) == 64
			}),
			"session ends": count(func(e audit.Event) bool {
				return e.Service == "gateway" && e.Kind == audit.KindSessionEnd && e.Outcome == audit.OutcomeOK && e.Subject == "alice" && len(e.Session) == 64
			}),
			"gateway reloads":    count(reload("gateway")),
			"aggregator reloads": count(reload("aggregator")),
			"indexer reloads":    count(reload("indexer")),
		}
		want := map[string]int{"normal calls": 2, "denied calls": 2, "rate-limited calls": 3, "session starts": 1, "session ends": 1}
		for what, n := range checks {
			if w, ok := want[what]; (ok && n != w) || n == 0 {
				return fmt.Errorf("%s: %d in the trail (want %d or, unlisted, at least 1)", what, n, w)
			}
		}
		return nil
	})
	// The session that started is the one that ended; the normal call's
	// values are recorded (audit.arguments: values), the hidden one not.
	var start, end string
	for _, e := range events {
		switch {
		case e.Kind == audit.KindSessionStart:
			start = e.Session
		case e.Kind == audit.KindSessionEnd:
			end = e.Session
		case call("shop_lookup", audit.OutcomeOK)(e):
			if got := string(e.Arguments); got != `{"order":"A-"}` && got != `{"order":"A-2025-11-25"}` {
				t.Errorf("recorded arguments %s", got)
			}
			if e.ArgumentsSHA256 != audit.Digest(e.Arguments) {
				t.Errorf("digest %s is not that of the client's arguments %s", e.ArgumentsSHA256, e.Arguments)
			}
		}
	}
	if start == "" || start != end {
		t.Errorf("session started %q, ended %q", start, end)
	}

	// The same events in PostgreSQL, for the operator.
	op := indexerClient(t, c.Config.Indexer.Listen, c.OperatorToken)
	query := func(q *indexerv1.QueryAuditEventsRequest) []*indexerv1.AuditEvent {
		t.Helper()
		resp, err := op.QueryAuditEvents(ctx, q)
		if err != nil {
			t.Fatalf("query %v: %v", q, err)
		}
		return resp.GetEvents()
	}
	testkit.Eventually(t, "the trail in PostgreSQL", 30*time.Second, func() error {
		denied := query(&indexerv1.QueryAuditEventsRequest{Subject: "alice", Tool: "shop_refund", Outcome: "denied"})
		if len(denied) != 2 {
			return fmt.Errorf("%d denied calls stored", len(denied))
		}
		for _, e := range denied {
			if e.GetRecordedBy() != "aggregator" || e.GetBackend() != "shop" || e.GetTraceId() != auditTraceID {
				return fmt.Errorf("denied call stored as %v", e)
			}
		}
		for kind, by := range map[string]string{"find_tool": "indexer", "session_start": "gateway", "session_end": "gateway"} {
			if got := query(&indexerv1.QueryAuditEventsRequest{Subject: "alice", Kind: kind}); len(got) == 0 || got[0].GetRecordedBy() != by {
				return fmt.Errorf("%s stored as %v", kind, got)
			}
		}
		reloads := map[string]bool{}
		for _, e := range query(&indexerv1.QueryAuditEventsRequest{Kind: "config_reload", Outcome: "ok"}) {
			reloads[e.GetService()] = true
		}
		if len(reloads) != 3 {
			return fmt.Errorf("reloads stored from %v, want all three services", reloads)
		}
		return nil
	})
	if ok := query(&indexerv1.QueryAuditEventsRequest{Tool: "shop_lookup", Outcome: "ok"}); len(ok) != 2 || strings.Contains(ok[0].GetArgumentsJson(), auditHiddenVal) {
		t.Fatalf("normal calls stored %v", ok)
	}
}
