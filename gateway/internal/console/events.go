package console

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/services/follow"
	"google.golang.org/protobuf/types/known/timestamppb"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

// Bounds of the live events.
const (
	// maxEvents is the ring buffer of recent events the page shows.
	maxEvents = 200
	// auditTail is how many audit events the page shows.
	auditTail = 50
	// pendingShown is how many pending tool definitions the page shows.
	pendingShown = 100
	// liveRefresh is the reload interval of the page in live mode.
	liveRefresh = 10
	// quarantinePoll is how often the console looks for new quarantines
	// besides after each catalog change (the definitions watch tells of
	// approvals only).
	quarantinePoll = 10 * time.Second
	// maxQuarantinesTracked bounds the pending definitions the console
	// remembers having told of (one page of ListToolDefinitions).
	maxQuarantinesTracked = 1000
	// namesInSummary is how many items one summary event names.
	namesInSummary = 10
)

// watchBackoff is the console's watch reconnection back-off: slower than
// the services' own streams, since nothing waits on the console's.
var watchBackoff = follow.Backoff{Min: time.Second, Max: 30 * time.Second}

// event is one thing the console's watchers heard.
type event struct {
	Time   time.Time
	Kind   string
	Detail string
	// Times is how many like watch events in a row this one stands for
	// (addWatch); 1 for any other.
	Times int
	// state names a watch event's kind of state ("catalog watch ended").
	state string
}

// eventLog is a bounded log of recent events, oldest first.
type eventLog struct {
	mu     sync.Mutex
	events []event
	limit  int
}

func newEventLog(n int) *eventLog { return &eventLog{limit: n} }

func (l *eventLog) add(kind, detail string) {
	l.mu.Lock()
	l.push(event{Time: time.Now(), Kind: kind, Detail: detail, Times: 1})
	l.mu.Unlock()
}

// addWatch adds a watch's state event (its stream broke, opened, was
// resynchronised), named by state. One of the same state added since
// the last event of any other kind is replaced, its count carried: a
// stream that keeps breaking and reconnecting would otherwise fill the
// log and push the catalog's changes out of it.
func (l *eventLog) addWatch(state, detail string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := event{Time: time.Now(), Kind: "watch", Detail: detail, Times: 1, state: state}
	for i := len(l.events) - 1; i >= 0 && l.events[i].state != ""; i-- {
		if l.events[i].state == state {
			e.Times += l.events[i].Times
			l.events = slices.Delete(l.events, i, i+1)
			break
		}
	}
	l.push(e)
}

// push appends e, dropping the oldest event when the log is full.
func (l *eventLog) push(e event) {
	if len(l.events) == l.limit {
		l.events = slices.Delete(l.events, 0, 1)
	}
	l.events = append(l.events, e)
}

// recent returns the events, newest first.
func (l *eventLog) recent() []event {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Clone(l.events)
	slices.Reverse(out)
	return out
}

var kindNames = map[aggregatorv1.CatalogKind]string{
	aggregatorv1.CatalogKind_CATALOG_KIND_TOOLS:              "tools",
	aggregatorv1.CatalogKind_CATALOG_KIND_RESOURCES:          "resources",
	aggregatorv1.CatalogKind_CATALOG_KIND_RESOURCE_TEMPLATES: "resource templates",
	aggregatorv1.CatalogKind_CATALOG_KIND_PROMPTS:            "prompts",
}

// watch follows the catalog's changes (every change, whoever's view) and
// the approvals of pinned tool definitions into the event log, until ctx
// ends, reconnecting with back-off.
func (c *Console) watch(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { c.follow(ctx, "catalog watch", c.watchCatalog) })
	if c.deps.Indexer != nil {
		wg.Go(func() { c.follow(ctx, "tool definitions watch", c.watchDefinitions) })
		wg.Go(func() { c.watchQuarantines(ctx) })
	}
	wg.Wait()
}

// follow runs one watch again and again with the services' stream
// back-off (services/follow). Only the first break of an outage becomes an
// event, and the breaks of a watch that reconnects and breaks again and
// again are coalesced (addWatch): either would otherwise fill the log
// and push the catalog's changes out of it.
func (c *Console) follow(ctx context.Context, what string, run func(ctx context.Context, connected func()) error) {
	follow.Run(ctx, watchBackoff, run, func(err error, first bool, _ time.Duration) {
		if first {
			c.events.addWatch(what+" ended", fmt.Sprintf("%s ended: %v (reconnecting)", what, err))
		}
	})
}

func (c *Console) watchCatalog(ctx context.Context, connected func()) error {
	stream, err := c.deps.Aggregator.WatchCatalog(ctx, &aggregatorv1.WatchCatalogRequest{AllChanges: true})
	if err != nil {
		return err
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			return err
		}
		connected()
		if len(ev.GetChanged()) == 0 {
			c.events.addWatch("catalog watch open", fmt.Sprintf("catalog watch open at version %d", ev.GetCatalogVersion()))
			continue
		}
		var kinds []string
		for _, k := range ev.GetChanged() {
			kinds = append(kinds, kindNames[k])
		}
		c.events.add("list_changed", fmt.Sprintf("%s changed (catalog version %d)", strings.Join(kinds, ", "), ev.GetCatalogVersion()))
		// A quarantine changes the catalog (pin mode stops listing the
		// tool): look for it now.
		select {
		case c.catalogChanged <- struct{}{}:
		default:
		}
	}
}

func (c *Console) watchDefinitions(ctx context.Context, connected func()) error {
	stream, err := c.deps.Indexer.WatchToolDefinitions(ctx, &indexerv1.WatchToolDefinitionsRequest{})
	if err != nil {
		return err
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			return err
		}
		connected()
		if ev.GetResync() {
			c.events.addWatch("tool definitions watch resynchronised", "tool definitions watch (re)synchronised")
		}
		// One event per message, however many approvals it carries (up to
		// 1,000), so a large approval cannot push the catalog changes out
		// of the ring.
		switch a := ev.GetApprovals(); len(a) {
		case 0:
		case 1:
			c.events.add("approval", fmt.Sprintf("%s/%s approved at digest %s", a[0].GetBackend(), a[0].GetTool(), a[0].GetDigest()))
		default:
			names := make([]string, 0, namesInSummary)
			for _, d := range a[:min(len(a), namesInSummary)] {
				names = append(names, d.GetBackend()+"/"+d.GetTool())
			}
			c.events.add("approval", fmt.Sprintf("%d tool definitions approved: %s", len(a), summarise(names, len(a))))
		}
	}
}

// summarise joins the first names of total items.
func summarise(names []string, total int) string {
	s := strings.Join(names, ", ")
	if total > len(names) {
		s += fmt.Sprintf(" and %d more", total-len(names))
	}
	return s
}

// watchQuarantines tells of tool definitions that become pending (in pin
// mode: quarantined until an operator approves them), after each catalog
// change and every quarantinePoll, until ctx ends. Each poll that finds
// new ones adds one event.
func (c *Console) watchQuarantines(ctx context.Context) {
	known := map[string]bool{} // backend/tool@seen digest, as last listed
	tick := time.NewTicker(quarantinePoll)
	defer tick.Stop()
	for {
		c.pollQuarantines(ctx, known)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-c.catalogChanged:
		}
	}
}

func (c *Console) pollQuarantines(ctx context.Context, known map[string]bool) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := c.deps.Indexer.ListToolDefinitions(ctx, &indexerv1.ListToolDefinitionsRequest{PageSize: maxQuarantinesTracked})
	if err != nil {
		return // the page shows the failure of its own listing
	}
	var fresh []string
	var first *indexerv1.ToolDefinition
	seen := map[string]bool{}
	for _, d := range resp.GetDefinitions() {
		if !d.GetPending() {
			continue
		}
		k := d.GetBackend() + "/" + d.GetTool() + "@" + d.GetSeenDigest()
		seen[k] = true
		if !known[k] {
			if first == nil {
				first = d
			}
			if len(fresh) < namesInSummary {
				fresh = append(fresh, d.GetBackend()+"/"+d.GetTool())
			}
		}
	}
	n := 0
	for k := range seen {
		if !known[k] {
			n++
		}
	}
	// What is no longer pending (approved, or gone) is forgotten, so the
	// set stays within one listing.
	clear(known)
	maps.Copy(known, seen)
	switch {
	case n == 1 && first.GetApprovedDigest() == "":
		// A new tool of a backend whose tools are pinned
		// (aggregator.pinning.newTools review): nothing approved yet.
		c.events.add("quarantine", fmt.Sprintf("%s/%s is a new tool waiting for approval: seen digest %s",
			first.GetBackend(), first.GetTool(), first.GetSeenDigest()))
	case n == 1:
		c.events.add("quarantine", fmt.Sprintf("%s/%s is waiting for approval: seen digest %s, approved %s",
			first.GetBackend(), first.GetTool(), first.GetSeenDigest(), first.GetApprovedDigest()))
	case n > 1:
		c.events.add("quarantine", fmt.Sprintf("%d tool definitions are waiting for approval: %s", n, summarise(fresh, n)))
	}
}

type eventsData struct {
	Live    bool
	Events  []event
	Pending []*indexerv1.ToolDefinition
	// PendingNote and AuditNote say why a section is empty or missing.
	PendingNote, AuditNote string
	// PendingCut is set when more definitions are pending than shown.
	PendingCut             bool
	PendingShown           int
	Audit                  []*indexerv1.AuditEvent
	Kind, Outcome, Subject string
	// Tool, Since and Until narrow the trail further: a tool's name, and a
	// time range (UTC, as a datetime-local field gives it).
	Tool, Since, Until string
	// LiveURL and StillURL switch live mode on and off.
	LiveURL, StillURL string
}

// eventsPage shows the recent events, the quarantined (pending) tool
// definitions and the tail of the audit trail; ?live=1 reloads it every
// few seconds (no script: a meta refresh).
func (c *Console) eventsPage(w http.ResponseWriter, r *http.Request, s session) {
	q := r.URL.Query()
	d := eventsData{Live: q.Get("live") == "1", Events: c.events.recent(), Kind: q.Get("kind"), Outcome: q.Get("outcome"), Subject: q.Get("subject"),
		Tool: q.Get("tool"), Since: q.Get("since"), Until: q.Get("until")}
	p := page{Title: "Live events", Active: "events", Session: &s, Data: &d}
	if len(d.Kind) > maxGroupBytes || len(d.Outcome) > maxGroupBytes || len(d.Subject) > maxSubjectBytes || len(d.Tool) > maxSubjectBytes {
		p.Error = "a filter is too long"
		c.render(w, r, http.StatusBadRequest, "events", p)
		return
	}
	since, errSince := formTime(d.Since)
	until, errUntil := formTime(d.Until)
	if errSince != nil || errUntil != nil {
		p.Error = "a time must be a date and time, as 2026-12-06T09:30 (UTC)"
		c.render(w, r, http.StatusBadRequest, "events", p)
		return
	}
	filters := url.Values{"kind": {d.Kind}, "outcome": {d.Outcome}, "subject": {d.Subject}, "tool": {d.Tool}, "since": {d.Since}, "until": {d.Until}}
	d.StillURL = "/console/events?" + filters.Encode()
	filters.Set("live", "1")
	d.LiveURL = "/console/events?" + filters.Encode()
	if d.Live {
		p.Refresh = liveRefresh
	}
	if c.deps.Indexer == nil {
		d.PendingNote, d.AuditNote = "gateway.indexer is not configured.", "gateway.indexer is not configured."
		c.render(w, r, http.StatusOK, "events", p)
		return
	}
	ctx, cancel := rpcContext(r)
	defer cancel()
	if resp, err := c.deps.Indexer.ListToolDefinitions(ctx, &indexerv1.ListToolDefinitionsRequest{PageSize: pendingShown}); err != nil {
		_, d.PendingNote, _ = rpcFailure("ListToolDefinitions", err)
	} else {
		d.Pending = resp.GetDefinitions()
		d.PendingCut, d.PendingShown = resp.GetNextPageToken() != "", pendingShown
	}
	if resp, err := c.deps.Indexer.QueryAuditEvents(ctx, &indexerv1.QueryAuditEventsRequest{
		Kind: d.Kind, Outcome: d.Outcome, Subject: d.Subject, Tool: d.Tool, Since: since, Until: until, PageSize: auditTail,
	}); err != nil {
		_, d.AuditNote, _ = rpcFailure("QueryAuditEvents", err)
	} else {
		d.Audit = resp.GetEvents()
	}
	c.render(w, r, http.StatusOK, "events", p)
}

// formTime reads a datetime-local field's value as UTC; nil for none.
func formTime(v string) (*timestamppb.Timestamp, error) {
	if v == "" {
		return nil, nil
	}
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05"} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return timestamppb.New(t), nil
		}
	}
	return nil, errors.New("not a date and time")
}
