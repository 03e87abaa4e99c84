package app

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/lifecycle"
)

// startAudit starts the aggregator's audit trail: the configured sink,
// and with audit.database.enabled the indexer's table, through
// aggregator.pinning.indexer (audit.IndexerSink).
func startAudit(env lifecycle.Env, reg prometheus.Registerer) (*audit.Writer, error) {
	return env.StartAudit(reg)
}
