package app_test

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/config"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// The indexer stores the events the other services send and its own
// (find_tool) in PostgreSQL; operators query them by principal, tool,
// outcome and time, in bounded pages; nobody else may. The JSON lines
// of the file sink carry the same find_tool event.
func TestAuditEventsStoredAndQueriedByOperators(t *testing.T) {
	file := t.TempDir() + "/audit.jsonl"
	h := start(t, env.NewDatabase(t), func(c *config.Config) {
		c.Audit = config.Audit{Sink: config.AuditFile, File: file, Database: config.AuditDatabase{Enabled: true}}
	})
	h.agg.SetTools(tools("alpha_sales", "beta_costs"))
	h.agg.SetView("alice", []string{"alpha_sales", "beta_costs"})
	h.waitServing(t)
	ctx := t.Context()
	op, agg := h.as(t, operatorToken), h.as(t, aggregatorToken)

	// A batch as the aggregator ships it.
	at := time.Now().Add(-time.Minute).UTC().Truncate(time.Microsecond)
	sent := []*indexerv1.AuditEvent{
		{Time: timestamppb.New(at), Service: "aggregator", Kind: "tool_call", Outcome: "denied", Subject: "bob", Groups: []string{"sales"},
			Tool: "alpha_sales", Backend: "alpha", LatencyMs: 0.5, ArgumentsSha256: strings.Repeat("ab", 32), Detail: "denied by the authorization policy"},
		{Time: timestamppb.New(at.Add(time.Second)), Service: "aggregator", Kind: "tool_call", Outcome: "ok", Subject: "alice", Tool: "alpha_sales", Backend: "alpha"},
	}
	if resp, err := agg.RecordAuditEvents(ctx, &indexerv1.RecordAuditEventsRequest{Events: sent}); err != nil || resp.GetRecorded() != 2 {
		t.Fatalf("record: %v %v", resp, err)
	}
	// find_tool, recorded by the indexer itself.
	if _, err := h.search(t, "alice", "sales report", 5); err != nil {
		t.Fatal(err)
	}
	var found *indexerv1.AuditEvent
	testkit.Eventually(t, "the find_tool event in the table", 30*time.Second, func() bool {
		resp, err := op.QueryAuditEvents(ctx, &indexerv1.QueryAuditEventsRequest{Subject: "alice", Kind: "find_tool"})
		if err != nil || len(resp.GetEvents()) != 1 {
			return false
		}
		found = resp.GetEvents()[0]
		return true
	})
	wantDigest := audit.Digest([]byte(`{"description":"sales report"}`))
	if found.GetService() != "indexer" || found.GetTool() != "find_tool" || found.GetOutcome() != "ok" || found.GetRecordedBy() != "indexer" ||
		found.GetArgumentsSha256() != wantDigest || found.GetTime().AsTime().IsZero() {
		t.Fatalf("find_tool event %v", found)
	}

	denied, err := op.QueryAuditEvents(ctx, &indexerv1.QueryAuditEventsRequest{Outcome: "denied", Tool: "alpha_sales"})
	if err != nil || len(denied.GetEvents()) != 1 {
		t.Fatalf("denied: %v %v", denied, err)
	}
	if d := denied.GetEvents()[0]; d.GetSubject() != "bob" || d.GetRecordedBy() != "aggregator" || d.GetBackend() != "alpha" ||
		!d.GetTime().AsTime().Equal(at) || d.GetGroups()[0] != "sales" {
		t.Fatalf("denied event %v", d)
	}
	// Time range: only the ok call.
	ranged, err := op.QueryAuditEvents(ctx, &indexerv1.QueryAuditEventsRequest{Tool: "alpha_sales",
		Since: timestamppb.New(at.Add(500 * time.Millisecond)), Until: timestamppb.New(at.Add(2 * time.Second))})
	if err != nil || len(ranged.GetEvents()) != 1 || ranged.GetEvents()[0].GetOutcome() != "ok" {
		t.Fatalf("range: %v %v", ranged, err)
	}
	// Pages of one, newest first, each event once.
	var ids []int64
	token := ""
	for range 10 {
		page, err := op.QueryAuditEvents(ctx, &indexerv1.QueryAuditEventsRequest{Tool: "alpha_sales", PageSize: 1, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.GetEvents() {
			ids = append(ids, e.GetId())
		}
		if token = page.GetNextPageToken(); token == "" {
			break
		}
	}
	if len(ids) != 2 || ids[0] == ids[1] {
		t.Fatalf("paged ids %v, want the two alpha_sales events", ids)
	}

	// Refusals.
	_, err = h.client.QueryAuditEvents(ctx, &indexerv1.QueryAuditEventsRequest{})
	wantReason(t, err, codes.PermissionDenied, commonv1.ErrorReason_ERROR_REASON_OPERATOR_ONLY)
	_, err = op.QueryAuditEvents(ctx, &indexerv1.QueryAuditEventsRequest{PageSize: 1001})
	wantReason(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	_, err = op.QueryAuditEvents(ctx, &indexerv1.QueryAuditEventsRequest{PageToken: "not-a-token"})
	wantReason(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	many := make([]*indexerv1.AuditEvent, 1001)
	for i := range many {
		many[i] = sent[1]
	}
	_, err = agg.RecordAuditEvents(ctx, &indexerv1.RecordAuditEventsRequest{Events: many})
	wantReason(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	_, err = agg.RecordAuditEvents(ctx, &indexerv1.RecordAuditEventsRequest{Events: []*indexerv1.AuditEvent{{Time: timestamppb.Now(), Service: "x"}}})
	wantReason(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)

	// The file sink has the same find_tool event as a JSON line.
	testkit.Eventually(t, "the find_tool line in the file", 30*time.Second, func() bool {
		raw, _ := os.ReadFile(file)
		for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			var e audit.Event
			if json.Unmarshal([]byte(line), &e) == nil && e.Kind == audit.KindFindTool && e.Subject == "alice" && e.ArgumentsSHA256 == wantDigest {
				return true
			}
		}
		return false
	})
}

// Without audit.database.enabled the table's RPCs are refused as such.
func TestAuditTableOff(t *testing.T) {
	h := start(t, env.NewDatabase(t))
	h.waitServing(t)
	_, err := h.as(t, operatorToken).QueryAuditEvents(t.Context(), &indexerv1.QueryAuditEventsRequest{})
	if codes.FailedPrecondition != statusCode(err) {
		t.Fatalf("query with the table off: %v", err)
	}
	_, err = h.as(t, aggregatorToken).RecordAuditEvents(t.Context(), &indexerv1.RecordAuditEventsRequest{})
	if codes.FailedPrecondition != statusCode(err) {
		t.Fatalf("record with the table off: %v", err)
	}
}

func statusCode(err error) codes.Code { return status.Code(err) }

// One principal's event past the table's bounds (more groups than it
// keeps, a subject longer than a field) does not cost the other events of
// its batch: the indexer sink fits it, and the indexer stores the whole
// batch, the fitted event saying what was cut.
func TestAuditBatchWithAnOversizedEvent(t *testing.T) {
	h := start(t, env.NewDatabase(t), func(c *config.Config) {
		c.Audit = config.Audit{Database: config.AuditDatabase{Enabled: true}}
	})
	h.waitServing(t)
	ctx := t.Context()
	op := h.as(t, operatorToken)
	sink := audit.NewIndexerSink(h.as(t, aggregatorToken))
	groups := make([]string, 100)
	for i := range groups {
		groups[i] = "team-" + strings.Repeat("x", i%7)
	}
	at := time.Now().Add(-time.Minute).UTC().Truncate(time.Microsecond)
	batch := []audit.Event{
		{Time: at, Service: "aggregator", Kind: audit.KindToolCall, Outcome: audit.OutcomeOK, Subject: "many-groups", Groups: groups, Tool: "alpha_sales"},
		{Time: at, Service: "aggregator", Kind: audit.KindToolCall, Outcome: audit.OutcomeOK, Subject: strings.Repeat("s", 2000), Tool: "alpha_sales"},
		{Time: at, Service: "aggregator", Kind: audit.KindToolCall, Outcome: audit.OutcomeOK, Subject: "carol", Tool: "alpha_sales"},
	}
	if err := sink.Write(ctx, batch); err != nil {
		t.Fatalf("the batch was refused: %v", err)
	}
	resp, err := op.QueryAuditEvents(ctx, &indexerv1.QueryAuditEventsRequest{Tool: "alpha_sales"})
	if err != nil || len(resp.GetEvents()) != 3 {
		t.Fatalf("stored %v (%v), want the 3 events of the batch", resp.GetEvents(), err)
	}
	bySubject := map[string]*indexerv1.AuditEvent{}
	for _, e := range resp.GetEvents() {
		bySubject[e.GetSubject()] = e
	}
	if e := bySubject["many-groups"]; e == nil || len(e.GetGroups()) != audit.MaxGroups || !strings.Contains(e.GetDetail(), "groups (64 of 100 kept)") {
		t.Errorf("the event with 100 groups: %v", e)
	}
	if e := bySubject[strings.Repeat("s", audit.MaxFieldBytes)]; e == nil || !strings.Contains(e.GetDetail(), "subject") {
		t.Errorf("the event with a 2,000-byte subject was not stored cut to %d bytes", audit.MaxFieldBytes)
	}
	if bySubject["carol"] == nil {
		t.Error("carol's event, within the bounds, was lost")
	}
}

// TestAuditTimestampsOutOfRange: a time no timestamp can be (before year
// 1 or after 9999), in a query or in an event, is the request's fault:
// INVALID_ARGUMENT, never an internal error.
func TestAuditTimestampsOutOfRange(t *testing.T) {
	h := start(t, env.NewDatabase(t), func(c *config.Config) {
		c.Audit = config.Audit{Database: config.AuditDatabase{Enabled: true}}
	})
	h.waitServing(t)
	ctx := t.Context()
	far := &timestamppb.Timestamp{Seconds: -1 << 50}
	_, err := h.as(t, operatorToken).QueryAuditEvents(ctx, &indexerv1.QueryAuditEventsRequest{Until: far})
	wantReason(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	_, err = h.as(t, operatorToken).QueryAuditEvents(ctx, &indexerv1.QueryAuditEventsRequest{Since: &timestamppb.Timestamp{Nanos: -1}})
	wantReason(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	// A forged page token of such a time too.
	_, err = h.as(t, operatorToken).QueryAuditEvents(ctx, &indexerv1.QueryAuditEventsRequest{
		PageToken: base64.RawURLEncoding.EncodeToString([]byte("-9223372036854775807.1"))})
	wantReason(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	_, err = h.as(t, aggregatorToken).RecordAuditEvents(ctx, &indexerv1.RecordAuditEventsRequest{Events: []*indexerv1.AuditEvent{
		{Time: far, Service: "aggregator", Kind: string(audit.KindToolCall), Outcome: string(audit.OutcomeOK)}}})
	wantReason(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
}
