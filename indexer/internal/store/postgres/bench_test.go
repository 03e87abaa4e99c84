package postgres_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
	"github.com/switchboard-mcp/switchboard/indexer/internal/store/postgres"
	"github.com/switchboard-mcp/switchboard/indexer/internal/storetest"
)

// BenchmarkBuildScope10k builds a scope of 10,000 new tools per iteration.
func BenchmarkBuildScope10k(b *testing.B) {
	st := env.OpenStore(b)
	// Every iteration stores 10,000 documents no earlier one stored.
	var sets [][]store.Tool
	for i := range 20 {
		sets = append(sets, storetest.SyntheticTools(10_000, uint64(1000+i)))
	}
	i := 0
	for b.Loop() {
		if i == len(sets) {
			b.Fatal("raise the number of prepared tool sets")
		}
		tools := sets[i]
		if _, built, err := st.BuildScope(b.Context(), fmt.Sprintf("bench-%d", i), 1, tools); err != nil || !built {
			b.Fatalf("build: %v (built %v)", err, built)
		}
		i++
	}
}

// BenchmarkSearch100k searches 1,000 principals' scopes (200 tools each,
// drawn from 100,000 documents) with natural-language queries and reports
// latency percentiles. Each scope is searched from memory after its
// first search.
func BenchmarkSearch100k(b *testing.B) {
	const (
		documents  = 100_000
		principals = 1000
		viewSize   = 200
	)
	ctx := b.Context()
	// Every principal's scope fits the cache: the benchmark is of searches
	// from memory, not of the default bounds.
	st, err := postgres.Open(ctx, env.NewDatabase(b), postgres.Options{CachedDocuments: documents, CachedMemberships: principals * viewSize})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	start := time.Now()
	all := storetest.SyntheticTools(documents, 1)
	if _, _, err := st.BuildScope(ctx, "universe", 1, all); err != nil {
		b.Fatal(err)
	}
	b.Logf("stored %d documents in %s", documents, time.Since(start).Round(time.Millisecond))
	r := rand.New(rand.NewPCG(2, 2))
	scopes := make([]store.Scope, principals)
	start = time.Now()
	for p := range principals {
		view := make([]store.Tool, viewSize)
		for j := range view {
			view[j] = all[r.IntN(documents)]
		}
		sc, _, err := st.BuildScope(ctx, fmt.Sprintf("principal-%d", p), 1, view)
		if err != nil {
			b.Fatal(err)
		}
		scopes[p] = sc
	}
	b.Logf("built %d principal scopes in %s", principals, time.Since(start).Round(time.Millisecond))
	if _, err := st.Pool().Exec(ctx, `DELETE FROM scopes WHERE tools_digest = $1`, postgres.ScopeKey("universe")); err != nil {
		b.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, `VACUUM ANALYZE`); err != nil {
		b.Fatal(err)
	}

	var latencies []time.Duration
	for b.Loop() {
		sc := scopes[r.IntN(principals)]
		t0 := time.Now()
		hits, err := st.Search(ctx, sc, store.Query{Text: storetest.SyntheticQuery(r), Limit: 8}, store.DefaultRanking)
		if err != nil {
			b.Fatal(err)
		}
		latencies = append(latencies, time.Since(t0))
		if len(hits) == 0 {
			b.Fatal("no hits")
		}
	}
	slices.Sort(latencies)
	b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "p99-ms")
}
