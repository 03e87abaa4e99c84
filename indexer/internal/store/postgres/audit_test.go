package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
	"github.com/switchboard-mcp/switchboard/services/audit"
)

func TestAuditEventsInsertQueryPage(t *testing.T) {
	st := env.OpenStore(t)
	ctx := t.Context()
	base := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var events []audit.Event
	for i := range 25 {
		e := audit.Event{Time: base.Add(time.Duration(i) * time.Second), Service: "aggregator", Kind: audit.KindToolCall,
			Outcome: audit.OutcomeOK, Subject: "alice", Groups: []string{"eng", "ops"}, Server: "docs", Tool: "docs_search",
			Backend: "docs", LatencyMS: 1.25, TraceID: "0102030405060708090a0b0c0d0e0f10", ArgumentsSHA256: fmt.Sprintf("%064d", i)}
		if i%5 == 0 {
			e.Subject, e.Outcome, e.Detail, e.Groups = "bob", audit.OutcomeDenied, "denied by the authorization policy", nil
		}
		if i == 7 {
			e.Arguments, e.Caller = []byte(`{"q":"x"}`), "console"
		}
		events = append(events, e)
	}
	if err := st.RecordAuditEvents(ctx, events, store.AuditWriter{Credential: "aggregator-cred", Identity: "token"}); err != nil {
		t.Fatal(err)
	}
	// Filters.
	bob, err := st.QueryAuditEvents(ctx, store.AuditQuery{Subject: "bob"}, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(bob) != 5 {
		t.Fatalf("bob has %d events, want 5", len(bob))
	}
	for i, r := range bob {
		if r.Subject != "bob" || r.Outcome != audit.OutcomeDenied || r.RecordedBy != "aggregator-cred" || r.Groups != nil || r.Caller != "" {
			t.Fatalf("bob's event %+v", r)
		}
		if i > 0 && !r.Time.Before(bob[i-1].Time) {
			t.Fatal("not newest first")
		}
	}
	denied, _ := st.QueryAuditEvents(ctx, store.AuditQuery{Outcome: "denied", Tool: "docs_search", Server: "docs", Kind: "tool_call", Backend: "docs"}, 100)
	none, _ := st.QueryAuditEvents(ctx, store.AuditQuery{Tool: "other"}, 100)
	if len(denied) != 5 || len(none) != 0 {
		t.Fatalf("denied %d (want 5), other tool %d (want 0)", len(denied), len(none))
	}
	ranged, _ := st.QueryAuditEvents(ctx, store.AuditQuery{Since: base.Add(10 * time.Second), Until: base.Add(20 * time.Second)}, 100)
	if len(ranged) != 10 || !ranged[0].Time.Equal(base.Add(19*time.Second)) || !ranged[9].Time.Equal(base.Add(10*time.Second)) {
		t.Fatalf("range [10s, 20s): %d events", len(ranged))
	}
	// Every field comes back.
	one, _ := st.QueryAuditEvents(ctx, store.AuditQuery{Since: base.Add(7 * time.Second), Until: base.Add(8 * time.Second)}, 1)
	if len(one) != 1 {
		t.Fatal("event 7 missing")
	}
	got := one[0]
	want := events[7]
	if !got.Time.Equal(want.Time) || got.Service != want.Service || got.Kind != want.Kind || got.Subject != "alice" ||
		len(got.Groups) != 2 || got.Backend != "docs" || got.LatencyMS != 1.25 || got.TraceID != want.TraceID ||
		got.ArgumentsSHA256 != want.ArgumentsSHA256 || string(got.Arguments) != `{"q":"x"}` || got.Caller != "console" || got.ID == 0 {
		t.Fatalf("stored %+v, want %+v", got, want)
	}
	// Paging: every event once, newest first, across pages.
	seen := map[int64]bool{}
	var after *store.AuditKey
	pages := 0
	for {
		page, err := st.QueryAuditEvents(ctx, store.AuditQuery{After: after}, 10)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, r := range page {
			if seen[r.ID] {
				t.Fatalf("event %d twice", r.ID)
			}
			seen[r.ID] = true
		}
		if len(page) < 10 {
			break
		}
		last := page[len(page)-1]
		after = &store.AuditKey{Time: last.Time, ID: last.ID}
	}
	if len(seen) != 25 || pages != 3 {
		t.Fatalf("paged %d events in %d pages, want 25 in 3", len(seen), pages)
	}
}

func TestAuditEventsRetention(t *testing.T) {
	st := env.OpenStore(t)
	ctx := t.Context()
	now := time.Now()
	var events []audit.Event
	for i := range 30 {
		age := time.Duration(i) * time.Hour
		events = append(events, audit.Event{Time: now.Add(-age), Service: "gateway", Kind: audit.KindSessionStart, Outcome: audit.OutcomeOK})
	}
	if err := st.RecordAuditEvents(ctx, events, store.AuditWriter{Credential: "gateway", Identity: "token"}); err != nil {
		t.Fatal(err)
	}
	n, err := st.DeleteAuditEventsBefore(ctx, now.Add(-24*time.Hour+time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if n != 6 { // 24h .. 29h old
		t.Fatalf("deleted %d, want 6", n)
	}
	left, _ := st.QueryAuditEvents(ctx, store.AuditQuery{}, 100)
	if len(left) != 24 {
		t.Fatalf("%d left, want 24", len(left))
	}
	for _, r := range left {
		if now.Sub(r.Time) >= 24*time.Hour {
			t.Fatalf("event %v old survived", now.Sub(r.Time))
		}
	}
	if n, err := st.DeleteAuditEventsBefore(ctx, now.Add(-24*time.Hour)); err != nil || n != 0 {
		t.Fatalf("second delete: %d %v", n, err)
	}
}
