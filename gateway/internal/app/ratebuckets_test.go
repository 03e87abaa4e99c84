package app

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/switchboard-mcp/switchboard/gateway/internal/console"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

// bucketPages answers ListRateLimitBuckets with pages, then empty pages
// that still name a next one.
type bucketPages struct {
	indexerv1.IndexerServiceClient
	pages [][]*indexerv1.RateLimitBucket
	calls int
	asked []*indexerv1.ListRateLimitBucketsRequest
}

func (b *bucketPages) ListRateLimitBuckets(_ context.Context, req *indexerv1.ListRateLimitBucketsRequest, _ ...grpc.CallOption) (*indexerv1.ListRateLimitBucketsResponse, error) {
	b.calls++
	b.asked = append(b.asked, req)
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
	got, next, err := indexerRateBuckets{client: src}.RateLimitBuckets(ctx, console.BucketQuery{Size: 500})
	if err != nil {
		t.Fatalf("RateLimitBuckets: %v (after %d calls)", err, src.calls)
	}
	if src.calls != 3 || len(got) != 2 || next != "" {
		t.Fatalf("%d calls, %d buckets: want 3 calls (the third empty), 2 buckets", src.calls, len(got))
	}
	if !got[0].Configured || got[0].Tokens != 2 || got[1].Configured || got[1].Tokens != 4 {
		t.Fatalf("buckets %+v", got)
	}
}

// A page as large as asked for, with more after it, names the next ones;
// the limit and the token asked for reach the indexer.
func TestRateLimitBucketsNamesTheNextPage(t *testing.T) {
	src := &bucketPages{pages: [][]*indexerv1.RateLimitBucket{{{Key: "a|principal|x"}, {Key: "a|principal|y"}}}}
	got, next, err := indexerRateBuckets{client: src}.RateLimitBuckets(t.Context(), console.BucketQuery{Limit: "a", After: "tok", Size: 2})
	if err != nil || len(got) != 2 || next != "more" {
		t.Fatalf("RateLimitBuckets = %d buckets, next %q, %v; want 2, \"more\"", len(got), next, err)
	}
	if r := src.asked[0]; r.GetLimit() != "a" || r.GetPageToken() != "tok" || r.GetPageSize() != 2 {
		t.Fatalf("asked %v", r)
	}
}
