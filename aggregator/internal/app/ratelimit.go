package app

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/services/lifecycle"
	"github.com/switchboard-mcp/switchboard/services/ratelimit"
)

// rateLimiter makes the limiter of the rateLimits section, taking its
// tokens from the indexer at aggregator.indexer (or pinning.indexer).
// Without an indexer configured (no
// limit needs one: config.ValidateRateLimits) a reload that adds limits
// finds them unavailable, decided by rateLimits.onUnavailable, until a
// restart with aggregator.indexer.
func rateLimiter(env lifecycle.Env, reg prometheus.Registerer, idx *indexers) (*ratelimit.Limiter, error) {
	set, err := ratelimit.Compile(env.Config.RateLimits)
	if err != nil {
		return nil, err
	}
	metrics := ratelimit.NewMetrics(reg, "aggregator")
	ep := env.Config.Aggregator.IndexerEndpoint()
	if ep.Address == "" {
		return ratelimit.New(set, noIndexer{}, env.Log, metrics), nil
	}
	client, err := idx.client(keyIndexer, "aggregator.indexer")
	if err != nil {
		return nil, err
	}
	if !set.Empty() {
		env.Log.Info("rate limits", "limits", len(env.Config.RateLimits.Limits), "indexer", ep.Address)
	}
	return ratelimit.New(set, ratelimit.IndexerBuckets{Client: client}, env.Log, metrics), nil
}

// noIndexer is the acquirer of an aggregator started without an indexer.
type noIndexer struct{}

func (noIndexer) Acquire(context.Context, []ratelimit.TokenRequest) ([]ratelimit.Grant, error) {
	return nil, errors.New("no aggregator.indexer at start: restart to take rate-limit tokens")
}
