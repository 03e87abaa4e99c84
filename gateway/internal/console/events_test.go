package console

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/follow"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// flappingAggregator's catalog watch opens (its first message, the
// snapshot), and on the first connection tells of one tools change; then
// every stream breaks (UNAVAILABLE), as a watch cut by a proxy or a
// replica that keeps restarting does, and the next attempt connects again.
type flappingAggregator struct {
	aggregatorv1.AggregatorServiceClient
	connections atomic.Int64
}

type flappingStream struct {
	grpc.ClientStream
	msgs []*aggregatorv1.WatchCatalogResponse
}

func (s *flappingStream) Recv() (*aggregatorv1.WatchCatalogResponse, error) {
	if len(s.msgs) == 0 {
		return nil, status.Error(codes.Unavailable, "stream cut")
	}
	m := s.msgs[0]
	s.msgs = s.msgs[1:]
	return m, nil
}

func (f *flappingAggregator) WatchCatalog(ctx context.Context, _ *aggregatorv1.WatchCatalogRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[aggregatorv1.WatchCatalogResponse], error) {
	n := f.connections.Add(1)
	msgs := []*aggregatorv1.WatchCatalogResponse{{CatalogVersion: 7}}
	if n == 1 {
		msgs = append(msgs, &aggregatorv1.WatchCatalogResponse{CatalogVersion: 8, Changed: []aggregatorv1.CatalogKind{aggregatorv1.CatalogKind_CATALOG_KIND_TOOLS}})
	}
	return &flappingStream{msgs: msgs}, nil
}

// TestFlappingWatchKeepsTheCatalogChanges: the events page keeps the last
// 200 events so that an operator sees the catalog changes (docs/console.md,
// Events). A watch that connects and breaks again and again (here 600
// times, about ten minutes at the console's 1 s back-off) added an
// "ended" and an "open" event per round, and pushed the tools change off
// the page. Its state events are now coalesced: the latest "ended" and
// "open" stand for the run, with its count.
func TestFlappingWatchKeepsTheCatalogChanges(t *testing.T) {
	saved := watchBackoff
	watchBackoff = follow.Backoff{Min: time.Millisecond, Max: time.Millisecond}
	t.Cleanup(func() { watchBackoff = saved })
	agg := &flappingAggregator{}
	cfg := &config.Config{}
	cfg.Gateway.Console = config.Console{Enabled: true, OperatorKeys: []string{testOperatorKey}, ServiceToken: testServiceToken}
	c, err := New(cfg, Deps{Aggregator: agg})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the watch reconnected 600 times", 60*time.Second, func() bool { return agg.connections.Load() >= 3*maxEvents })
	c.Close()
	var shown []string
	changes, watch, breaks := 0, 0, 0
	for _, e := range c.events.recent() {
		shown = append(shown, fmt.Sprintf("%s: %s (%d)", e.Kind, e.Detail, e.Times))
		switch {
		case e.Kind == "list_changed":
			changes++
		case e.Kind == "watch":
			watch++
			if strings.HasPrefix(e.Detail, "catalog watch ended: ") {
				breaks = e.Times
			}
		}
	}
	// The first open, the change, then the latest break and open.
	if changes != 1 || watch != 3 {
		t.Fatalf("after %d reconnections of a flapping watch, %d tools changes and %d watch events are shown, want 1 and 3: %s",
			agg.connections.Load(), changes, watch, strings.Join(shown[:min(len(shown), 6)], "; "))
	}
	if breaks < 2*maxEvents {
		t.Errorf("the coalesced breaks say they were %d: %s", breaks, strings.Join(shown, "; "))
	}
}

// TestWatchEventsCoalesceOnlyBetweenOtherEvents: a watch's state event
// replaces the same watch's like one only while no other event came
// between them, so the order of what happened stays on the page.
func TestWatchEventsCoalesceOnlyBetweenOtherEvents(t *testing.T) {
	l := newEventLog(10)
	l.addWatch("a ended", "a ended")
	l.addWatch("b ended", "b ended")
	l.addWatch("a ended", "a ended again")
	l.add("list_changed", "tools changed")
	l.addWatch("a ended", "a ended after the change")
	var got []string
	for _, e := range l.recent() {
		got = append(got, fmt.Sprintf("%s/%d", e.Detail, e.Times))
	}
	want := "a ended after the change/1, tools changed/1, a ended again/2, b ended/1"
	if strings.Join(got, ", ") != want {
		t.Fatalf("recent: %s\nwant:   %s", strings.Join(got, ", "), want)
	}
}
