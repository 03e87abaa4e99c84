package app

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/pinning"
	"github.com/switchboard-mcp/switchboard/services/config"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/lifecycle"
	"github.com/switchboard-mcp/switchboard/services/rpc"
)

// pinningGuard makes the guard of aggregator.pinning, with its connection
// to the indexer unless the mode is off, and a func that closes it.
func pinningGuard(env lifecycle.Env, reg prometheus.Registerer) (*pinning.Guard, func(), error) {
	p := env.Config.Aggregator.Pinning
	if err := p.Validate(); err != nil {
		return nil, nil, err
	}
	mode := p.EffectiveMode()
	if mode == config.PinningOff {
		return nil, func() {}, nil
	}
	// serviceAuth.tls.serverName is the name the aggregator checks in its
	// peers' certificates (it dials them by address); the indexer is
	// dialled by its own name.
	tls := env.Config.ServiceAuth.TLS
	tls.ServerName = ""
	conn, err := rpc.Dial(p.Indexer, tls, rpc.ClientKeepalive(env.Config.GRPC))
	if err != nil {
		return nil, nil, fmt.Errorf("aggregator.pinning.indexer: %w", err)
	}
	env.Log.Info("pinned tool definitions", "mode", mode, "indexer", p.Indexer.Address)
	return pinning.New(mode, indexerv1.NewIndexerServiceClient(conn), env.Log, pinning.NewMetrics(reg)), func() { _ = conn.Close() }, nil
}
