package scope

import (
	"context"
	"errors"
	"strconv"
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
	for _, server := range []string{"", "sales"} {
		r.cache[cacheKey(server, alice)] = entry{scope: gone, expires: time.Now().Add(time.Hour)}
	}
	r.byDigest[gone.Digest] = gone
	r.Forget(alice, "sales", gone)
	if _, ok := r.cache[cacheKey("sales", alice)]; ok {
		t.Fatal("the collected scope is still cached for the server it was searched in")
	}
	if _, ok := r.byDigest[gone.Digest]; ok {
		t.Fatal("the collected scope is still known by its digest")
	}
	if _, ok := r.cache[cacheKey("", alice)]; !ok {
		t.Fatal("Forget dropped the principal's entry of another server")
	}
}
