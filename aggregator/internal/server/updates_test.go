package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/authz"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// subscribeBackend is a real go-sdk server advertising
// resources.subscribe (Legacy with sessions, or stateless Modern), counting the subscribe and unsubscribe requests it
// receives per URI.
type subscribeBackend struct {
	server *mcp.Server
	url    string

	mu           sync.Mutex
	subscribes   map[string]int
	unsubscribes map[string]int
}

func newSubscribeBackend(t *testing.T, stateless bool, uris ...string) *subscribeBackend {
	t.Helper()
	b := &subscribeBackend{subscribes: map[string]int{}, unsubscribes: map[string]int{}}
	count := func(m map[string]int, uri string) {
		b.mu.Lock()
		m[uri]++
		b.mu.Unlock()
	}
	b.server = mcp.NewServer(&mcp.Implementation{Name: "subs", Version: "1"}, &mcp.ServerOptions{
		Logger: quietLog,
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			count(b.subscribes, req.Params.URI)
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, req *mcp.UnsubscribeRequest) error {
			count(b.unsubscribes, req.Params.URI)
			return nil
		},
	})
	for _, uri := range uris {
		b.server.AddResource(&mcp.Resource{URI: uri, Name: uri}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Text: "x"}}}, nil
		})
	}
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return b.server }, &mcp.StreamableHTTPOptions{Stateless: stateless, Logger: quietLog}))
	t.Cleanup(srv.Close)
	b.url = srv.URL
	return b
}

func (b *subscribeBackend) counts(uri string) (subscribes, unsubscribes int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.subscribes[uri], b.unsubscribes[uri]
}

const subscribePolicy = `
permit (principal, action == Action::"read_resource", resource);
forbid (principal, action == Action::"read_resource", resource == Resource::"sub://secret");
`

type watch struct {
	first  *aggregatorv1.WatchCatalogResponse
	events chan *aggregatorv1.WatchCatalogResponse
	cancel context.CancelFunc
}

func startWatch(t *testing.T, c aggregatorv1.AggregatorServiceClient, uris ...string) *watch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := c.WatchCatalog(ctx, &aggregatorv1.WatchCatalogRequest{Principal: principal("alice"), ResourceUris: uris})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	w := &watch{first: first, events: make(chan *aggregatorv1.WatchCatalogResponse, 16), cancel: cancel}
	go func() {
		for {
			ev, err := stream.Recv()
			if err != nil {
				return
			}
			w.events <- ev
		}
	}()
	return w
}

// nextUpdate returns the next resource update of w, ignoring catalog events.
func (w *watch) nextUpdate(t *testing.T) string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-w.events:
			if u := ev.GetUpdatedResourceUris(); len(u) > 0 {
				return u[0]
			}
		case <-deadline:
			t.Fatal("no resource update within 10s")
		}
	}
}

// Updates reach only the watchers that asked for the URI; the backend sees
// one subscription per URI however many watchers share it, and the
// unsubscribe when the last one leaves; a denied URI is refused exactly
// like an unknown one, and so is a URI whose backend cannot subscribe.
func TestWatchCatalogRelaysSubscribedResourceUpdates(t *testing.T) {
	subs := newSubscribeBackend(t, false, "sub://a", "sub://b", "sub://secret")
	plain := newTestBackend(t, "plain", backendOptions{extra: func(b *testBackend) {
		b.server.AddResource(&mcp.Resource{URI: "plain://r", Name: "r"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "plain://r", Text: "x"}}}, nil
		})
	}})
	h := startAggregator(t, parseConfig(t, `
aggregator:
  authz: {policyFile: `+writeFile(t, "policy.cedar", subscribePolicy)+`}
  backends:
    - {name: subs, url: `+subs.url+`, protocol: "2025-11-25"}
    - {name: plain, url: `+plain.url()+`}
`))
	testkit.Eventually(t, "resources listed", 10*time.Second, func() bool {
		r, err := h.gateway.ListResources(context.Background(), &aggregatorv1.ListResourcesRequest{Principal: principal("alice")})
		return err == nil && len(r.GetResources()) == 3
	})

	w1 := startWatch(t, h.gateway, "sub://a", "sub://secret", "sub://missing", "plain://r", "sub://a")
	if got := w1.first.GetSubscribedResourceUris(); !slices.Equal(got, []string{"sub://a"}) {
		t.Fatalf("first watch subscribed %v, want only sub://a", got)
	}
	w2 := startWatch(t, h.gateway, "sub://a", "sub://b")
	if got := w2.first.GetSubscribedResourceUris(); !slices.Equal(got, []string{"sub://a", "sub://b"}) {
		t.Fatalf("second watch subscribed %v", got)
	}
	if s, _ := subs.counts("sub://a"); s != 1 {
		t.Fatalf("backend saw %d subscribes of sub://a, want 1", s)
	}
	if s, _ := subs.counts("sub://secret"); s != 0 {
		t.Fatal("a denied URI was subscribed at the backend")
	}

	ctx := context.Background()
	if err := subs.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "sub://b"}); err != nil {
		t.Fatal(err)
	}
	if err := subs.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "sub://a"}); err != nil {
		t.Fatal(err)
	}
	if got := w2.nextUpdate(t); got != "sub://b" {
		t.Fatalf("second watch got %q first, want sub://b", got)
	}
	if got := w2.nextUpdate(t); got != "sub://a" {
		t.Fatalf("second watch got %q, want sub://a", got)
	}
	// Updates are relayed in order: had sub://b reached w1, it would come
	// before sub://a.
	if got := w1.nextUpdate(t); got != "sub://a" {
		t.Fatalf("first watch got %q, want only sub://a", got)
	}

	// A resource that goes away is unsubscribed though its watcher stays.
	subs.server.RemoveResources("sub://b")
	testkit.Eventually(t, "removed sub://b unsubscribed", 10*time.Second, func() bool {
		_, u := subs.counts("sub://b")
		return u == 1
	})
	w2.cancel()
	// w2's end leaves w1's sub://a subscribed: the watch's end has been
	// handled once the aggregator holds one reference to it.
	testkit.Eventually(t, "w2's reference to sub://a released", 10*time.Second, func() bool {
		return h.engine.Backends()[1].Subscriptions("sub://a") == 1
	})
	if _, u := subs.counts("sub://a"); u != 0 {
		t.Fatal("sub://a unsubscribed while a watcher still holds it")
	}
	w1.cancel()
	testkit.Eventually(t, "sub://a unsubscribed", 10*time.Second, func() bool {
		_, u := subs.counts("sub://a")
		return u == 1
	})
}

// A watch naming one resource under two spellings subscribed both, and
// an update of the resource reaches it under each: a client matches
// updates to its subscriptions by the URI it gave.
func TestWatchCatalogUpdatesEverySpellingSubscribed(t *testing.T) {
	subs, h := startSubscriptions(t, "sub://a")
	w := startWatch(t, h.gateway, "sub://a", "SUB://%61")
	if got := w.first.GetSubscribedResourceUris(); !slices.Equal(got, []string{"sub://a", "SUB://%61"}) {
		t.Fatalf("subscribed %v, want both spellings", got)
	}
	if err := subs.server.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: "sub://a"}); err != nil {
		t.Fatal(err)
	}
	got := []string{w.nextUpdate(t), w.nextUpdate(t)}
	if slices.Sort(got); !slices.Equal(got, []string{"SUB://%61", "sub://a"}) {
		t.Fatalf("updates under %v, want one under each spelling", got)
	}
}

// A Modern backend's updates, which reach the aggregator on the listen
// stream the SDK opens for the subscription, are relayed too.
func TestWatchCatalogRelaysModernBackendUpdates(t *testing.T) {
	modern := newSubscribeBackend(t, true, "sub://m")
	h := startAggregator(t, parseConfig(t, `
aggregator:
  backends:
    - {name: modern, url: `+modern.url+`, protocol: "2026-07-28"}
`))
	testkit.Eventually(t, "resources listed", 10*time.Second, func() bool {
		r, err := h.gateway.ListResources(context.Background(), &aggregatorv1.ListResourcesRequest{Principal: principal("alice")})
		return err == nil && len(r.GetResources()) == 1
	})
	w := startWatch(t, h.gateway, "sub://m")
	if got := w.first.GetSubscribedResourceUris(); !slices.Equal(got, []string{"sub://m"}) {
		t.Fatalf("subscribed %v", got)
	}
	// The backend's listen stream may still be opening: announce until the
	// watcher hears of it.
	testkit.Eventually(t, "update relayed", 10*time.Second, func() bool {
		_ = modern.server.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: "sub://m"})
		select {
		case ev := <-w.events:
			return slices.Equal(ev.GetUpdatedResourceUris(), []string{"sub://m"})
		default:
			return false
		}
	})
}

// An app's page is subscribed to at its backend under the backend's own
// URI, and its updates reach the watcher under the advertised one.
func TestWatchCatalogRelaysAppPageUpdates(t *testing.T) {
	subs, h := startSubscriptions(t, "ui://app/page")
	if r, err := h.gateway.ListResources(context.Background(), &aggregatorv1.ListResourcesRequest{Principal: principal("alice")}); err != nil || r.GetResources()[0].GetUri() != "ui://subs/app/page" {
		t.Fatalf("the page is listed as %v (%v), want ui://subs/app/page", r.GetResources(), err)
	}
	w := startWatch(t, h.gateway, "ui://subs/app/page")
	if got := w.first.GetSubscribedResourceUris(); !slices.Equal(got, []string{"ui://subs/app/page"}) {
		t.Fatalf("subscribed %v", got)
	}
	if s, _ := subs.counts("ui://app/page"); s != 1 {
		t.Fatalf("the backend saw %d subscribes of its own URI, want 1", s)
	}
	if err := subs.server.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: "ui://app/page"}); err != nil {
		t.Fatal(err)
	}
	if got := w.nextUpdate(t); got != "ui://subs/app/page" {
		t.Fatalf("the update came as %q, want the advertised URI", got)
	}
}

// TestSubscriptionsOutliveAReloadThatChangesTheirBackend: a reload that
// changes a backend's settings (a rotated credential header) replaces its
// client; the watchers' subscriptions move to the new client, made at the
// backend again, and their updates go on once the old client is closed.
// They once stayed on the old client and stopped with it; the watcher
// still believed itself subscribed.
func TestSubscriptionsOutliveAReloadThatChangesTheirBackend(t *testing.T) {
	subs := newSubscribeBackend(t, false, "sub://a")
	full := &config.Config{Aggregator: config.Aggregator{Backends: []config.Backend{
		{Name: "subs", URL: subs.url, Protocol: "2025-11-25", Timeout: config.Duration(time.Second), InputWait: config.Duration(time.Second),
			Headers: map[string]string{"X-Token": "old-token-value"}},
	}}}
	h, err := startAggregatorWith(t, full, quietLog)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the resource listed", 10*time.Second, func() bool {
		r, err := h.gateway.ListResources(context.Background(), &aggregatorv1.ListResourcesRequest{Principal: principal("alice")})
		return err == nil && len(r.GetResources()) == 1
	})
	w := startWatch(t, h.gateway, "sub://a")
	if got := w.first.GetSubscribedResourceUris(); !slices.Equal(got, []string{"sub://a"}) {
		t.Fatalf("subscribed %v", got)
	}
	updated := func(when string) {
		t.Helper()
		if err := subs.server.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: "sub://a"}); err != nil {
			t.Fatal(err)
		}
		if got := w.nextUpdate(t); got != "sub://a" {
			t.Fatalf("%s: update of %q", when, got)
		}
	}
	updated("before the reload")
	old := slices.Collect(subs.server.Sessions())
	full.Aggregator.Backends[0].Headers = map[string]string{"X-Token": "new-token-value"}
	reconfigure(t, h, full)
	testkit.Eventually(t, "the new client subscribed and the old one closed", 10*time.Second, func() error {
		if n, _ := subs.counts("sub://a"); n < 2 {
			return fmt.Errorf("%d subscriptions at the backend", n)
		}
		for s := range subs.server.Sessions() {
			if slices.Contains(old, s) {
				return errors.New("a session of the old client is open")
			}
		}
		return nil
	})
	updated("after the old client closed")
	// The watcher's unsubscribe reaches the client that holds it now.
	w.cancel()
	testkit.Eventually(t, "the subscription dropped at the backend", 10*time.Second, func() bool {
		_, n := subs.counts("sub://a")
		return n == 1
	})
}

// startSubscriptions is an aggregator over a Legacy backend, subs,
// listing uris, which may be subscribed to, once all are listed.
func startSubscriptions(t *testing.T, uris ...string) (*subscribeBackend, *harness) {
	subs := newSubscribeBackend(t, false, uris...)
	h := startAggregator(t, parseConfig(t, `
aggregator:
  backends:
    - {name: subs, url: `+subs.url+`, protocol: "2025-11-25"}
`))
	testkit.Eventually(t, "resources listed", 10*time.Second, func() bool {
		r, err := h.gateway.ListResources(context.Background(), &aggregatorv1.ListResourcesRequest{Principal: principal("alice")})
		return err == nil && len(r.GetResources()) == len(uris)
	})
	return subs, h
}

// A subscribed resource that leaves the catalog (its backend stops
// listing it, a policy denies it) is dropped, and made again once it is
// back: the client still holds the subscription. It was never made
// again, so its updates stopped for good and nothing told the client.
func TestSubscriptionComesBackWithItsResource(t *testing.T) {
	subs, h := startSubscriptions(t, "sub://a", "sub://b")
	ctx := context.Background()
	w := startWatch(t, h.gateway, "sub://a")
	if !slices.Equal(w.first.GetSubscribedResourceUris(), []string{"sub://a"}) {
		t.Fatalf("subscribed %v", w.first.GetSubscribedResourceUris())
	}
	subs.server.RemoveResources("sub://a")
	testkit.Eventually(t, "sub://a unsubscribed once gone", 10*time.Second, func() bool {
		_, u := subs.counts("sub://a")
		return u == 1
	})
	subs.server.AddResource(&mcp.Resource{URI: "sub://a", Name: "sub://a"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "sub://a", Text: "x"}}}, nil
	})
	testkit.Eventually(t, "sub://a subscribed again once back", 10*time.Second, func() bool {
		s, _ := subs.counts("sub://a")
		return s == 2
	})
	if err := subs.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "sub://a"}); err != nil {
		t.Fatal(err)
	}
	if got := w.nextUpdate(t); got != "sub://a" {
		t.Fatalf("update %q, want sub://a", got)
	}
}

// Once a policy denies a subscribed resource, no update of it reaches the
// watcher after the event saying its resources changed: the updates
// queued for the watch before it dropped the URI went out after that
// event, up to a whole queue of them per watch.
func TestNoUpdateAfterADenial(t *testing.T) {
	subs, h := startSubscriptions(t, "sub://a", "sub://b")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := h.gateway.WatchCatalog(ctx, &aggregatorv1.WatchCatalogRequest{Principal: principal("alice"), ResourceUris: []string{"sub://a", "sub://b"}})
	if err != nil {
		t.Fatal(err)
	}
	if first, err := stream.Recv(); err != nil || len(first.GetSubscribedResourceUris()) != 2 {
		t.Fatalf("first event %v %v", first, err)
	}
	// Unread, the stream's flow-control window fills (a few thousand
	// small events), the watch blocks sending, and the updates after
	// those queue up for it.
	for range 5000 {
		if err := subs.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "sub://a"}); err != nil {
			t.Fatal(err)
		}
	}
	az, err := authz.Parse("deny", []byte("permit (principal, action, resource);\nforbid (principal, action == Action::\"read_resource\", resource == Resource::\"sub://a\");\n"))
	if err != nil {
		t.Fatal(err)
	}
	h.engine.SetAuthorizer(az)
	denied, after := false, 0
	for {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case slices.Contains(ev.GetChanged(), aggregatorv1.CatalogKind_CATALOG_KIND_RESOURCES):
			denied = true
			// sub://b's update queues behind every update of sub://a the
			// watch held: once it is here, they were all handled.
			if err := subs.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "sub://b"}); err != nil {
				t.Fatal(err)
			}
		case slices.Contains(ev.GetUpdatedResourceUris(), "sub://b"):
			if after > 0 {
				t.Fatalf("%d updates of sub://a after the event saying the denial changed the resources", after)
			}
			return
		case denied && slices.Contains(ev.GetUpdatedResourceUris(), "sub://a"):
			after++
		}
	}
}

// A reload that routes a subscribed URI to another backend (a conflict's
// priority changed) moves the watch's subscription there: it stayed at
// the backend that no longer serves the URI, relaying that one's updates
// while reads went to the other.
func TestSubscriptionFollowsItsResourceToAnotherBackend(t *testing.T) {
	first, second := newSubscribeBackend(t, false, "sub://a"), newSubscribeBackend(t, false, "sub://a")
	full := &config.Config{Aggregator: config.Aggregator{
		Backends: []config.Backend{
			{Name: "first", URL: first.url, Protocol: "2025-11-25"},
			{Name: "second", URL: second.url, Protocol: "2025-11-25"},
		},
		ConflictResolution: config.ConflictResolution{Strategy: config.StrategyPriority, PriorityOrder: []string{"first", "second"}},
	}}
	h, err := startAggregatorWith(t, full, quietLog)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	testkit.Eventually(t, "sub://a listed", 10*time.Second, func() bool {
		r, err := h.gateway.ListResources(ctx, &aggregatorv1.ListResourcesRequest{Principal: principal("alice")})
		return err == nil && len(r.GetResources()) == 1
	})
	w := startWatch(t, h.gateway, "sub://a")
	if n, _ := first.counts("sub://a"); n != 1 {
		t.Fatalf("the first backend saw %d subscriptions, want 1", n)
	}
	full.Aggregator.ConflictResolution.PriorityOrder = []string{"second", "first"}
	reconfigure(t, h, full)
	testkit.Eventually(t, "the subscription moved to the second backend", 10*time.Second, func() bool {
		_, dropped := first.counts("sub://a")
		made, _ := second.counts("sub://a")
		return dropped == 1 && made == 1
	})
	if err := second.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "sub://a"}); err != nil {
		t.Fatal(err)
	}
	if got := w.nextUpdate(t); got != "sub://a" {
		t.Fatalf("update %q, want sub://a", got)
	}
}
