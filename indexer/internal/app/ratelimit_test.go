package app_test

import (
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	"github.com/switchboard-mcp/switchboard/services/config"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

// find_tool's limit holds across two indexer replicas on one database: a
// principal's searches through either take from one bucket, and past
// its burst each is RESOURCE_EXHAUSTED with ERROR_REASON_RATE_LIMITED and
// a retry-after; another principal is not held back.
func TestSearchRateLimitedAcrossReplicas(t *testing.T) {
	db := env.NewDatabase(t)
	limits := config.RateLimits{Limits: []config.RateLimit{{Name: "searches", Per: config.RatePerPrincipal, Rate: "1/h", Burst: 3}}}
	a := startLimited(t, db, limits)
	b := a.replica(t, db)
	a.agg.SetTools(tools("sales_summary", "cost_breakdown"))
	a.waitServing(t)
	b.waitServing(t)
	replicas := []*harness{a, b}
	for i := range 3 {
		if _, err := replicas[i%2].search(t, "alice", "sales", 0); err != nil {
			t.Fatalf("search %d within the burst: %v", i, err)
		}
	}
	for i := range 2 {
		_, err := replicas[i%2].search(t, "alice", "sales", 0)
		wantReason(t, err, codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_RATE_LIMITED)
		if _, meta := apierr.Info(err); meta["retryAfterSeconds"] == "" || meta["limit"] != "searches" {
			t.Fatalf("refusal metadata %v", meta)
		}
	}
	if _, err := b.search(t, "bob", "sales", 0); err != nil {
		t.Fatalf("bob: %v", err)
	}
}

// AcquireRateTokens: the aggregators' credential takes tokens from the
// same buckets through any replica; malformed requests take nothing.
func TestAcquireRateTokens(t *testing.T) {
	db := env.NewDatabase(t)
	a := start(t, db)
	b := a.replica(t, db)
	a.waitServing(t)
	b.waitServing(t)
	aggA, aggB := a.as(t, aggregatorToken), b.as(t, aggregatorToken)
	key := func(tokens uint32) *indexerv1.AcquireRateTokensRequest {
		return &indexerv1.AcquireRateTokensRequest{Keys: []*indexerv1.RateTokenRequest{{Key: "l|principal|alice", RatePerSecond: 1.0 / 3600, Burst: 5, Tokens: tokens}}}
	}
	for _, bad := range []*indexerv1.AcquireRateTokensRequest{
		{},
		key(6), // more than the burst
		{Keys: []*indexerv1.RateTokenRequest{{Key: "k", RatePerSecond: 0, Burst: 5, Tokens: 1}}},
		// Slower than one an hour: the bucket's row would outlive years.
		{Keys: []*indexerv1.RateTokenRequest{{Key: "k", RatePerSecond: 1e-9, Burst: 5, Tokens: 1}}},
		{Keys: []*indexerv1.RateTokenRequest{{Key: "k", RatePerSecond: 1e-300, Burst: 5, Tokens: 1}}},
		{Keys: []*indexerv1.RateTokenRequest{{Key: "k", RatePerSecond: 1, Burst: 5, Tokens: 1}, {Key: "k", RatePerSecond: 1, Burst: 5, Tokens: 1}}},
	} {
		_, err := aggA.AcquireRateTokens(t.Context(), bad)
		wantReason(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	}
	got := func(c indexerv1.IndexerServiceClient, tokens uint32) *indexerv1.RateTokenGrant {
		t.Helper()
		resp, err := c.AcquireRateTokens(t.Context(), key(tokens))
		if err != nil || len(resp.GetGrants()) != 1 {
			t.Fatalf("acquire: %v %v", resp, err)
		}
		return resp.GetGrants()[0]
	}
	if g := got(aggA, 4); g.GetGranted() != 4 {
		t.Fatalf("first grant %d of 4 (the invalid requests took nothing)", g.GetGranted())
	}
	if g := got(aggB, 4); g.GetGranted() != 1 {
		t.Fatalf("through the other replica: %d, want the 1 left", g.GetGranted())
	}
	if g := got(aggA, 1); g.GetGranted() != 0 || g.GetRetryAfterMs() < 3_500_000 {
		t.Fatalf("empty bucket: %v, want nothing and about an hour's wait", g)
	}
}

// TestRateTokensAreTheAggregatorsToTake: a credential that may not assert
// principals, allowed AcquireRateTokens all the same, takes no token: the
// keys name principals, and taking one's tokens is acting for it.
func TestRateTokensAreTheAggregatorsToTake(t *testing.T) {
	const internalToken = "internal-test-token"
	h := start(t, env.NewDatabase(t), func(c *config.Config) {
		c.ServiceAuth.Credentials = append(c.ServiceAuth.Credentials, config.ServiceCredential{Name: "reporting", Token: internalToken,
			Subject: "reporting", Allow: []string{"switchboard.indexer.v1.ClusterStateService/*"}})
	})
	h.waitServing(t)
	drain := &indexerv1.AcquireRateTokensRequest{Keys: []*indexerv1.RateTokenRequest{{Key: "searches|principal|alice", RatePerSecond: 1, Burst: 5, Tokens: 5}}}
	_, err := h.as(t, internalToken).AcquireRateTokens(t.Context(), drain)
	wantReason(t, err, codes.PermissionDenied, commonv1.ErrorReason_ERROR_REASON_PRINCIPAL_NOT_ALLOWED)
	resp, err := h.as(t, aggregatorToken).AcquireRateTokens(t.Context(), drain)
	if err != nil || resp.GetGrants()[0].GetGranted() != 5 {
		t.Fatalf("the aggregator's take of alice's bucket: %v %v, want all 5 still there", resp, err)
	}
}
