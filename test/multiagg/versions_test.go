package multiagg

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/demobackend"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// catalogIdentity is everything a replica says to identify its catalog
// and one principal's view of it.
type catalogIdentity struct {
	discoverVersion, watchVersion uint64
	toolsDigest, watchDigest      string
	pages                         []string // version and digest of every ListTools page
	tools                         int
}

func identify(t *testing.T, ctx context.Context, c aggregatorv1.AggregatorServiceClient, p *commonv1.Principal) (catalogIdentity, error) {
	t.Helper()
	var id catalogIdentity
	d, err := c.Discover(ctx, &aggregatorv1.DiscoverRequest{Principal: p})
	if err != nil {
		return id, err
	}
	id.discoverVersion, id.toolsDigest = d.GetCatalogVersion(), d.GetToolsDigest()
	for cursor := ""; ; {
		page, err := c.ListTools(ctx, &aggregatorv1.ListToolsRequest{Principal: p, Cursor: cursor, PageSize: 4})
		if err != nil {
			return id, err
		}
		id.tools += len(page.GetTools())
		id.pages = append(id.pages, fmt.Sprintf("%d/%s", page.GetCatalogVersion(), page.GetToolsDigest()))
		if cursor = page.GetNextCursor(); cursor == "" {
			break
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := c.WatchCatalog(wctx, &aggregatorv1.WatchCatalogRequest{Principal: p})
	if err != nil {
		return id, err
	}
	first, err := w.Recv()
	if err != nil && err != io.EOF {
		return id, err
	}
	id.watchVersion, id.watchDigest = first.GetCatalogVersion(), first.GetToolsDigest()
	return id, nil
}

// TestReplicasOverSameBackendsReportSameVersions: two aggregator processes
// over the same backends report the same catalog version and digests in
// Discover, every ListTools page and WatchCatalog, and a replica that
// restarts reports the same again (it does not go back to a count of its
// own).
func TestReplicasOverSameBackendsReportSameVersions(t *testing.T) {
	w := newWorld(t)
	w.backend("alpha")
	w.backend("beta")
	ctx := ctxT(t)
	alice := &commonv1.Principal{Subject: "alice"}
	toolCount := func(a *aggregator, want int) func() error {
		return func() error {
			d, err := a.asGateway.Discover(ctx, &aggregatorv1.DiscoverRequest{Principal: alice})
			if err == nil && d.GetToolCount() != uint32(want) {
				err = fmt.Errorf("%d tools, want %d", d.GetToolCount(), want)
			}
			return err
		}
	}
	// Aggregator 1 has a history before aggregator 2 starts: it published
	// a catalog with one more tool and then the one without it again, so
	// a count of its own would be ahead of aggregator 2's.
	first := w.startAggregator("aggregator-1", w.config("alpha", "beta"))
	testkit.Eventually(t, "aggregator 1 lists both backends", 60*time.Second, toolCount(first, 10))
	w.addTool("alpha", demobackend.ToolSpec{Name: "passing", Description: "Here for a moment."})
	testkit.Eventually(t, "aggregator 1 lists the added tool", 60*time.Second, toolCount(first, 11))
	w.removeTool("alpha", "passing")
	testkit.Eventually(t, "aggregator 1 drops the removed tool", 60*time.Second, toolCount(first, 10))
	// identified polls a replica until its catalog holds want tools and
	// every RPC that identifies it answered from one catalog: a replica
	// that publishes a change between them is asked again, as for a count.
	identified := func(a *aggregator, want int, into *catalogIdentity) func() error {
		return func() error {
			id, err := identify(t, ctx, a.asGateway, alice)
			switch {
			case err != nil:
			case id.tools != want:
				err = fmt.Errorf("%d tools", id.tools)
			case id.discoverVersion != id.watchVersion:
				err = fmt.Errorf("asked across a change: Discover %d, watch %d", id.discoverVersion, id.watchVersion)
			}
			*into = id
			return err
		}
	}
	aggs := []*aggregator{first, w.startAggregator("aggregator-2", w.config("alpha", "beta"))}
	// Each replica lists its backends on its own schedule: wait until both
	// serve all ten tools.
	ids := make([]catalogIdentity, len(aggs))
	for i, a := range aggs {
		testkit.Eventually(t, fmt.Sprintf("aggregator %d lists both backends", i+1), 60*time.Second, identified(a, 10, &ids[i]))
	}
	check := func(what string, a, b catalogIdentity) {
		t.Helper()
		if a.discoverVersion == 0 || a.toolsDigest == "" {
			t.Fatalf("%s: no version or digest: %+v", what, a)
		}
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("%s differ:\n%+v\n%+v", what, a, b)
		}
		for _, page := range a.pages {
			if page != fmt.Sprintf("%d/%s", a.discoverVersion, a.toolsDigest) || a.watchVersion != a.discoverVersion || a.watchDigest != a.toolsDigest {
				t.Fatalf("%s: a page or the watch names another view: %+v", what, a)
			}
		}
	}
	check("the two replicas' catalogs", ids[0], ids[1])

	aggs[0].proc.Kill()
	aggs[0].proc.Restart()
	var again catalogIdentity
	testkit.Eventually(t, "the restarted aggregator lists both backends", 60*time.Second, identified(aggs[0], 10, &again))
	check("the catalog before and after a restart", again, ids[1])

	// A change on one backend moves both replicas to one new version.
	w.backends["beta"].Kill()
	for i, a := range aggs {
		testkit.Eventually(t, fmt.Sprintf("aggregator %d hides the stopped backend", i+1), 60*time.Second, identified(a, 5, &ids[i]))
	}
	check("the replicas' catalogs after a backend stopped", ids[0], ids[1])
	if ids[0].discoverVersion == again.discoverVersion {
		t.Fatalf("the version %d did not change with the catalog", again.discoverVersion)
	}
}
