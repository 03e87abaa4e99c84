package storetest

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/ratelimit"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// slowRate is one token an hour: nothing refills within a test, so what a
// bucket holds is exact.
const slowRate = 1.0 / 3600

func take(t *testing.T, st RateTaker, reqs ...ratelimit.TokenRequest) []ratelimit.Grant {
	t.Helper()
	grants, err := st.TakeRateTokens(t.Context(), reqs)
	if err != nil || len(grants) != len(reqs) {
		t.Fatalf("take %+v: %+v, %v; want one grant per request", reqs, grants, err)
	}
	return grants
}

// rateTakesGrantWholeTokens: a new key is a full bucket; a take grants as
// many whole tokens as the bucket holds, up to what it asks, and the
// bucket keeps the rest for the next take, through any handle; an empty
// bucket grants none and tells the wait for one; the grants of one call
// are in the order of its requests, and each key is a bucket of its own.
func rateTakesGrantWholeTokens(t *testing.T, open Open[RateTaker]) {
	one, two := open(t), open(t)
	if g := take(t, one, ratelimit.TokenRequest{Key: "a", Rate: slowRate, Burst: 5, Tokens: 3}); g[0].Granted != 3 || g[0].RetryAfter != 0 {
		t.Fatalf("a new bucket of 5, asked 3: %+v", g[0])
	}
	if g := take(t, two, ratelimit.TokenRequest{Key: "a", Rate: slowRate, Burst: 5, Tokens: 3}); g[0].Granted != 2 {
		t.Fatalf("asked 3 of the 2 left, through another handle: %+v, want the 2", g[0])
	}
	// Empty at one token an hour: the next whole token is an hour away.
	if g := take(t, one, ratelimit.TokenRequest{Key: "a", Rate: slowRate, Burst: 5, Tokens: 1}); g[0].Granted != 0 || g[0].RetryAfter < 59*time.Minute || g[0].RetryAfter > time.Hour {
		t.Fatalf("an empty bucket: %+v, want none and a wait of about an hour", g[0])
	}
	// One call, three buckets: a new one, the empty one, another new one.
	g := take(t, two,
		ratelimit.TokenRequest{Key: "z", Rate: slowRate, Burst: 4, Tokens: 4},
		ratelimit.TokenRequest{Key: "a", Rate: slowRate, Burst: 5, Tokens: 1},
		ratelimit.TokenRequest{Key: "b", Rate: slowRate, Burst: 2, Tokens: 1})
	if g[0].Granted != 4 || g[1].Granted != 0 || g[1].RetryAfter < 59*time.Minute || g[2].Granted != 1 {
		t.Fatalf("one call of three buckets: %+v, want 4, none, 1 in that order", g)
	}
	// Emptying z left b as it was: its one token is still there.
	if g := take(t, one, ratelimit.TokenRequest{Key: "b", Rate: slowRate, Burst: 2, Tokens: 2}); g[0].Granted != 1 {
		t.Fatalf("the other bucket: %+v, want its 1 left", g[0])
	}
	if g := take(t, one, ratelimit.TokenRequest{Key: "z", Rate: slowRate, Burst: 4, Tokens: 1}); g[0].Granted != 0 {
		t.Fatalf("the emptied bucket: %+v, want none", g[0])
	}
}

// rateTakesRefillUpToBurst: an emptied bucket refills at its rate, but
// never beyond its burst.
func rateTakesRefillUpToBurst(t *testing.T, open Open[RateTaker]) {
	st := open(t)
	// 100 a second: empty, then a whole token again within milliseconds.
	if g := take(t, st, ratelimit.TokenRequest{Key: "refill", Rate: 100, Burst: 2, Tokens: 2}); g[0].Granted != 2 {
		t.Fatalf("a new bucket of 2: %+v", g[0])
	}
	testkit.Eventually(t, "the emptied bucket to refill", pollDeadline, func() bool {
		return take(t, st, ratelimit.TokenRequest{Key: "refill", Rate: 100, Burst: 2, Tokens: 1})[0].Granted == 1
	})
	// 1000 a second for 50 ms is 50 tokens, of which a bucket of 3 holds 3.
	if g := take(t, st, ratelimit.TokenRequest{Key: "capped", Rate: 1000, Burst: 3, Tokens: 3}); g[0].Granted != 3 {
		t.Fatalf("a new bucket of 3: %+v", g[0])
	}
	emptied := time.Now()
	testkit.Eventually(t, "50 ms to pass", pollDeadline, func() bool { return time.Since(emptied) >= 50*time.Millisecond })
	if g := take(t, st, ratelimit.TokenRequest{Key: "capped", Rate: 1000, Burst: 3, Tokens: 10}); g[0].Granted != 3 {
		t.Fatalf("asked 10 of a bucket of 3 after 50 tokens' worth of refill: %+v, want 3", g[0])
	}
}

// rateTakesNeverOverAdmitAcrossHandles: concurrent takers through two
// handles (two replicas) of one bucket that does not refill get exactly
// its burst between them: never more, and none lost to their races.
func rateTakesNeverOverAdmitAcrossHandles(t *testing.T, open Open[RateTaker]) {
	handles := []RateTaker{open(t), open(t)}
	const burst = 10
	var granted atomic.Int64
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			// Every taker asks for a share of two buckets, in either order.
			reqs := []ratelimit.TokenRequest{{Key: "shared", Rate: slowRate, Burst: burst, Tokens: 1}, {Key: "other", Rate: slowRate, Burst: 100, Tokens: 1}}
			if i%2 == 1 {
				reqs[0], reqs[1] = reqs[1], reqs[0]
			}
			grants, err := handles[i%2].TakeRateTokens(t.Context(), reqs)
			if err != nil || len(grants) != 2 {
				t.Errorf("take: %+v, %v", grants, err)
				return
			}
			k := 0
			if i%2 == 1 {
				k = 1
			}
			granted.Add(int64(grants[k].Granted))
			if g := grants[1-k]; g.Granted != 1 {
				t.Errorf("the bucket of 100 refused one of 40 takers: %+v", g)
			}
		})
	}
	wg.Wait()
	if n := granted.Load(); n != burst {
		t.Fatalf("40 concurrent takers of one token from a bucket of %d got %d between them", burst, n)
	}
}
