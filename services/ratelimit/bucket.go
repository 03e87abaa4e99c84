package ratelimit

import (
	"context"
	"math"
	"sync"
	"time"
)

// Take is the bucket arithmetic, the same the indexer's database runs: a
// bucket that held tokens at updated holds min(burst, tokens +
// rate*(now-updated)) at now; it grants as many whole tokens of want as
// that holds, and when none, the wait until one is there.
func Take(tokens float64, updated, now time.Time, rate float64, burst, want int) (left float64, granted int, retryAfter time.Duration) {
	elapsed := max(0, now.Sub(updated).Seconds())
	have := math.Min(float64(burst), tokens+rate*elapsed)
	granted = int(math.Min(float64(want), math.Floor(have)))
	left = have - float64(granted)
	if granted == 0 {
		retryAfter = time.Duration((1 - have) / rate * float64(time.Second))
	}
	return left, granted, retryAfter
}

// MemoryBuckets is an Acquirer that keeps the buckets in this process: a
// single replica's limits, and the reference the shared store is tested
// against.
type MemoryBuckets struct {
	Now func() time.Time

	mu      sync.Mutex
	buckets map[string]memoryBucket
}

type memoryBucket struct {
	tokens  float64
	updated time.Time
}

// Acquire implements Acquirer.
func (b *MemoryBuckets) Acquire(_ context.Context, reqs []TokenRequest) ([]Grant, error) {
	now := time.Now
	if b.Now != nil {
		now = b.Now
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buckets == nil {
		b.buckets = map[string]memoryBucket{}
	}
	grants := make([]Grant, len(reqs))
	t := now()
	for i, r := range reqs {
		bk, ok := b.buckets[r.Key]
		if !ok {
			bk = memoryBucket{tokens: float64(r.Burst), updated: t}
		}
		left, granted, wait := Take(bk.tokens, bk.updated, t, r.Rate, r.Burst, r.Tokens)
		b.buckets[r.Key] = memoryBucket{tokens: left, updated: t}
		grants[i] = Grant{Granted: granted, RetryAfter: wait}
	}
	return grants, nil
}
