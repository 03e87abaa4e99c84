package app_test

import (
	"math"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/switchboard-mcp/switchboard/services/config"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

// ListRateLimitBuckets: an operator sees what find_tool's limit and an
// aggregator's AcquireRateTokens took, through any replica, with the
// configured rate and burst of the limits this indexer knows; pages and
// the limit filter hold; any other caller is refused in the service's
// one way (OPERATOR_ONLY), and bad requests are INVALID_ARGUMENT.
func TestListRateLimitBuckets(t *testing.T) {
	db := env.NewDatabase(t)
	limits := config.RateLimits{Limits: []config.RateLimit{{Name: "searches", Per: config.RatePerPrincipal, Rate: "1/h", Burst: 3}}}
	a := startLimited(t, db, limits)
	b := a.replica(t, db)
	a.agg.SetTools(tools("sales_summary", "cost_breakdown"))
	a.waitServing(t)
	b.waitServing(t)
	// Two searches of alice's take a token each (a lease of one: burst/10).
	for range 2 {
		if _, err := a.search(t, "alice", "sales", 0); err != nil {
			t.Fatal(err)
		}
	}
	// A bucket of a limit this indexer's configuration does not have.
	if _, err := a.as(t, aggregatorToken).AcquireRateTokens(t.Context(), &indexerv1.AcquireRateTokensRequest{Keys: []*indexerv1.RateTokenRequest{
		{Key: "calls|tool|a|b", RatePerSecond: 1.0 / 3600, Burst: 10, Tokens: 4}}}); err != nil {
		t.Fatal(err)
	}

	op := b.as(t, operatorToken)
	resp, err := op.ListRateLimitBuckets(t.Context(), &indexerv1.ListRateLimitBucketsRequest{})
	if err != nil || len(resp.GetBuckets()) != 2 || resp.GetNextPageToken() != "" || resp.GetReadAt() == nil {
		t.Fatalf("every bucket: %v, %v; want two, no next page, a read time", resp, err)
	}
	calls, searches := resp.GetBuckets()[0], resp.GetBuckets()[1]
	if calls.GetKey() != "calls|tool|a|b" || calls.GetLimit() != "calls" || calls.GetPer() != "tool" || calls.GetValue() != "a|b" ||
		calls.GetLastGranted() != 4 || math.Abs(calls.GetTokens()-6) > 0.01 || calls.GetConfigured() || calls.GetTokensNow() != 0 {
		t.Fatalf("the aggregator's bucket: %v; want 6 left, unconfigured here", calls)
	}
	if searches.GetKey() != "searches|principal|alice" || searches.GetValue() != "alice" || searches.GetLastGranted() != 1 ||
		math.Abs(searches.GetTokens()-1) > 0.01 || !searches.GetConfigured() || searches.GetBurst() != 3 ||
		math.Abs(searches.GetRatePerSecond()-1.0/3600) > 1e-9 || math.Abs(searches.GetTokensNow()-1) > 0.01 ||
		!searches.GetFullAt().AsTime().After(searches.GetUpdatedAt().AsTime()) {
		t.Fatalf("alice's search bucket: %v; want 1 of 3 left, configured 1/h", searches)
	}

	// Pages of one, and the limit filter.
	first, err := op.ListRateLimitBuckets(t.Context(), &indexerv1.ListRateLimitBucketsRequest{PageSize: 1})
	if err != nil || len(first.GetBuckets()) != 1 || first.GetNextPageToken() == "" {
		t.Fatalf("first page: %v, %v", first, err)
	}
	second, err := op.ListRateLimitBuckets(t.Context(), &indexerv1.ListRateLimitBucketsRequest{PageSize: 1, PageToken: first.GetNextPageToken()})
	if err != nil || len(second.GetBuckets()) != 1 || second.GetBuckets()[0].GetKey() != "searches|principal|alice" || second.GetNextPageToken() != "" {
		t.Fatalf("second page: %v, %v", second, err)
	}
	only, err := op.ListRateLimitBuckets(t.Context(), &indexerv1.ListRateLimitBucketsRequest{Limit: "searches"})
	if err != nil || len(only.GetBuckets()) != 1 || only.GetBuckets()[0].GetLimit() != "searches" {
		t.Fatalf("limit searches: %v, %v", only, err)
	}

	for _, bad := range []*indexerv1.ListRateLimitBucketsRequest{
		{PageSize: 1001},
		{Limit: "a|b"},
		{PageToken: "not base64!"},
	} {
		_, err := op.ListRateLimitBuckets(t.Context(), bad)
		wantReason(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	}
	// The gateway's credential may call every indexer RPC by its allow
	// list, but is no operator's.
	_, err = a.as(t, gatewayToken).ListRateLimitBuckets(t.Context(), &indexerv1.ListRateLimitBucketsRequest{})
	wantReason(t, err, codes.PermissionDenied, commonv1.ErrorReason_ERROR_REASON_OPERATOR_ONLY)
	// The aggregators' credential is not allowed the method at all.
	_, err = a.as(t, aggregatorToken).ListRateLimitBuckets(t.Context(), &indexerv1.ListRateLimitBucketsRequest{})
	wantReason(t, err, codes.PermissionDenied, commonv1.ErrorReason_ERROR_REASON_METHOD_NOT_ALLOWED)
}
