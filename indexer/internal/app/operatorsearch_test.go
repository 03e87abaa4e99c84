package app_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboard-mcp/switchboard/services/config"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// consoleToken is the operator console's credential: an operator's that
// asserts principals, allowed config.ConsoleMethods.
const consoleToken = "console-test-token"

// An operator looking (the console's explained search as a principal) is
// not that principal's find_tool: it takes none of the principal's
// tokens, and its audit event names the console's credential. The
// principal's own searches through the gateway's credential are charged
// and recorded without a caller, and so is an operator credential's plain
// search (only explain marks an operator's look).
func TestOperatorSearchNotChargedAndNamedInAudit(t *testing.T) {
	const burst = 3
	// Closed: were the buckets ever unavailable, searches would be
	// refused, never let through uncounted as if they were not charged.
	limits := config.RateLimits{OnUnavailable: config.RateFailClosed,
		Limits: []config.RateLimit{{Name: "searches", Per: config.RatePerPrincipal, Rate: "1/h", Burst: burst}}}
	h := startLimited(t, env.NewDatabase(t), limits, func(c *config.Config) {
		c.Audit = config.Audit{Database: config.AuditDatabase{Enabled: true}}
	})
	h.agg.SetTools(tools("sales_summary", "cost_breakdown"))
	h.waitServing(t)
	ctx := t.Context()
	console := h.as(t, consoleToken)
	erin := &commonv1.Principal{Subject: "erin"}

	// More explained searches as erin than her burst: none is refused.
	for i := range burst + 1 {
		resp, err := console.Search(ctx, &indexerv1.SearchRequest{Principal: erin, Query: "sales", Explain: true})
		if err != nil {
			t.Fatalf("explained search %d as erin: %v", i, err)
		}
		if len(resp.GetHits()) == 0 || len(resp.GetHits()[0].GetExplanation()) == 0 {
			t.Fatalf("explained search %d: %v, want explained hits", i, resp)
		}
	}
	// Erin's own burst is whole: burst searches, then the limit.
	for i := range burst {
		if _, err := h.search(t, "erin", "sales", 0); err != nil {
			t.Fatalf("erin's search %d after the console's: %v", i, err)
		}
	}
	_, err := h.search(t, "erin", "sales", 0)
	wantReason(t, err, codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_RATE_LIMITED)
	// An explained search still runs for her once she is limited.
	if _, err := console.Search(ctx, &indexerv1.SearchRequest{Principal: erin, Query: "sales", Explain: true}); err != nil {
		t.Fatalf("explained search with erin's limit reached: %v", err)
	}

	// A plain search by the console's credential is charged like any.
	frank := &commonv1.Principal{Subject: "frank"}
	for i := range burst {
		if _, err := console.Search(ctx, &indexerv1.SearchRequest{Principal: frank, Query: "sales"}); err != nil {
			t.Fatalf("plain operator search %d as frank: %v", i, err)
		}
	}
	_, err = console.Search(ctx, &indexerv1.SearchRequest{Principal: frank, Query: "sales"})
	wantReason(t, err, codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_RATE_LIMITED)

	// The trail: erin's find_tool events, the console's named.
	want := map[string]int{"console ok": burst + 2, " ok": burst, " rate_limited": 1}
	var got map[string]int
	testkit.Eventually(t, "erin's find_tool events in the table", 30*time.Second, func() bool {
		resp, err := console.QueryAuditEvents(ctx, &indexerv1.QueryAuditEventsRequest{Subject: "erin", Kind: "find_tool"})
		if err != nil {
			return false
		}
		got = map[string]int{}
		for _, e := range resp.GetEvents() {
			if e.GetRecordedBy() != "indexer" || e.GetTool() != "find_tool" {
				t.Fatalf("find_tool event %v", e)
			}
			got[e.GetCaller()+" "+e.GetOutcome()]++
		}
		return len(resp.GetEvents()) == 2*burst+3
	})
	for k, n := range want {
		if got[k] != n {
			t.Fatalf("erin's events by caller and outcome %v, want %v", got, want)
		}
	}
	// Frank's plain operator searches name the console too: the caller
	// says who made the request, whether or not it was charged. The trail
	// is written in the background: his events are waited for as erin's.
	var resp *indexerv1.QueryAuditEventsResponse
	testkit.Eventually(t, "frank's find_tool events in the table", 30*time.Second, func() bool {
		var err error
		resp, err = console.QueryAuditEvents(ctx, &indexerv1.QueryAuditEventsRequest{Subject: "frank", Kind: "find_tool"})
		return err == nil && len(resp.GetEvents()) >= burst+1
	})
	if n := len(resp.GetEvents()); n != burst+1 {
		t.Fatalf("frank has %d events, want %d: %v", n, burst+1, resp)
	}
	for _, e := range resp.GetEvents() {
		if e.GetCaller() != "console" {
			t.Fatalf("frank's event %v, want caller console", e)
		}
	}
}

// RecordAuditEvents keeps the caller an aggregator sends (its events of
// calls made by a credential other than the gateway's), QueryAuditEvents
// answers it, and a caller over the bound is refused.
func TestRecordedCallerRoundTrips(t *testing.T) {
	h := start(t, env.NewDatabase(t), func(c *config.Config) {
		c.Audit = config.Audit{Database: config.AuditDatabase{Enabled: true}}
	})
	h.waitServing(t)
	ctx := t.Context()
	agg := h.as(t, aggregatorToken)
	at := timestamppb.New(time.Now().Add(-time.Minute))
	sent := []*indexerv1.AuditEvent{
		{Time: at, Service: "aggregator", Kind: "tool_call", Outcome: "ok", Subject: "batch-job", Tool: "alpha_sales", Caller: "batch"},
		{Time: at, Service: "aggregator", Kind: "tool_call", Outcome: "ok", Subject: "alice", Tool: "alpha_sales"},
	}
	if _, err := agg.RecordAuditEvents(ctx, &indexerv1.RecordAuditEventsRequest{Events: sent}); err != nil {
		t.Fatal(err)
	}
	resp, err := h.as(t, operatorToken).QueryAuditEvents(ctx, &indexerv1.QueryAuditEventsRequest{Tool: "alpha_sales"})
	if err != nil || len(resp.GetEvents()) != 2 {
		t.Fatalf("query: %v %v", resp, err)
	}
	callers := map[string]string{}
	for _, e := range resp.GetEvents() {
		callers[e.GetSubject()] = e.GetCaller()
	}
	if callers["batch-job"] != "batch" || callers["alice"] != "" {
		t.Fatalf("callers by subject %v", callers)
	}
	long := &indexerv1.AuditEvent{Time: at, Service: "aggregator", Kind: "tool_call", Outcome: "ok", Caller: strings.Repeat("c", 1025)}
	_, err = agg.RecordAuditEvents(ctx, &indexerv1.RecordAuditEventsRequest{Events: []*indexerv1.AuditEvent{long}})
	wantReason(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
}
