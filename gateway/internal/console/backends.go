package console

import (
	"net/http"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

// backendRow is one backend of the backends page.
type backendRow struct {
	*aggregatorv1.Backend
	Era, Health string
	// Down marks a backend whose items are out of the catalog.
	Down bool
}

type backendsData struct {
	Backends       []backendRow
	CatalogVersion uint64
	// Conflicts are the catalog's conflicts between backends.
	Conflicts []*aggregatorv1.CatalogConflict
	// Index is the indexer's statistics; nil when not available, with
	// IndexNote saying why.
	Index     *indexerv1.StatsResponse
	IndexNote string
}

var healthNames = map[aggregatorv1.BackendHealth]string{
	aggregatorv1.BackendHealth_BACKEND_HEALTH_UNKNOWN:   "unknown",
	aggregatorv1.BackendHealth_BACKEND_HEALTH_HEALTHY:   "healthy",
	aggregatorv1.BackendHealth_BACKEND_HEALTH_DEGRADED:  "degraded",
	aggregatorv1.BackendHealth_BACKEND_HEALTH_UNHEALTHY: "unhealthy",
}

// eraOf names the protocol era of a negotiated MCP version.
func eraOf(version string) string {
	switch version {
	case "":
		return "not connected"
	case mcpspec.Modern:
		return "Modern"
	case mcpspec.Legacy:
		return "Legacy"
	}
	return "Legacy (" + version + ")"
}

// backendsPage lists every backend with its health (ListBackends as an
// operator: URLs and full error texts).
func (c *Console) backendsPage(w http.ResponseWriter, r *http.Request, s session) {
	ctx, cancel := rpcContext(r)
	defer cancel()
	p := page{Title: "Backends", Active: "backends", Session: &s}
	resp, err := c.deps.Aggregator.ListBackends(ctx, &aggregatorv1.ListBackendsRequest{})
	if err != nil {
		c.renderFailure(w, r, "backends", p, "ListBackends", err)
		return
	}
	d := backendsData{CatalogVersion: resp.GetCatalogVersion(), Conflicts: resp.GetConflicts()}
	for _, b := range resp.GetBackends() {
		d.Backends = append(d.Backends, backendRow{Backend: b, Era: eraOf(b.GetProtocolVersion()), Health: healthNames[b.GetHealth()],
			Down: b.GetHealth() == aggregatorv1.BackendHealth_BACKEND_HEALTH_UNHEALTHY})
	}
	if c.deps.Indexer == nil {
		d.IndexNote = "gateway.indexer is not configured."
	} else if st, err := c.deps.Indexer.Stats(ctx, &indexerv1.StatsRequest{}); err != nil {
		_, d.IndexNote, _ = rpcFailure("Stats", err)
	} else {
		d.Index = st
	}
	p.Data = d
	c.render(w, r, http.StatusOK, "backends", p)
}
