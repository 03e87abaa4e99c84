package app

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/lifecycle"
)

// startAudit starts the aggregator's audit trail: the configured sink,
// and with audit.database.enabled the indexer's table, reached at
// config.AggregatorAuditIndexer (aggregator.indexer, or else
// aggregator.pinning.indexer). Close the trail before idx.
func startAudit(env lifecycle.Env, reg prometheus.Registerer, idx *indexers) (*audit.Writer, error) {
	if !env.Config.Audit.Database.Enabled {
		return env.StartAudit(reg)
	}
	client, err := idx.client(keyIndexer, "aggregator.indexer (audit.database)")
	if err != nil {
		return nil, err
	}
	return env.StartAudit(reg, audit.NewIndexerSink(client))
}
