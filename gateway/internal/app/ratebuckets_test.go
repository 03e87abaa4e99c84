package app

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"

	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

// bucketPages answers ListRateLimitBuckets with pages, then empty pages
// that still name a next one.
type bucketPages struct {
	indexerv1.IndexerServiceClient
	pages [][]*indexerv1.RateLimitBucket
	calls int
}

func (b *bucketPages) ListRateLimitBuckets(context.Context, *indexerv1.ListRateLimitBucketsRequest, ...grpc.CallOption) (*indexerv1.ListRateLimitBucketsResponse, error) {
	b.calls++
	resp := &indexerv1.ListRateLimitBucketsResponse{NextPageToken: "more"}
	if b.calls <= len(b.pages) {
		resp.Buckets = b.pages[b.calls-1]
	}
	return resp, nil
}

func TestRateLimitBucketsStopsOnAnEmptyPage(t *testing.T) {
	src := &bucketPages{pages: [][]*indexerv1.RateLimitBucket{
		{{Key: "a|principal|x", Configured: true, TokensNow: 2, Tokens: 1, RatePerSecond: 1, Burst: 3}},
		{{Key: "gone|principal|y", Tokens: 4}},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := indexerRateBuckets{client: src}.RateLimitBuckets(ctx, 500)
	if err != nil {
		t.Fatalf("RateLimitBuckets: %v (after %d calls)", err, src.calls)
	}
	if src.calls != 3 || len(got) != 2 {
		t.Fatalf("%d calls, %d buckets: want 3 calls (the third empty), 2 buckets", src.calls, len(got))
	}
	if !got[0].Configured || got[0].Tokens != 2 || got[1].Configured || got[1].Tokens != 4 {
		t.Fatalf("buckets %+v", got)
	}
}
