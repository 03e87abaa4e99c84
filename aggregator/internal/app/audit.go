package app

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/services/audit"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/lifecycle"
	"github.com/switchboard-mcp/switchboard/services/rpc"
)

// startAudit starts the aggregator's audit trail: the configured sink,
// and with audit.database.enabled the indexer's table, reached at
// config.AggregatorAuditIndexer (aggregator.pinning.indexer) on a
// connection of its own; the func returned closes the trail, then that
// connection.
func startAudit(env lifecycle.Env, reg prometheus.Registerer) (*audit.Writer, func(), error) {
	if !env.Config.Audit.Database.Enabled {
		w, err := env.StartAudit(reg)
		return w, w.Close, err
	}
	// As for pinning: the indexer is dialled by its own name.
	tls := env.Config.ServiceAuth.TLS
	tls.ServerName = ""
	conn, err := rpc.Dial(env.Config.AggregatorAuditIndexer(), tls, rpc.ClientKeepalive(env.Config.GRPC))
	if err != nil {
		return nil, nil, fmt.Errorf("aggregator.pinning.indexer (audit.database): %w", err)
	}
	w, err := env.StartAudit(reg, audit.NewIndexerSink(indexerv1.NewIndexerServiceClient(conn)))
	if err != nil {
		_ = conn.Close()
		return nil, nil, err
	}
	return w, func() { w.Close(); _ = conn.Close() }, nil
}
