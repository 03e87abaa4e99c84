package ratelimit

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

// IndexerBuckets takes tokens through the indexer's AcquireRateTokens:
// the Acquirer of every service but the indexer, which holds the
// buckets (the aggregator's requests, the gateway's refusals).
type IndexerBuckets struct {
	Client indexerv1.IndexerServiceClient
}

// Acquire implements Acquirer.
func (b IndexerBuckets) Acquire(ctx context.Context, reqs []TokenRequest) ([]Grant, error) {
	keys := make([]*indexerv1.RateTokenRequest, len(reqs))
	for i, r := range reqs {
		keys[i] = &indexerv1.RateTokenRequest{Key: r.Key, RatePerSecond: r.Rate, Burst: uint32(r.Burst), Tokens: uint32(r.Tokens)}
	}
	resp, err := b.Client.AcquireRateTokens(ctx, &indexerv1.AcquireRateTokensRequest{Keys: keys})
	if status.Code(err) == codes.InvalidArgument {
		return nil, fmt.Errorf("%w: %s", ErrRefusedRequest, status.Convert(err).Message())
	}
	if err != nil {
		return nil, err
	}
	grants := make([]Grant, len(resp.GetGrants()))
	for i, g := range resp.GetGrants() {
		grants[i] = Grant{Granted: int(g.GetGranted()), RetryAfter: time.Duration(g.GetRetryAfterMs()) * time.Millisecond}
	}
	return grants, nil
}
