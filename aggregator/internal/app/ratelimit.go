package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/lifecycle"
	"github.com/switchboard-mcp/switchboard/services/ratelimit"
	"github.com/switchboard-mcp/switchboard/services/rpc"
)

// rateLimiter makes the limiter of the rateLimits section, taking its
// tokens from the indexer at aggregator.indexer (or pinning.indexer), and
// a func that closes its connection. Without an indexer configured (no
// limit needs one: config.ValidateRateLimits) a reload that adds limits
// finds them unavailable, decided by rateLimits.onUnavailable, until a
// restart with aggregator.indexer.
func rateLimiter(env lifecycle.Env, reg prometheus.Registerer) (*ratelimit.Limiter, func(), error) {
	set, err := ratelimit.Compile(env.Config.RateLimits)
	if err != nil {
		return nil, nil, err
	}
	metrics := ratelimit.NewMetrics(reg, "aggregator")
	ep := env.Config.Aggregator.IndexerEndpoint()
	if ep.Address == "" {
		return ratelimit.New(set, noIndexer{}, env.Log, metrics), func() {}, nil
	}
	// As for pinning: the indexer is dialled by its own name.
	tls := env.Config.ServiceAuth.TLS
	tls.ServerName = ""
	conn, err := rpc.Dial(ep, tls, rpc.ClientKeepalive(env.Config.GRPC))
	if err != nil {
		return nil, nil, fmt.Errorf("aggregator.indexer: %w", err)
	}
	if !set.Empty() {
		env.Log.Info("rate limits", "limits", len(env.Config.RateLimits.Limits), "indexer", ep.Address)
	}
	acq := indexerBuckets{client: indexerv1.NewIndexerServiceClient(conn)}
	return ratelimit.New(set, acq, env.Log, metrics), func() { _ = conn.Close() }, nil
}

// indexerBuckets takes tokens through the indexer's AcquireRateTokens.
type indexerBuckets struct {
	client indexerv1.IndexerServiceClient
}

func (b indexerBuckets) Acquire(ctx context.Context, reqs []ratelimit.TokenRequest) ([]ratelimit.Grant, error) {
	keys := make([]*indexerv1.RateTokenRequest, len(reqs))
	for i, r := range reqs {
		keys[i] = &indexerv1.RateTokenRequest{Key: r.Key, RatePerSecond: r.Rate, Burst: uint32(r.Burst), Tokens: uint32(r.Tokens)}
	}
	resp, err := b.client.AcquireRateTokens(ctx, &indexerv1.AcquireRateTokensRequest{Keys: keys})
	if err != nil {
		return nil, err
	}
	grants := make([]ratelimit.Grant, len(resp.GetGrants()))
	for i, g := range resp.GetGrants() {
		grants[i] = ratelimit.Grant{Granted: int(g.GetGranted()), RetryAfter: time.Duration(g.GetRetryAfterMs()) * time.Millisecond}
	}
	return grants, nil
}

// noIndexer is the acquirer of an aggregator started without an indexer.
type noIndexer struct{}

func (noIndexer) Acquire(context.Context, []ratelimit.TokenRequest) ([]ratelimit.Grant, error) {
	return nil, errors.New("no aggregator.indexer at start: restart to take rate-limit tokens")
}
