package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
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
	return ratelimit.New(set, indexerBuckets{client: client}, env.Log, metrics), nil
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
	if status.Code(err) == codes.InvalidArgument {
		return nil, fmt.Errorf("%w: %s", ratelimit.ErrRefusedRequest, status.Convert(err).Message())
	}
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
