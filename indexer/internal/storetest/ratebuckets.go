package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/ratelimit"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// rateBuckets: what was taken is listed, through another handle (replica),
// key for key with the tokens left, in key order, in pages that neither
// repeat nor skip a bucket, and filtered by limit name without matching a
// limit whose name only starts the same.
func rateBuckets(t *testing.T, open Open[store.RateBuckets]) {
	one, two := open(t), open(t)
	ctx := t.Context()
	before := time.Now()

	// Empty: no buckets, and still the store's clock.
	got, readAt, err := two.ListRateBuckets(ctx, "", "", 10)
	if err != nil || len(got) != 0 || readAt.IsZero() {
		t.Fatalf("empty store: %+v, read at %v, %v; want nothing and a clock", got, readAt, err)
	}

	// 1/h: nothing refills within the test, so the tokens left are exact.
	const slow = 1.0 / 3600
	var reqs []ratelimit.TokenRequest
	for i := range 5 {
		reqs = append(reqs, ratelimit.TokenRequest{Key: ratelimit.Key("calls", "principal", fmt.Sprintf("user-%d", i)), Rate: slow, Burst: 10, Tokens: i + 1})
	}
	reqs = append(reqs,
		ratelimit.TokenRequest{Key: ratelimit.Key("callsx", "tool", "echo"), Rate: slow, Burst: 4, Tokens: 4},
		ratelimit.TokenRequest{Key: ratelimit.Key("search", "server", ""), Rate: slow, Burst: 3, Tokens: 1})
	if _, err := one.TakeRateTokens(ctx, reqs); err != nil {
		t.Fatal(err)
	}

	got, readAt, err = two.ListRateBuckets(ctx, "", "", 100)
	if err != nil || len(got) != len(reqs) {
		t.Fatalf("every bucket: %d listed (%v), want %d", len(got), err, len(reqs))
	}
	if readAt.Before(before.Add(-time.Minute)) {
		t.Fatalf("read at %v, before the test began (%v)", readAt, before)
	}
	want := map[string]ratelimit.TokenRequest{}
	for _, r := range reqs {
		want[r.Key] = r
	}
	for i, bk := range got {
		r, ok := want[bk.Key]
		if !ok {
			t.Fatalf("listed %q, never taken", bk.Key)
		}
		if i > 0 && got[i-1].Key >= bk.Key {
			t.Fatalf("not in key order: %q before %q", got[i-1].Key, bk.Key)
		}
		left := float64(r.Burst - r.Tokens)
		if bk.Granted != r.Tokens || bk.Tokens < left || bk.Tokens > left+0.01 {
			t.Fatalf("%s: granted %d, %.3f left; want %d granted, %.0f left", bk.Key, bk.Granted, bk.Tokens, r.Tokens, left)
		}
		if bk.UpdatedAt.After(readAt) || !bk.FullAt.After(bk.UpdatedAt) {
			t.Fatalf("%s: updated %v, full at %v, read at %v", bk.Key, bk.UpdatedAt, bk.FullAt, readAt)
		}
		// At 1/h, the tokens taken come back in that many hours.
		if d := bk.FullAt.Sub(bk.UpdatedAt); d < time.Duration(r.Tokens)*time.Hour-time.Minute || d > time.Duration(r.Tokens)*time.Hour+time.Minute {
			t.Fatalf("%s: full %v after its take, want %d h", bk.Key, d, r.Tokens)
		}
	}

	// Pages of two: every bucket once, in order.
	var paged []string
	after := ""
	for range 10 {
		page, _, err := two.ListRateBuckets(ctx, "", after, 2)
		if err != nil || len(page) > 2 {
			t.Fatalf("page after %q: %d buckets, %v", after, len(page), err)
		}
		if len(page) == 0 {
			break
		}
		for _, bk := range page {
			paged = append(paged, bk.Key)
		}
		after = page[len(page)-1].Key
	}
	if len(paged) != len(got) {
		t.Fatalf("pages listed %v, want the %d buckets", paged, len(got))
	}
	for i := range paged {
		if paged[i] != got[i].Key {
			t.Fatalf("pages listed %v, one page %v", paged, got)
		}
	}

	// By limit: "calls" is not "callsx".
	calls, _, err := one.ListRateBuckets(ctx, "calls", "", 100)
	if err != nil || len(calls) != 5 {
		t.Fatalf("limit calls: %+v, %v; want its 5 buckets", calls, err)
	}
	for _, bk := range calls {
		if bk.Key[:len("calls|")] != "calls|" {
			t.Fatalf("limit calls listed %q", bk.Key)
		}
	}
	if x, _, err := one.ListRateBuckets(ctx, "callsx", "", 100); err != nil || len(x) != 1 || x[0].Key != "callsx|tool|echo" {
		t.Fatalf("limit callsx: %+v, %v", x, err)
	}
	if none, _, err := one.ListRateBuckets(ctx, "nosuch", "", 100); err != nil || len(none) != 0 {
		t.Fatalf("a limit with no buckets: %+v, %v", none, err)
	}
	// A limit's page continues after a key of its own.
	if rest, _, err := one.ListRateBuckets(ctx, "calls", calls[2].Key, 100); err != nil || len(rest) != 2 || rest[0].Key != calls[3].Key {
		t.Fatalf("limit calls after %q: %+v, %v", calls[2].Key, rest, err)
	}

	// A second take is listed with what it left.
	if _, err := two.TakeRateTokens(ctx, []ratelimit.TokenRequest{{Key: calls[0].Key, Rate: slow, Burst: 10, Tokens: 2}}); err != nil {
		t.Fatal(err)
	}
	again, _, err := one.ListRateBuckets(ctx, "calls", "", 1)
	if err != nil || len(again) != 1 || again[0].Granted != 2 || again[0].Tokens < calls[0].Tokens-2 || again[0].Tokens > calls[0].Tokens-2+0.01 {
		t.Fatalf("after a second take: %+v, %v; want 2 granted and %.0f left", again, err, calls[0].Tokens-2)
	}
}
