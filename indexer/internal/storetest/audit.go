package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/audit"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

func queryAudit(t *testing.T, st store.AuditEvents, q store.AuditQuery, limit int) []store.AuditRecord {
	t.Helper()
	recs, err := st.QueryAuditEvents(t.Context(), q, limit)
	if err != nil {
		t.Fatalf("query %+v: %v", q, err)
	}
	if len(recs) > limit {
		t.Fatalf("query %+v: %d events, more than the %d asked", q, len(recs), limit)
	}
	return recs
}

// sameEvent reports how got differs from want ("" if it does not).
func sameEvent(got store.AuditRecord, want audit.Event) string {
	e := got.Event
	if !e.Time.Equal(want.Time) || e.Service != want.Service || e.Kind != want.Kind || e.Outcome != want.Outcome ||
		e.Subject != want.Subject || !slices.Equal(e.Groups, want.Groups) && len(e.Groups)+len(want.Groups) > 0 || e.Caller != want.Caller ||
		e.Server != want.Server || e.Tool != want.Tool || e.Resource != want.Resource || e.Prompt != want.Prompt ||
		e.Backend != want.Backend || e.LatencyMS != want.LatencyMS || e.TraceID != want.TraceID || e.Session != want.Session ||
		e.ArgumentsSHA256 != want.ArgumentsSHA256 || string(e.Arguments) != string(want.Arguments) || e.Detail != want.Detail {
		return fmt.Sprintf("stored %+v, want %+v", e, want)
	}
	return ""
}

// newestFirst fails unless recs are in the order of their keys, newest
// time first, then highest id, no id twice.
func newestFirst(t *testing.T, recs []store.AuditRecord, what string) {
	t.Helper()
	for i := 1; i < len(recs); i++ {
		a, b := recs[i-1], recs[i]
		if a.Time.Before(b.Time) || a.Time.Equal(b.Time) && a.ID <= b.ID {
			t.Fatalf("%s: event %d (%v) before event %d (%v): not newest first, then highest id", what, a.ID, a.Time, b.ID, b.Time)
		}
	}
}

// digestsOf are the events' ArgumentsSHA256, which the checks make unique
// (and short, to read in a failure).
func digestsOf(recs []store.AuditRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.ArgumentsSHA256
	}
	return out
}

// What is recorded is read back, through another handle, field for field,
// with the credential that recorded it and an id of its own; queries
// return the events every set filter matches exactly, the time from Since
// (inclusive) to Until (exclusive), newest first, at most the limit asked.
func auditEventsStoredAndFiltered(t *testing.T, open Open[store.AuditEvents]) {
	one, two := open(t), open(t)
	ctx := t.Context()
	base := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(i int) time.Time {
		return base.Add(time.Duration(i)*time.Second + time.Duration(i)*time.Microsecond)
	}
	var events []audit.Event
	for i := range 25 {
		e := audit.Event{Time: at(i), Service: "aggregator", Kind: audit.KindToolCall, Outcome: audit.OutcomeOK,
			Subject: "alice", Groups: []string{"eng", "ops"}, Server: "docs", Tool: "docs_search", Backend: "docs",
			LatencyMS: 1.25 + float64(i), TraceID: "0102030405060708090a0b0c0d0e0f10", Session: session(i), ArgumentsSHA256: fmt.Sprintf("event-%02d", i)}
		switch {
		case i%5 == 0:
			e.Subject, e.Outcome, e.Detail, e.Groups = "bob", audit.OutcomeDenied, "denied by the authorization policy", nil
			e.Tool, e.Backend = "admin_reset", "admin"
		case i == 7:
			e.Arguments, e.Caller = []byte(`{"q":"x"}`), "console"
		case i == 8:
			e.Kind, e.Server, e.Tool, e.Backend, e.Resource = audit.KindResourceRead, "files", "", "files", "file:///notes.md"
		case i == 9:
			e.Kind, e.Tool, e.Prompt, e.Outcome = audit.KindPromptGet, "", "greet", audit.OutcomeNotFound
		}
		events = append(events, e)
	}
	aggregatorWriter := store.AuditWriter{Credential: "aggregator-cred", Identity: "uriSAN spiffe://switchboard/aggregator"}
	gatewayWriter := store.AuditWriter{Credential: "gateway-cred", Identity: "token"}
	if err := one.RecordAuditEvents(ctx, events[:20], aggregatorWriter); err != nil {
		t.Fatal(err)
	}
	if err := two.RecordAuditEvents(ctx, events[20:], gatewayWriter); err != nil {
		t.Fatal(err)
	}
	if err := one.RecordAuditEvents(ctx, nil, store.AuditWriter{Credential: "nobody"}); err != nil {
		t.Fatalf("an empty batch: %v", err)
	}

	all := queryAudit(t, two, store.AuditQuery{}, 100)
	if len(all) != len(events) {
		t.Fatalf("%d events stored, want %d", len(all), len(events))
	}
	newestFirst(t, all, "every event")
	for k, r := range all {
		i := len(events) - 1 - k // newest first
		if diff := sameEvent(r, events[i]); diff != "" {
			t.Fatalf("event %d: %s", i, diff)
		}
		by := aggregatorWriter
		if i >= 20 {
			by = gatewayWriter
		}
		if r.RecordedBy != by.Credential || r.RecordedByIdentity != by.Identity || r.ID == 0 {
			t.Fatalf("event %d: id %d, recorded by %q with %q; want an id and %v", i, r.ID, r.RecordedBy, r.RecordedByIdentity, by)
		}
	}

	// want are the digests of the events pred matches, newest first.
	want := func(pred func(i int, e audit.Event) bool) []string {
		var out []string
		for i := len(events) - 1; i >= 0; i-- {
			if pred(i, events[i]) {
				out = append(out, events[i].ArgumentsSHA256)
			}
		}
		return out
	}
	for _, c := range []struct {
		q    store.AuditQuery
		pred func(i int, e audit.Event) bool
	}{
		{store.AuditQuery{Subject: "bob"}, func(_ int, e audit.Event) bool { return e.Subject == "bob" }},
		{store.AuditQuery{Subject: "ali"}, func(int, audit.Event) bool { return false }},
		{store.AuditQuery{Tool: "docs_search"}, func(_ int, e audit.Event) bool { return e.Tool == "docs_search" }},
		{store.AuditQuery{Tool: "other"}, func(int, audit.Event) bool { return false }},
		{store.AuditQuery{Server: "files"}, func(_ int, e audit.Event) bool { return e.Server == "files" }},
		{store.AuditQuery{Kind: string(audit.KindPromptGet)}, func(_ int, e audit.Event) bool { return e.Kind == audit.KindPromptGet }},
		{store.AuditQuery{Outcome: string(audit.OutcomeDenied)}, func(_ int, e audit.Event) bool { return e.Outcome == audit.OutcomeDenied }},
		{store.AuditQuery{Backend: "admin"}, func(_ int, e audit.Event) bool { return e.Backend == "admin" }},
		{store.AuditQuery{Subject: "alice", Tool: "docs_search", Server: "docs", Kind: string(audit.KindToolCall), Outcome: string(audit.OutcomeOK), Backend: "docs"},
			func(_ int, e audit.Event) bool {
				return e.Subject == "alice" && e.Tool == "docs_search" && e.Server == "docs" && e.Kind == audit.KindToolCall && e.Outcome == audit.OutcomeOK && e.Backend == "docs"
			}},
		{store.AuditQuery{Since: at(10), Until: at(20)}, func(i int, _ audit.Event) bool { return i >= 10 && i < 20 }},
		{store.AuditQuery{Since: at(10).Add(time.Microsecond)}, func(i int, _ audit.Event) bool { return i > 10 }},
		{store.AuditQuery{Until: at(5)}, func(i int, _ audit.Event) bool { return i < 5 }},
		{store.AuditQuery{Subject: "bob", Since: at(5), Until: at(20)}, func(i int, e audit.Event) bool { return e.Subject == "bob" && i >= 5 && i < 20 }},
	} {
		got := queryAudit(t, one, c.q, 100)
		newestFirst(t, got, fmt.Sprintf("query %+v", c.q))
		if w := want(c.pred); !slices.Equal(digestsOf(got), w) {
			t.Fatalf("query %+v: events %v, want %v", c.q, digestsOf(got), w)
		}
	}
	// The limit: the newest.
	if got := queryAudit(t, one, store.AuditQuery{}, 3); !slices.Equal(digestsOf(got), digestsOf(all[:3])) {
		t.Fatalf("the 3 newest: %v, want %v", digestsOf(got), digestsOf(all[:3]))
	}
	alice := want(func(_ int, e audit.Event) bool { return e.Subject == "alice" })
	if got := queryAudit(t, two, store.AuditQuery{Subject: "alice"}, 2); !slices.Equal(digestsOf(got), alice[:2]) {
		t.Fatalf("alice's 2 newest: %v, want %v", digestsOf(got), alice[:2])
	}
}

// Paging by the key of the previous page's last event returns every event
// once, in the order of one query, across events of equal time recorded at
// once through two handles, with filters or without. The key's time is at
// the microsecond, as the indexer's page tokens carry it (stored times must
// be too, or a page would skip the rest of its last event's instant).
func auditEventsPaged(t *testing.T, open Open[store.AuditEvents]) {
	handles := []store.AuditEvents{open(t), open(t)}
	ctx := t.Context()
	base := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	// Four instants, several events each, with a part below the microsecond.
	instant := func(k int) time.Time { return base.Add(time.Duration(k)*time.Second + 1234*time.Nanosecond) }
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			var batch []audit.Event
			for j := range 10 {
				i := w*10 + j
				subject := "alice"
				if i%3 == 0 {
					subject = "bob"
				}
				batch = append(batch, audit.Event{Time: instant(j % 4), Service: "gateway", Kind: audit.KindSessionStart, Outcome: audit.OutcomeOK,
					Subject: subject, ArgumentsSHA256: fmt.Sprintf("event-%02d", i)})
			}
			if err := handles[w%2].RecordAuditEvents(ctx, batch, store.AuditWriter{Credential: fmt.Sprintf("writer-%d", w), Identity: "token"}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	all := queryAudit(t, handles[0], store.AuditQuery{}, 100)
	if len(all) != 40 {
		t.Fatalf("%d events stored, want 40", len(all))
	}
	newestFirst(t, all, "every event")

	page := func(q store.AuditQuery, size int) []store.AuditRecord {
		t.Helper()
		var out []store.AuditRecord
		for range 100 {
			recs := queryAudit(t, handles[len(out)%2], q, size)
			out = append(out, recs...)
			if len(recs) < size {
				return out
			}
			last := recs[len(recs)-1]
			q.After = &store.AuditKey{Time: time.UnixMicro(last.Time.UnixMicro()).UTC(), ID: last.ID}
		}
		t.Fatalf("query %+v: no end after 100 pages", q)
		return nil
	}
	for _, size := range []int{7, 10, 1} {
		if got := page(store.AuditQuery{}, size); !slices.Equal(digestsOf(got), digestsOf(all)) {
			t.Fatalf("pages of %d: %v, want %v", size, digestsOf(got), digestsOf(all))
		}
	}
	filtered := func(keep func(r store.AuditRecord) bool) []string {
		var out []string
		for _, r := range all {
			if keep(r) {
				out = append(out, r.ArgumentsSHA256)
			}
		}
		return out
	}
	bob := filtered(func(r store.AuditRecord) bool { return r.Subject == "bob" })
	if got := page(store.AuditQuery{Subject: "bob"}, 3); len(bob) == 0 || !slices.Equal(digestsOf(got), bob) {
		t.Fatalf("bob's events in pages of 3: %v, want %v", digestsOf(got), bob)
	}
	middle := filtered(func(r store.AuditRecord) bool {
		return !r.Time.Before(instant(1).Truncate(time.Second)) && r.Time.Before(instant(3).Truncate(time.Second))
	})
	if got := page(store.AuditQuery{Since: instant(1).Truncate(time.Second), Until: instant(3).Truncate(time.Second)}, 4); len(middle) != 20 || !slices.Equal(digestsOf(got), middle) {
		t.Fatalf("the two middle instants in pages of 4: %v, want %v", digestsOf(got), middle)
	}
	last := all[len(all)-1]
	if got := queryAudit(t, handles[1], store.AuditQuery{After: &store.AuditKey{Time: last.Time, ID: last.ID}}, 10); len(got) != 0 {
		t.Fatalf("after the oldest event: %v", digestsOf(got))
	}
}

// Retention deletes exactly the events older than the time given (one at
// that very time stays), through any handle, however many, and says how
// many it deleted.
func auditEventsRetention(t *testing.T, open Open[store.AuditEvents]) {
	one, two := open(t), open(t)
	ctx := t.Context()
	now := time.Now().Truncate(time.Microsecond)
	var events []audit.Event
	for i := range 30 {
		events = append(events, audit.Event{Time: now.Add(-time.Duration(i) * time.Hour), Service: "gateway", Kind: audit.KindSessionStart,
			Outcome: audit.OutcomeOK, ArgumentsSHA256: fmt.Sprintf("event-%02d", i)})
	}
	if err := one.RecordAuditEvents(ctx, events, store.AuditWriter{Credential: "gateway", Identity: "token"}); err != nil {
		t.Fatal(err)
	}
	cutoff := now.Add(-24 * time.Hour) // event 24's time
	if n, err := two.DeleteAuditEventsBefore(ctx, cutoff); err != nil || n != 5 {
		t.Fatalf("deleted %d (%v), want the 5 events 25 to 29 hours old", n, err)
	}
	left := queryAudit(t, one, store.AuditQuery{}, 100)
	if len(left) != 25 || !left[len(left)-1].Time.Equal(cutoff) {
		t.Fatalf("%d left, the oldest %v; want 25, the oldest at %v", len(left), left[len(left)-1].Time, cutoff)
	}
	if n, err := one.DeleteAuditEventsBefore(ctx, cutoff); err != nil || n != 0 {
		t.Fatalf("a second delete: %d, %v; want nothing", n, err)
	}

	// Many at once.
	old := make([]audit.Event, 12_345)
	for i := range old {
		old[i] = audit.Event{Time: now.Add(-48*time.Hour - time.Duration(i)*time.Millisecond), Service: "gateway", Kind: audit.KindSessionEnd, Outcome: audit.OutcomeOK}
	}
	if err := two.RecordAuditEvents(ctx, old, store.AuditWriter{Credential: "gateway", Identity: "token"}); err != nil {
		t.Fatal(err)
	}
	if n, err := one.DeleteAuditEventsBefore(ctx, cutoff); err != nil || n != int64(len(old)) {
		t.Fatalf("deleted %d (%v), want the %d events two days old", n, err, len(old))
	}
	if left := queryAudit(t, two, store.AuditQuery{}, 100); len(left) != 25 {
		t.Fatalf("%d left, want 25", len(left))
	}
}
