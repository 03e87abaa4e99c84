package app_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboard-mcp/switchboard/services/config"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

const (
	nextGatewayToken = "gateway-next-test-token"
	batchJobToken    = "batch-job-test-token"
)

// A service credential writes only its own service's audit events
// (serviceAuth.credentials[].auditService, by default the credential's
// name when that names a service), of the kinds that service records
// (audit.Emits), and a credential that may not assert principals only
// events of its own principal (not the anonymous principal's); a batch holding one event it may not write is
// refused whole, PERMISSION_DENIED naming the event, stores nothing and
// is counted. Every stored event carries the credential that wrote it and
// how it authenticated.
func TestAuditEventsOnlyTheWritersOwn(t *testing.T) {
	h := start(t, env.NewDatabase(t), func(c *config.Config) {
		c.Audit = config.Audit{Database: config.AuditDatabase{Enabled: true}}
		c.ServiceAuth.Credentials = append(c.ServiceAuth.Credentials,
			// A rotated gateway token: named otherwise, bound explicitly.
			config.ServiceCredential{Name: "gateway-next", Token: nextGatewayToken, AssertPrincipals: true, AuditService: "gateway",
				Allow: config.GatewayMethods},
			// A bound identity that ships aggregator events of its own.
			config.ServiceCredential{Name: "batch", Token: batchJobToken, Subject: "batch-job", AuditService: "aggregator",
				Allow: []string{"switchboard.indexer.v1.IndexerService/RecordAuditEvents"}})
	})
	h.waitServing(t)
	ctx := t.Context()
	op, gw, agg := h.as(t, operatorToken), h.client, h.as(t, aggregatorToken)
	next, batch := h.as(t, nextGatewayToken), h.as(t, batchJobToken)
	at := timestamppb.New(time.Now().Add(-time.Minute))
	ev := func(service, kind, subject string) *indexerv1.AuditEvent {
		return &indexerv1.AuditEvent{Time: at, Service: service, Kind: kind, Outcome: "ok", Subject: subject, Tool: "audit-writers"}
	}
	stored := func() []*indexerv1.AuditEvent {
		t.Helper()
		resp, err := op.QueryAuditEvents(ctx, &indexerv1.QueryAuditEventsRequest{Tool: "audit-writers"})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetEvents()
	}

	for _, tc := range []struct {
		name   string
		client indexerv1.IndexerServiceClient
		events []*indexerv1.AuditEvent
		bad    int // the index the refusal names
	}{
		{"the gateway's credential writes an aggregator event after one of its own", gw,
			[]*indexerv1.AuditEvent{ev("gateway", "session_start", "alice"), ev("aggregator", "tool_call", "alice")}, 1},
		{"the gateway's credential writes a kind the gateway never records", gw,
			[]*indexerv1.AuditEvent{ev("gateway", "quarantine", "")}, 0},
		{"a gateway credential bound by auditService writes an aggregator event", next,
			[]*indexerv1.AuditEvent{ev("aggregator", "tool_call", "alice")}, 0},
		{"the aggregator's credential writes a gateway event", agg,
			[]*indexerv1.AuditEvent{ev("aggregator", "tool_call", "bob"), ev("aggregator", "quarantine", ""), ev("gateway", "session_start", "bob")}, 2},
		{"the aggregator's credential writes the indexer's find_tool", agg,
			[]*indexerv1.AuditEvent{ev("indexer", "find_tool", "bob")}, 0},
		{"the aggregator's credential writes a kind nobody records", agg,
			[]*indexerv1.AuditEvent{ev("aggregator", "made_up", "bob")}, 0},
		{"a credential bound to no service", op,
			[]*indexerv1.AuditEvent{ev("gateway", "session_start", "alice")}, 0},
		{"a bound identity writes another principal's event", batch,
			[]*indexerv1.AuditEvent{ev("aggregator", "tool_call", "batch-job"), ev("aggregator", "tool_call", "alice")}, 1},
		// An event naming no principal is the anonymous principal's.
		{"a bound identity writes the anonymous principal's event", batch,
			[]*indexerv1.AuditEvent{ev("aggregator", "tool_call", "batch-job"), ev("aggregator", "resource_read", "")}, 1},
	} {
		_, err := tc.client.RecordAuditEvents(ctx, &indexerv1.RecordAuditEventsRequest{Events: tc.events})
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("%s: %v, want PERMISSION_DENIED", tc.name, err)
		}
		wantReason(t, err, codes.PermissionDenied, commonv1.ErrorReason_ERROR_REASON_AUDIT_EVENT_NOT_ALLOWED)
		if msg := status.Convert(err).Message(); !strings.Contains(msg, fmt.Sprintf("event %d:", tc.bad)) {
			t.Fatalf("%s: %q does not name event %d", tc.name, msg, tc.bad)
		}
	}
	// An event dated ahead of the indexer's clock (beyond a few minutes'
	// skew) would sort first in every query and outlive retention.
	ahead := ev("gateway", "session_start", "alice")
	ahead.Time = timestamppb.New(time.Now().Add(time.Hour))
	_, err := gw.RecordAuditEvents(ctx, &indexerv1.RecordAuditEventsRequest{Events: []*indexerv1.AuditEvent{ev("gateway", "session_start", "alice"), ahead}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "event 1:") {
		t.Fatalf("an event an hour ahead: %v, want INVALID_ARGUMENT naming event 1", err)
	}
	if got := stored(); len(got) != 0 {
		t.Fatalf("refused batches stored %d events (their permitted ones included): %v", len(got), got)
	}

	// Each writes its own, and the table says who did and how.
	for _, w := range []struct {
		client indexerv1.IndexerServiceClient
		events []*indexerv1.AuditEvent
	}{
		{gw, []*indexerv1.AuditEvent{ev("gateway", "session_start", "alice"), ev("gateway", "tool_call", "alice"), ev("gateway", "config_reload", "")}},
		{agg, []*indexerv1.AuditEvent{ev("aggregator", "quarantine", ""), ev("aggregator", "tool_call", "bob")}},
		{next, []*indexerv1.AuditEvent{ev("gateway", "session_end", "alice")}},
		{batch, []*indexerv1.AuditEvent{ev("aggregator", "tool_call", "batch-job"), ev("aggregator", "resource_read", "batch-job")}},
	} {
		if _, err := w.client.RecordAuditEvents(ctx, &indexerv1.RecordAuditEventsRequest{Events: w.events}); err != nil {
			t.Fatalf("%s events: %v", w.events[0].GetService(), err)
		}
	}
	want := map[string]string{ // service/kind/subject -> recorded_by
		"gateway/session_start/alice": "gateway", "gateway/tool_call/alice": "gateway", "gateway/config_reload/": "gateway",
		"aggregator/quarantine/": "aggregator", "aggregator/tool_call/bob": "aggregator",
		"gateway/session_end/alice":      "gateway-next",
		"aggregator/tool_call/batch-job": "batch", "aggregator/resource_read/batch-job": "batch",
	}
	got := stored()
	if len(got) != len(want) {
		t.Fatalf("stored %d events, want %d: %v", len(got), len(want), got)
	}
	for _, e := range got {
		key := e.GetService() + "/" + e.GetKind() + "/" + e.GetSubject()
		if e.GetRecordedBy() != want[key] || e.GetRecordedByIdentity() != "token" {
			t.Errorf("%s: recorded by %q with %q, want %q with token", key, e.GetRecordedBy(), e.GetRecordedByIdentity(), want[key])
		}
	}

	// The refused events are counted, by credential and reason.
	_, metrics := h.get(t, "/metrics")
	for _, line := range []string{
		`switchboard_indexer_audit_events_refused_total{credential="gateway",reason="service"} 2`,
		`switchboard_indexer_audit_events_refused_total{credential="gateway",reason="kind"} 1`,
		`switchboard_indexer_audit_events_refused_total{credential="gateway-next",reason="service"} 1`,
		`switchboard_indexer_audit_events_refused_total{credential="aggregator",reason="service"} 4`,
		`switchboard_indexer_audit_events_refused_total{credential="aggregator",reason="kind"} 1`,
		`switchboard_indexer_audit_events_refused_total{credential="operator",reason="credential"} 1`,
		`switchboard_indexer_audit_events_refused_total{credential="batch",reason="subject"} 4`,
	} {
		if !strings.Contains(metrics, line) {
			t.Errorf("/metrics lacks %s", line)
		}
	}
}

// The indexer's own events (find_tool) are stored as written by the
// indexer itself, with no credential's identity.
func TestOwnAuditEventsRecordedLocally(t *testing.T) {
	h := start(t, env.NewDatabase(t), func(c *config.Config) {
		c.Audit = config.Audit{Database: config.AuditDatabase{Enabled: true}}
	})
	h.agg.SetTools(tools("alpha_sales"))
	h.agg.SetView("alice", []string{"alpha_sales"})
	h.waitServing(t)
	if _, err := h.search(t, "alice", "sales report", 5); err != nil {
		t.Fatal(err)
	}
	op := h.as(t, operatorToken)
	var found *indexerv1.AuditEvent
	testkit.Eventually(t, "the find_tool event in the table", 30*time.Second, func() bool {
		resp, err := op.QueryAuditEvents(t.Context(), &indexerv1.QueryAuditEventsRequest{Subject: "alice", Kind: "find_tool"})
		if err != nil || len(resp.GetEvents()) != 1 {
			return false
		}
		found = resp.GetEvents()[0]
		return true
	})
	if found.GetRecordedBy() != "indexer" || found.GetRecordedByIdentity() != "local" {
		t.Fatalf("the indexer's own event recorded by %q with %q, want indexer with local", found.GetRecordedBy(), found.GetRecordedByIdentity())
	}
}
