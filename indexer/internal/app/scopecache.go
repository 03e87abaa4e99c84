package app

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store/postgres"
)

// registerScopeCacheMetrics exposes the scope cache (indexer.scopeCache):
// what it holds against its bounds, and how often scopes are read from the
// database and evicted, which together show a cache too small for the
// scopes searched. Each is read from the cache when scraped.
func registerScopeCacheMetrics(reg prometheus.Registerer, stats func() postgres.CacheStats) {
	gauge := func(name, help string, value func(postgres.CacheStats) int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(value(stats())) })
	}
	counter := func(name, help string, value func(postgres.CacheStats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(value(stats())) })
	}
	reg.MustRegister(
		gauge("switchboard_indexer_scope_cache_scopes", "Principals' scopes held in memory for searching.",
			func(s postgres.CacheStats) int { return s.Scopes }),
		gauge("switchboard_indexer_scope_cache_documents", "Distinct tool documents of the scopes held (bound: indexer.scopeCache.documents).",
			func(s postgres.CacheStats) int { return s.Documents }),
		gauge("switchboard_indexer_scope_cache_memberships", "The sum of the sizes of the scopes held (bound: indexer.scopeCache.memberships).",
			func(s postgres.CacheStats) int { return s.Memberships }),
		counter("switchboard_indexer_scope_reads_total", "Scopes read from the database into memory: a scope's first search on this replica, or one evicted before.",
			func(s postgres.CacheStats) int64 { return s.Reads }),
		counter("switchboard_indexer_scope_evictions_total", "Scopes dropped from memory for the scope cache's bounds.",
			func(s postgres.CacheStats) int64 { return s.Evictions }),
	)
}
