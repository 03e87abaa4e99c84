package app

import (
	"context"

	"github.com/switchboard-mcp/switchboard/gateway/internal/console"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

// indexerRateBuckets reads the console's rate-limit state from the
// indexer's ListRateLimitBuckets (operator credentials: the console's).
type indexerRateBuckets struct {
	client indexerv1.IndexerServiceClient
}

// maxBucketPage is the RPC's largest page.
const maxBucketPage = 1000

// RateLimitBuckets implements console.RateLimitState: q.Size buckets in
// key order after q.After, of q.Limit's if named, and the token of the
// next ones if there are more. A bucket of a limit the indexer's
// configuration knows holds tokens_now (refilled to the indexer's read
// time); any other the tokens left at its last take, and is marked not
// Configured (its rate and burst are not known).
func (b indexerRateBuckets) RateLimitBuckets(ctx context.Context, q console.BucketQuery) ([]console.RateLimitBucket, string, error) {
	var out []console.RateLimitBucket
	token := q.After
	for len(out) < q.Size {
		resp, err := b.client.ListRateLimitBuckets(ctx, &indexerv1.ListRateLimitBucketsRequest{
			Limit: q.Limit, PageSize: uint32(min(q.Size-len(out), maxBucketPage)), PageToken: token,
		})
		if err != nil {
			return nil, "", err
		}
		for _, bk := range resp.GetBuckets() {
			row := console.RateLimitBucket{Key: bk.GetKey(), Tokens: bk.GetTokens(), RatePerSecond: bk.GetRatePerSecond(),
				Burst: bk.GetBurst(), Updated: bk.GetUpdatedAt().AsTime(), Configured: bk.GetConfigured()}
			if bk.GetConfigured() {
				row.Tokens = bk.GetTokensNow()
			}
			out = append(out, row)
		}
		// An empty page ends the listing even if it names a next one: asking
		// again could only loop until the deadline.
		if token = resp.GetNextPageToken(); token == "" || len(resp.GetBuckets()) == 0 {
			return out, "", nil
		}
	}
	return out, token, nil
}
