package storetest_test

import (
	"context"
	"testing"

	"github.com/switchboard-mcp/switchboard/services/ratelimit"

	"github.com/switchboard-mcp/switchboard/indexer/internal/storetest"
)

// memoryTaker is ratelimit.MemoryBuckets (an Acquirer) as a RateTaker:
// every handle on one backing store is the same buckets.
type memoryTaker struct{ *ratelimit.MemoryBuckets }

func (m memoryTaker) TakeRateTokens(ctx context.Context, reqs []ratelimit.TokenRequest) ([]ratelimit.Grant, error) {
	return m.Acquire(ctx, reqs)
}

// The buckets a process keeps in memory (a single replica's, and the
// reference of ratelimit's own tests) take tokens as the shared store
// does.
func TestMemoryBucketsTakeAsTheStoreDoes(t *testing.T) {
	storetest.RunRateTakes(t, func(*testing.T) storetest.Open[storetest.RateTaker] {
		b := memoryTaker{&ratelimit.MemoryBuckets{}}
		return func(*testing.T) storetest.RateTaker { return b }
	})
}
