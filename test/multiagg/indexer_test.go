package multiagg

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

const listToolsMethod = "/switchboard.aggregator.v1.AggregatorService/ListTools"

// scopesByBackend reads every stored scope and the backends its tools
// come from (the prefix of their advertised names).
func scopesByBackend(t *testing.T, ctx context.Context, database string) map[string][]string {
	t.Helper()
	conn, err := pgx.Connect(ctx, database)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// A scope is stored under its view's digest behind the indexer's
	// analysis version ("a2:<digest>").
	rows, err := conn.Query(ctx, `
		SELECT regexp_replace(s.tools_digest, '^a[0-9]+:', ''), array_agg(DISTINCT split_part(d.name, '_', 1) ORDER BY split_part(d.name, '_', 1))
		FROM scopes s JOIN scope_tools st ON st.scope_id = s.id JOIN tool_documents d ON d.id = st.doc_id
		GROUP BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for rows.Next() {
		var digest string
		var backends []string
		if err := rows.Scan(&digest, &backends); err != nil {
			t.Fatal(err)
		}
		out[digest] = backends
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// hitBackends are the backends of a search's hits.
func hitBackends(resp *indexerv1.SearchResponse) map[string]bool {
	seen := map[string]bool{}
	for _, h := range resp.GetHits() {
		b, _, _ := strings.Cut(h.GetName(), "_")
		seen[b] = true
	}
	return seen
}

// TestIndexerNeverMixesReplicaViews: the indexer reads views through a
// round-robin target over two aggregator processes whose catalogs differ
// (alpha's tools on one, beta's on the other), so Discover and each
// ListTools page of one build land on alternating replicas. Every scope it
// stores, and every search it answers, holds the tools of one replica only.
func TestIndexerNeverMixesReplicaViews(t *testing.T) {
	w := newWorld(t)
	w.backend("alpha")
	w.backend("beta")
	one := w.startAggregator("aggregator-1", w.config("alpha"))
	two := w.startAggregator("aggregator-2", w.config("beta"))
	proxy := startRRProxy(t, one.addr, two.addr)
	// Discover and ListTools calls each alternate between the replicas, out
	// of step: the first build lists aggregator 2 after Discover asked
	// aggregator 1, the next one's Discover asks aggregator 2, and so on.
	var discovers, lists atomic.Int64
	lists.Add(1)
	outOfStep := func(method string) int {
		switch method {
		case listToolsMethod:
			return int((lists.Add(1) - 1) % 2)
		case "/switchboard.aggregator.v1.AggregatorService/Discover":
			return int((discovers.Add(1) - 1) % 2)
		}
		return -1
	}
	proxy.route.Store(&outOfStep)
	idx := w.startIndexer(proxy.addr)
	ctx := ctxT(t)

	// Principals of the same view, each resolved afresh.
	searches := 0
	for i := range 12 {
		p := &commonv1.Principal{Subject: fmt.Sprintf("user-%d", i)}
		var resp *indexerv1.SearchResponse
		testkit.Eventually(t, "search "+p.GetSubject(), 60*time.Second, func() error {
			var err error
			resp, err = idx.Search(ctx, &indexerv1.SearchRequest{Principal: p, Query: "echo the arguments back", Limit: 50})
			return err
		})
		backends := hitBackends(resp)
		if len(backends) != 1 || resp.GetScopeSize() != 5 {
			t.Fatalf("search of %s: hits from %v in a scope of %d tools, want one backend's 5", p.GetSubject(), backends, resp.GetScopeSize())
		}
		searches++
	}
	// A scope is named by the digest of the view it holds: aggregator 1's
	// digest names alpha's tools, aggregator 2's beta's, and no scope holds
	// anything else.
	want := map[string]string{}
	for backend, a := range map[string]*aggregator{"alpha": one, "beta": two} {
		d, err := a.asGateway.Discover(ctx, &aggregatorv1.DiscoverRequest{Principal: &commonv1.Principal{Subject: "user-0"}})
		if err != nil {
			t.Fatal(err)
		}
		want[d.GetToolsDigest()] = backend
	}
	scopes := scopesByBackend(t, ctx, w.database)
	if len(scopes) == 0 {
		t.Fatal("no scope stored")
	}
	for digest, backends := range scopes {
		if len(backends) != 1 || want[digest] != backends[0] {
			t.Fatalf("scope %s holds the tools of %v; that digest names %q's view", digest, backends, want[digest])
		}
	}
	if n := proxy.callsTo(listToolsMethod); n[0] == 0 || n[1] == 0 {
		t.Fatalf("ListTools calls per replica %v: the builds did not meet both replicas", n)
	}
	t.Logf("%d searches, scopes %v, ListTools per replica %v", searches, scopes, proxy.callsTo(listToolsMethod))
}

// TestIndexerRefusesPagesOfTwoReplicas: the views have two pages each (1100
// tools, pages of 1000) and the ListTools calls alternate between the two
// replicas, so no build ever sees two pages of one view. The search fails
// cleanly, UNAVAILABLE with a message that says why, and nothing is stored;
// once the pages come from one replica the same search succeeds.
func TestIndexerRefusesPagesOfTwoReplicas(t *testing.T) {
	w := newWorld(t)
	w.backend("alpha", "--synthetic", "1100")
	w.backend("beta", "--synthetic", "1100")
	one := w.startAggregator("aggregator-1", w.config("alpha"))
	two := w.startAggregator("aggregator-2", w.config("beta"))
	proxy := startRRProxy(t, one.addr, two.addr)
	// Everything but ListTools goes to aggregator 1; ListTools calls
	// alternate.
	alternate := func(method string) int {
		if method == listToolsMethod {
			return -1
		}
		return 0
	}
	proxy.route.Store(&alternate)
	idx := w.startIndexer(proxy.addr)
	ctx := ctxT(t)
	alice := &commonv1.Principal{Subject: "alice"}

	var err error
	testkit.Eventually(t, "the indexer to refuse the mixed pages", 60*time.Second, func() error {
		_, err = idx.Search(ctx, &indexerv1.SearchRequest{Principal: alice, Query: "synthetic echo tool"})
		if status.Code(err) == codes.Unavailable && strings.Contains(status.Convert(err).Message(), "consistent") {
			return nil
		}
		return fmt.Errorf("search: %v", err)
	})
	if scopes := scopesByBackend(t, ctx, w.database); len(scopes) != 0 {
		t.Fatalf("scopes stored from mixed pages: %v", scopes)
	}
	if n := proxy.callsTo(listToolsMethod); n[0] == 0 || n[1] == 0 {
		t.Fatalf("ListTools calls per replica %v", n)
	}

	// One replica serves every page: the build succeeds, with its tools.
	pinned := func(string) int { return 1 }
	proxy.route.Store(&pinned)
	resp, err := idx.Search(ctx, &indexerv1.SearchRequest{Principal: alice, Query: "synthetic echo tool", Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	if b := hitBackends(resp); len(b) != 1 || !b["beta"] || resp.GetScopeSize() != 1100 {
		t.Fatalf("search with one replica: hits from %v, scope of %d", b, resp.GetScopeSize())
	}
	for digest, backends := range scopesByBackend(t, ctx, w.database) {
		if len(backends) != 1 || backends[0] != "beta" {
			t.Fatalf("scope %s holds the tools of %v", digest, backends)
		}
	}
}
