package app_test

import (
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// indexer.scopeCache reaches the store: with room for three memberships,
// alice's scope (two tools) and bob's (two others) do not fit together,
// so searching them in turn reads each from the database again, and the
// metrics say so.
func TestScopeCacheBoundsFromConfiguration(t *testing.T) {
	h := start(t, env.NewDatabase(t), func(c *config.Config) { c.Indexer.ScopeCache.Memberships = 3 })
	h.agg.SetTools(tools("alpha_sales", "alpha_costs", "beta_sales", "beta_costs"))
	h.agg.SetView("alice", []string{"alpha_sales", "alpha_costs"})
	h.agg.SetView("bob", []string{"beta_sales", "beta_costs"})
	h.waitServing(t)
	for _, who := range []string{"alice", "bob", "alice"} {
		if resp, err := h.search(t, who, "sales", 0); err != nil || len(resp.GetHits()) == 0 || resp.GetScopeSize() != 2 {
			t.Fatalf("%s's search: %v, %v", who, resp, err)
		}
	}
	_, metrics := h.get(t, "/metrics")
	for _, want := range []string{
		"switchboard_indexer_scope_reads_total 3", "switchboard_indexer_scope_evictions_total 2",
		"switchboard_indexer_scope_cache_scopes 1", "switchboard_indexer_scope_cache_memberships 2", "switchboard_indexer_scope_cache_documents 2",
	} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
