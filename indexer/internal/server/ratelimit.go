package server

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/switchboard-mcp/switchboard/services/config"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/ratelimit"
	"github.com/switchboard-mcp/switchboard/services/svcauth"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// Bounds of one AcquireRateTokens (indexer.proto).
const (
	maxRateKeysPerRequest = 64
	maxRateKeyBytes       = 512
)

// AcquireRateTokens takes tokens from the shared rate-limit buckets for
// an aggregator's requests and a gateway's refusals.
func (s *Server) AcquireRateTokens(ctx context.Context, req *indexerv1.AcquireRateTokensRequest) (*indexerv1.AcquireRateTokensResponse, error) {
	err := s.checkReady()
	var reqs []ratelimit.TokenRequest
	if err == nil {
		reqs, err = validRateTokenRequests(req.GetKeys())
	}
	var grants []ratelimit.Grant
	if err == nil {
		grants, err = s.Store.TakeRateTokens(ctx, reqs)
	}
	if err != nil {
		return nil, s.toStatus(ctx, "AcquireRateTokens", err)
	}
	resp := &indexerv1.AcquireRateTokensResponse{Grants: make([]*indexerv1.RateTokenGrant, len(grants))}
	for i, g := range grants {
		resp.Grants[i] = &indexerv1.RateTokenGrant{Granted: uint32(g.Granted), RetryAfterMs: uint32(min(math.MaxUint32, g.RetryAfter.Milliseconds()))}
		if g.Granted == 0 && resp.Grants[i].RetryAfterMs == 0 {
			resp.Grants[i].RetryAfterMs = 1
		}
	}
	return resp, nil
}

func validRateTokenRequests(keys []*indexerv1.RateTokenRequest) ([]ratelimit.TokenRequest, error) {
	if len(keys) == 0 || len(keys) > maxRateKeysPerRequest {
		return nil, invalidArgument(fmt.Sprintf("keys: want 1 to %d", maxRateKeysPerRequest))
	}
	seen := make(map[string]bool, len(keys))
	out := make([]ratelimit.TokenRequest, len(keys))
	for i, k := range keys {
		key, rate, burst, n := k.GetKey(), k.GetRatePerSecond(), k.GetBurst(), k.GetTokens()
		switch {
		case key == "" || len(key) > maxRateKeyBytes || strings.ContainsRune(key, 0):
			return nil, invalidArgument(fmt.Sprintf("keys[%d].key: want 1 to %d bytes without NUL", i, maxRateKeyBytes))
		case seen[key]:
			return nil, invalidArgument(fmt.Sprintf("keys[%d].key is named twice", i))
		case !(rate >= config.MinRateLimitRate && rate <= config.MaxRateLimitRate):
			// A slower rate would keep a bucket's row, which collection
			// deletes once it is full, for years.
			return nil, invalidArgument(fmt.Sprintf("keys[%d].rate_per_second: want 1 per hour to %d per second", i, config.MaxRateLimitRate))
		case burst < 1 || burst > config.MaxRateLimitBurst:
			return nil, invalidArgument(fmt.Sprintf("keys[%d].burst: want 1 to %d", i, config.MaxRateLimitBurst))
		case n < 1 || n > burst:
			return nil, invalidArgument(fmt.Sprintf("keys[%d].tokens: want 1 to burst", i))
		}
		seen[key] = true
		out[i] = ratelimit.TokenRequest{Key: key, Rate: rate, Burst: int(burst), Tokens: int(n)}
	}
	return out, nil
}

// StoreBuckets takes the indexer's own tokens (find_tool's) from the
// database directly: the indexer is where the buckets are.
type StoreBuckets struct{ Store store.RateBuckets }

// Acquire implements ratelimit.Acquirer.
func (b StoreBuckets) Acquire(ctx context.Context, reqs []ratelimit.TokenRequest) ([]ratelimit.Grant, error) {
	return b.Store.TakeRateTokens(ctx, reqs)
}

// operatorLooking reports whether a search is an operator looking at what
// a principal would find (an operator credential's explained search: the
// console's search playground), not the principal searching. Such a
// search is charged to nobody's find_tool limit: it is not the
// principal's call, and its audit event names the operator's credential
// (audit.Event.Caller). Only the explained ones: explain is what no
// find_tool asks and what mayExplain refuses to every caller but an
// operator, so it marks the operator's look. A plain search is what
// find_tool runs, and nothing tells an operator credential's from a
// principal's; it is charged like any, so that a credential marked
// operator by mistake (a gateway's) cannot lift every user's limit.
func operatorLooking(ctx context.Context, req *indexerv1.SearchRequest) bool {
	if !req.GetExplain() {
		return false
	}
	caller, _ := svcauth.CallerFrom(ctx)
	return caller.Operator
}

// limitSearch takes find_tool's tokens (a Search is what find_tool runs);
// a refused one's from the limits per principal only
// (ratelimit.Request.Refused).
func (s *Server) limitSearch(ctx context.Context, p *commonv1.Principal, server string, refused bool) error {
	if s.Limiter == nil {
		return nil
	}
	return s.Limiter.Allow(ctx, ratelimit.Request{Method: config.RateMethodFindTool, Subject: p.GetSubject(), Groups: p.GetGroups(),
		Server: server, Refused: refused})
}
