package app

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/pinning"
	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/lifecycle"
)

// pinningGuard makes the guard of aggregator.pinning (which
// config.ValidateAggregator checked), calling the indexer unless the mode
// is off.
func pinningGuard(env lifecycle.Env, reg prometheus.Registerer, idx *indexers) (*pinning.Guard, error) {
	p := env.Config.Aggregator.Pinning
	mode := p.EffectiveMode()
	if mode == config.PinningOff {
		return nil, nil
	}
	client, err := idx.client(keyPinning, "aggregator.pinning.indexer")
	if err != nil {
		return nil, err
	}
	env.Log.Info("pinned tool definitions", "mode", mode, "review_new_tools", p.ReviewNewTools(), "indexer", p.Indexer.Address)
	g := pinning.New(mode, client, env.Log, pinning.NewMetrics(reg))
	g.ReviewNewTools(p.ReviewNewTools())
	return g, nil
}
