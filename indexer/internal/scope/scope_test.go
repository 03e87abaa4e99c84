package scope

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// pagesClient serves ListTools from a fixed list of pages, one per call,
// as consecutive calls to replicas behind a load balancer may.
type pagesClient struct {
	aggregatorv1.AggregatorServiceClient
	pages []*aggregatorv1.ListToolsResponse
	calls int
}

func (c *pagesClient) ListTools(context.Context, *aggregatorv1.ListToolsRequest, ...grpc.CallOption) (*aggregatorv1.ListToolsResponse, error) {
	p := c.pages[c.calls]
	c.calls++
	return p, nil
}

func page(version uint64, digest string, last bool, names ...string) *aggregatorv1.ListToolsResponse {
	p := &aggregatorv1.ListToolsResponse{CatalogVersion: version, ToolsDigest: digest}
	for _, n := range names {
		p.Tools = append(p.Tools, &aggregatorv1.Tool{Name: n})
	}
	if !last {
		p.NextCursor = "after-" + strconv.Itoa(len(names))
	}
	return p
}

// TestListToolsTakesEveryPageFromOneView: a listing is accepted only when
// every page carries the first page's version and digest, and is named by
// that digest; any page of another view is errViewMoved.
func TestListToolsTakesEveryPageFromOneView(t *testing.T) {
	disc := &aggregatorv1.DiscoverResponse{CatalogVersion: 7, ToolsDigest: "dA"}
	for _, c := range []struct {
		name       string
		pages      []*aggregatorv1.ListToolsResponse
		wantDigest string
		wantTools  int
	}{
		{"one view", []*aggregatorv1.ListToolsResponse{page(7, "dA", false, "a_1", "a_2"), page(7, "dA", true, "a_3")}, "dA", 3},
		{"another replica's whole view", []*aggregatorv1.ListToolsResponse{page(9, "dB", false, "b_1"), page(9, "dB", true, "b_2")}, "dB", 2},
		{"second page of another version", []*aggregatorv1.ListToolsResponse{page(7, "dA", false, "a_1"), page(9, "dB", true, "b_2")}, "", 0},
		{"second page of another digest", []*aggregatorv1.ListToolsResponse{page(7, "dA", false, "a_1"), page(7, "dB", true, "b_2")}, "", 0},
		{"no digest, Discover's version", []*aggregatorv1.ListToolsResponse{page(7, "", false, "a_1"), page(7, "", true, "a_2")}, "dA", 2},
		{"no digest, another version", []*aggregatorv1.ListToolsResponse{page(9, "", true, "b_1")}, "", 0},
	} {
		r := &Resolver{agg: &pagesClient{pages: c.pages}}
		view, err := r.listTools(context.Background(), r.agg, &commonv1.Principal{}, "", disc)
		if c.wantDigest == "" {
			if !errors.Is(err, errViewMoved) {
				t.Errorf("%s: %v, %+v; want errViewMoved", c.name, err, view)
			}
			continue
		}
		if err != nil || view.digest != c.wantDigest || len(view.tools) != c.wantTools {
			t.Errorf("%s: %+v, %v; want %d tools under %s", c.name, view, err, c.wantTools, c.wantDigest)
		}
	}
}

// TestForgetDropsTheCachedEntry: once a scope vanished from the store
// (another replica collected it), Forget drops the very entry Resolve
// cached for that principal in that server, and only that one, so the
// next search builds the scope again instead of failing until the cache's
// TTL passes.
func TestForgetDropsTheCachedEntry(t *testing.T) {
	alice := &commonv1.Principal{Subject: "alice", Groups: []string{"eng"}}
	gone := store.Scope{ID: 7, Digest: "d7"}
	r := New(nil, nil, time.Hour, nil)
	now := time.Now()
	for _, server := range []string{"", "sales"} {
		r.cache.put(cacheKey(server, alice), gone, now.Add(time.Hour), now)
	}
	r.byDigest[gone.Digest] = gone
	r.Forget(alice, "sales", gone)
	if _, ok := r.cache.get(cacheKey("sales", alice), now); ok {
		t.Fatal("the collected scope is still cached for the server it was searched in")
	}
	if _, ok := r.byDigest[gone.Digest]; ok {
		t.Fatal("the collected scope is still known by its digest")
	}
	if _, ok := r.cache.get(cacheKey("", alice), now); !ok {
		t.Fatal("Forget dropped the principal's entry of another server")
	}
}

// discoverClient answers Discover with one view's digest, counting the
// calls.
type discoverClient struct {
	aggregatorv1.AggregatorServiceClient
	calls int
}

func (c *discoverClient) Discover(context.Context, *aggregatorv1.DiscoverRequest, ...grpc.CallOption) (*aggregatorv1.DiscoverResponse, error) {
	c.calls++
	return &aggregatorv1.DiscoverResponse{CatalogVersion: 1, ToolsDigest: "d1"}, nil
}

// TestResolverCacheIsBounded: principals are chosen by callers, so the
// principal→scope cache holds at most maxCachedPrincipals of them (the
// one that expires first makes room, the newest stay) and drops expired
// ones rather than keeping them until the catalog changes; its keys are
// digests, whatever a principal's size; equal principals in other
// servers, or whose fields split differently, are told apart.
func TestResolverCacheIsBounded(t *testing.T) {
	agg := &discoverClient{}
	r := New(agg, nil, time.Hour, slog.New(slog.NewTextHandler(io.Discard, nil)))
	now := time.Now()
	r.now = func() time.Time { return now }
	r.byDigest["d1"] = store.Scope{ID: 1, Digest: "d1"}
	resolve := func(p *commonv1.Principal, server string) {
		t.Helper()
		if sc, _, err := r.Resolve(context.Background(), p, server); err != nil || sc.ID != 1 {
			t.Fatalf("resolve %s: %v, %v", p.GetSubject(), sc, err)
		}
	}
	long := strings.Repeat("g", 1024)
	for i := range maxCachedPrincipals + 100 {
		now = now.Add(time.Millisecond)
		resolve(&commonv1.Principal{Subject: fmt.Sprint("p", i), Groups: []string{long}}, "")
	}
	if n := r.cache.len(); n != maxCachedPrincipals || len(r.cache.byKey) != n {
		t.Fatalf("%d principals cached (%d keys), want the bound, %d", n, len(r.cache.byKey), maxCachedPrincipals)
	}
	calls := agg.calls
	resolve(&commonv1.Principal{Subject: fmt.Sprint("p", maxCachedPrincipals+99), Groups: []string{long}}, "")
	if agg.calls != calls {
		t.Fatal("the newest principal was not cached")
	}
	now = now.Add(time.Millisecond)
	resolve(&commonv1.Principal{Subject: "p0", Groups: []string{long}}, "")
	if agg.calls != calls+1 {
		t.Fatal("the oldest principal is still cached past the bound")
	}

	// An hour after the newest but p0 was stored, all but p0 have
	// expired: they are dropped.
	now = now.Add(time.Hour - time.Millisecond)
	resolve(&commonv1.Principal{Subject: "fresh"}, "")
	if n := r.cache.len(); n != 2 {
		t.Fatalf("%d principals cached after an hour, want p0's and fresh's", n)
	}

	for _, pair := range [][2]principalKey{
		{cacheKey("", &commonv1.Principal{Subject: "a"}), cacheKey("sales", &commonv1.Principal{Subject: "a"})},
		{cacheKey("", &commonv1.Principal{Subject: "a", Groups: []string{"b"}}), cacheKey("", &commonv1.Principal{Subject: "ab"})},
		{cacheKey("", &commonv1.Principal{Groups: []string{"a", "b"}}), cacheKey("", &commonv1.Principal{Groups: []string{"a\x00b"}})},
	} {
		if pair[0] == pair[1] {
			t.Errorf("two principals share the cache key %x", pair[0])
		}
	}
}
