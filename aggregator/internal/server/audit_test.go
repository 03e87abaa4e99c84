package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/server"
	"github.com/switchboard-mcp/switchboard/services/audit"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

const auditPolicy = `
permit (principal in Group::"eng", action == Action::"call_tool", resource);
permit (principal, action == Action::"read_resource", resource);
`

// The hidden value a tool override fixes; it must never reach the trail.
const hiddenTenant = "acme-hidden-tenant-7f3a"

// TestAuditTrail checks one event per call with the outcome the
// aggregator alone knows: a denial (answered NOT_FOUND like a missing
// tool), a missing tool, a normal call, a tool error, an invalid call
// (setting the hidden argument), each with its principal, server, tool,
// backend and argument digest (and the credential of a caller that is
// not the gateway), and that a hidden override value and a
// redacted argument never appear, even with audit.arguments: values.
func TestAuditTrail(t *testing.T) {
	tickets := newTestBackend(t, "tickets", backendOptions{extra: func(b *testBackend) {
		b.server.AddTool(&mcp.Tool{Name: "search", InputSchema: map[string]any{"type": "object"}},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				// The backend gets the hidden value, and echoes it back
				// (which the aggregator redacts).
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
			})
	}})
	file := t.TempDir() + "/audit.jsonl"
	h := startAggregatorFile(t, `
aggregator:
  authz: {policyFile: `+writeFile(t, "policy.cedar", auditPolicy)+`}
  backends:
    - {name: tickets, url: `+tickets.url()+`}
  toolOverrides:
    - backend: tickets
      tool: search
      arguments:
        tenant: {hidden: true, value: `+hiddenTenant+`}
servers:
  - name: support
    backends: [tickets]
audit:
  sink: file
  file: `+file+`
  arguments: values
  redactKeys: ["ssn"]
`)
	ctx := context.Background()
	alice, bob := principal("alice", "eng"), principal("bob", "sales")
	args := `{"query": "printer", "ssn": "078-05-1120"}`
	call := func(p *commonv1.Principal, server, name, args string) (*aggregatorv1.CallToolResponse, error) {
		return h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: p, Server: server, Name: name, ArgumentsJson: args})
	}
	resp, err := call(alice, "support", "tickets_search", args)
	// The backend gets the hidden value and echoes it back, which the
	// client gets redacted.
	if err != nil || !strings.Contains(resultText(t, resp.GetResultJson()), `"tenant":"[redacted]"`) || strings.Contains(resp.GetResultJson(), hiddenTenant) {
		t.Fatalf("normal call: %v %v (the backend should get and echo the hidden value, redacted on its way back)", resp, err)
	}
	_, err = call(bob, "support", "tickets_search", args)
	wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	_, err = call(alice, "", "tickets_missing", "")
	wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	if resp, err := call(alice, "", "tickets_fail", "{}"); err != nil || !resp.GetIsError() {
		t.Fatalf("failing tool: %v %v", resp, err)
	}
	_, err = call(alice, "", "tickets_search", `{"tenant":"other"}`)
	wantStatus(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_HIDDEN_ARGUMENT)
	if _, err := h.gateway.ReadResource(ctx, &aggregatorv1.ReadResourceRequest{Principal: alice, Uri: "file:///nowhere"}); err == nil {
		t.Fatal("read of a missing resource succeeded")
	}
	// A service calling as its own bound identity, not through the
	// gateway: its event names its credential.
	if _, err := h.internal.ReadResource(ctx, &aggregatorv1.ReadResourceRequest{Uri: "file:///elsewhere"}); err == nil {
		t.Fatal("read of a missing resource succeeded")
	}

	h.audit.Close() // flushes
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), hiddenTenant) || strings.Contains(string(raw), "078-05-1120") {
		t.Fatalf("the trail holds a hidden or redacted value:\n%s", raw)
	}
	var events []audit.Event
	lines := bufio.NewScanner(strings.NewReader(string(raw)))
	for lines.Scan() {
		var e audit.Event
		if err := json.Unmarshal(lines.Bytes(), &e); err != nil {
			t.Fatalf("line %q: %v", lines.Text(), err)
		}
		events = append(events, e)
	}
	type want struct {
		subject, server, tool, resource, backend string
		outcome                                  audit.Outcome
		args, caller                             string
	}
	wants := []want{
		{"alice", "support", "tickets_search", "", "tickets", audit.OutcomeOK, args, ""},
		{"bob", "support", "tickets_search", "", "tickets", audit.OutcomeDenied, args, ""},
		{"alice", "", "tickets_missing", "", "", audit.OutcomeNotFound, "", ""},
		{"alice", "", "tickets_fail", "", "tickets", audit.OutcomeToolError, "{}", ""},
		{"alice", "", "tickets_search", "", "tickets", audit.OutcomeInvalid, `{"tenant":"other"}`, ""},
		{"alice", "", "", "file:///nowhere", "", audit.OutcomeNotFound, "", ""},
		{"svc-reporter", "", "", "file:///elsewhere", "", audit.OutcomeNotFound, "", "internal"},
	}
	if len(events) != len(wants) {
		t.Fatalf("%d events, want %d:\n%s", len(events), len(wants), raw)
	}
	for i, w := range wants {
		e := events[i]
		kind := audit.KindToolCall
		if w.resource != "" {
			kind = audit.KindResourceRead
		}
		if e.Schema != audit.Schema || e.Service != "aggregator" || e.Kind != kind || e.Subject != w.subject || e.Server != w.server ||
			e.Tool != w.tool || e.Resource != w.resource || e.Backend != w.backend || e.Outcome != w.outcome || e.Caller != w.caller || e.Time.IsZero() {
			t.Errorf("event %d = %+v, want %+v", i, e, w)
		}
		if e.ArgumentsSHA256 != audit.Digest([]byte(w.args)) {
			t.Errorf("event %d digest %q, want that of %s", i, e.ArgumentsSHA256, w.args)
		}
	}
	if got := string(events[0].Arguments); got != `{"query":"printer","ssn":"[redacted]"}` {
		t.Errorf("recorded arguments %s", got)
	}
	if len(events[1].Groups) != 1 || events[1].Groups[0] != "sales" || events[1].Detail == "" {
		t.Errorf("denial %+v: want bob's groups and a detail", events[1])
	}
}

// limited is an error that names its outcome, as a rate limit's refusal
// does.
type limited struct{}

func (limited) Error() string               { return "rate limited" }
func (limited) AuditOutcome() audit.Outcome { return audit.OutcomeRateLimited }

func TestAuditOutcomeOfAnOutcomer(t *testing.T) {
	if got, _ := server.AuditOutcome(fmt.Errorf("tools/call: %w", limited{})); got != audit.OutcomeRateLimited {
		t.Fatalf("outcome %q, want rate_limited", got)
	}
}
