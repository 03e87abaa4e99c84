package postgres_test

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-mcp/switchboard/services/ratelimit"
)

// TestRateBucketArithmetic: a new key is a full bucket; grants are whole
// tokens up to what is asked; an empty bucket tells the wait; it refills
// at its rate up to its burst; the garbage collection drops full buckets
// only.
func TestRateBucketArithmetic(t *testing.T) {
	url := env.NewDatabase(t)
	st := env.Open(t, url)
	ctx := t.Context()
	take := func(key string, rate float64, burst, want int) ratelimit.Grant {
		t.Helper()
		g, err := st.TakeRateTokens(ctx, []ratelimit.TokenRequest{{Key: key, Rate: rate, Burst: burst, Tokens: want}})
		if err != nil || len(g) != 1 {
			t.Fatalf("take: %v %v", g, err)
		}
		return g[0]
	}
	// 1/h: nothing refills within the test.
	if g := take("slow", 1.0/3600, 5, 3); g.Granted != 3 {
		t.Fatalf("new bucket granted %d of 3", g.Granted)
	}
	if g := take("slow", 1.0/3600, 5, 3); g.Granted != 2 {
		t.Fatalf("second take granted %d, want the 2 left", g.Granted)
	}
	g := take("slow", 1.0/3600, 5, 1)
	if g.Granted != 0 || g.RetryAfter < 59*time.Minute || g.RetryAfter > time.Hour {
		t.Fatalf("empty bucket: %+v, want none and a wait of about an hour", g)
	}
	// Refill: 1000/s for the time between two takes, capped at burst.
	take("fast", 1000, 50, 50)
	start := time.Now()
	for time.Since(start) < 20*time.Millisecond {
	}
	if g := take("fast", 1000, 50, 50); g.Granted < 20 || g.Granted > 50 {
		t.Fatalf("after 20ms at 1000/s: %d, want 20 to 50", g.Granted)
	}
	// Several keys in one call, in the request's order.
	grants, err := st.TakeRateTokens(ctx, []ratelimit.TokenRequest{
		{Key: "z", Rate: 1, Burst: 4, Tokens: 4}, {Key: "a", Rate: 1, Burst: 2, Tokens: 1}, {Key: "slow", Rate: 1.0 / 3600, Burst: 5, Tokens: 1},
	})
	if err != nil || grants[0].Granted != 4 || grants[1].Granted != 1 || grants[2].Granted != 0 {
		t.Fatalf("batch: %+v %v", grants, err)
	}
	// Garbage collection: "a" and "z" are made full (their full_at ten
	// seconds back); "slow" is not full for an hour.
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = admin.Close(context.WithoutCancel(ctx)) }()
	if _, err := admin.Exec(ctx, `UPDATE rate_buckets SET full_at = full_at - interval '10 seconds' WHERE key IN ('a', 'z')`); err != nil {
		t.Fatal(err)
	}
	c, err := st.CollectGarbage(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	rows, _ := admin.Query(ctx, `SELECT key FROM rate_buckets ORDER BY key`)
	left, err = pgx.CollectRows(rows, pgx.RowTo[string])
	// "fast" is full 50ms after its last take, and may be gone too.
	if err != nil || c.RateBuckets < 2 || len(left) == 0 || left[len(left)-1] != "slow" || len(left) > 2 || (len(left) == 2 && left[0] != "fast") {
		t.Fatalf("after collection: collected %d, left %v (%v)", c.RateBuckets, left, err)
	}
}

// TestRateBucketsNeverOverAdmit: acquirers through two store handles (two
// indexer replicas) and many goroutines each, on the same keys in both
// orders, never get more tokens than burst + rate*elapsed, and lose none
// to their races: what was granted plus what is left is exactly what
// refilled between the bucket's first and last acquisition, on the
// database's clock.
//
// The second half is a conservation law, not a share of a wall-clock
// ceiling: a loaded machine may start the acquirers late or stall them,
// which changes how much was granted but not that every token refilled is
// either granted or still in the bucket. It holds while the bucket never
// reaches its burst (a full bucket discards its refill by design), so the
// bucket starts empty and its burst is many seconds of refill.
func TestRateBucketsNeverOverAdmit(t *testing.T) {
	url := env.NewDatabase(t)
	ctx := t.Context()
	handles := []interface {
		TakeRateTokens(context.Context, []ratelimit.TokenRequest) ([]ratelimit.Grant, error)
	}{env.Open(t, url), env.Open(t, url)}
	const rate, burst = 200.0, 2000 // full again only after 10 s without a take
	keys := []string{"k0", "k1"}
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = admin.Close(context.WithoutCancel(ctx)) }()
	type bucket struct {
		tokens    float64
		updatedAt time.Time
	}
	read := func(key string) bucket {
		t.Helper()
		var b bucket
		if err := admin.QueryRow(ctx, `SELECT tokens, updated_at FROM rate_buckets WHERE key = $1`, key).Scan(&b.tokens, &b.updatedAt); err != nil {
			t.Fatalf("read bucket %s: %v", key, err)
		}
		return b
	}
	// Each bucket is made by a take of its whole burst: it starts empty,
	// and refills from then on.
	start := time.Now()
	var first [2]bucket
	for k, key := range keys {
		g, err := handles[0].TakeRateTokens(ctx, []ratelimit.TokenRequest{{Key: key, Rate: rate, Burst: burst, Tokens: burst}})
		if err != nil || g[0].Granted != burst {
			t.Fatalf("empty bucket %s: %+v %v", key, g, err)
		}
		first[k] = read(key)
	}

	var granted [2]atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(1500 * time.Millisecond)
	for h := range handles {
		for w := range 8 {
			wg.Go(func() {
				reqs := []ratelimit.TokenRequest{{Key: keys[0], Rate: rate, Burst: burst, Tokens: 3}, {Key: keys[1], Rate: rate, Burst: burst, Tokens: 3}}
				if w%2 == 1 {
					reqs[0], reqs[1] = reqs[1], reqs[0]
				}
				for time.Now().Before(deadline) {
					gs, err := handles[h].TakeRateTokens(ctx, reqs)
					if err != nil {
						t.Error(err)
						return
					}
					for i, g := range gs {
						granted[reqs[i].Key[1]-'0'].Add(int64(g.Granted))
					}
				}
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	for k, key := range keys {
		got := float64(granted[k].Load())
		// Every take, the emptying one too, began after start and ended
		// before now: the wall clock bounds the database's window from
		// above, so this never flakes.
		if ceiling := rate * elapsed; got > ceiling {
			t.Fatalf("key %s: granted %.0f, more than rate*elapsed = %.0f from an empty bucket", key, got, ceiling)
		}
		last := read(key)
		window := last.updatedAt.Sub(first[k].updatedAt).Seconds()
		refilled := rate * window
		t.Logf("key %s: granted %.0f and %.3f left of %.3f refilled in %.3fs (%.2fs wall)", key, got, last.tokens, refilled, window, elapsed)
		if got == 0 {
			t.Fatalf("key %s: nothing granted in %.2fs", key, elapsed)
		}
		if math.Abs(got+last.tokens-refilled) > 1e-6*refilled+1e-6 {
			t.Fatalf("key %s: granted %.0f + left %.6f = %.6f, want the %.6f refilled: tokens were lost or made", key, got, last.tokens, got+last.tokens, refilled)
		}
	}
}
