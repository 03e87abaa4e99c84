package ratelimit

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-mcp/switchboard/services/config"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestTake(t *testing.T) {
	t0 := time.Unix(1000, 0)
	cases := []struct {
		name          string
		tokens        float64
		elapsed       time.Duration
		rate          float64
		burst, want   int
		left          float64
		granted       int
		retryAfterMin time.Duration
	}{
		{"full bucket gives what is asked", 10, 0, 5, 10, 3, 7, 3, 0},
		{"refill is capped at burst", 2, time.Hour, 5, 10, 4, 6, 4, 0},
		{"partial grant", 2.5, 0, 5, 10, 4, 0.5, 2, 0},
		{"refill over time", 0, 500 * time.Millisecond, 4, 10, 5, 0, 2, 0},
		{"empty: wait for a whole token", 0.25, 0, 2, 10, 1, 0.25, 0, 375 * time.Millisecond},
		{"clock going back refills nothing", 0, -time.Second, 100, 10, 1, 0, 0, 10 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			left, granted, wait := Take(c.tokens, t0, t0.Add(c.elapsed), c.rate, c.burst, c.want)
			if granted != c.granted || left < c.left-1e-9 || left > c.left+1e-9 {
				t.Fatalf("Take = left %v granted %d; want %v %d", left, granted, c.left, c.granted)
			}
			if granted == 0 && (wait < c.retryAfterMin-time.Millisecond || wait > c.retryAfterMin+time.Millisecond) {
				t.Fatalf("retry after %v, want %v", wait, c.retryAfterMin)
			}
			if granted > 0 && wait != 0 {
				t.Fatalf("retry after %v with a grant", wait)
			}
		})
	}
}

// clock is a settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// countingBuckets counts acquisitions of MemoryBuckets and can fail.
type countingBuckets struct {
	MemoryBuckets
	calls atomic.Int64
	fail  atomic.Bool
}

func (b *countingBuckets) Acquire(ctx context.Context, reqs []TokenRequest) ([]Grant, error) {
	b.calls.Add(1)
	if b.fail.Load() {
		return nil, errors.New("indexer down")
	}
	return b.MemoryBuckets.Acquire(ctx, reqs)
}

func compile(t *testing.T, cfg config.RateLimits) *Set {
	t.Helper()
	s, err := Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newLimiter(t *testing.T, cfg config.RateLimits, clk *clock, acq Acquirer) (*Limiter, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	l := New(compile(t, cfg), acq, quiet, NewMetrics(reg, "test"))
	l.now = clk.now
	return l, reg
}

func perPrincipal(rate string, burst int) config.RateLimits {
	return config.RateLimits{Limits: []config.RateLimit{{Name: "per-user", Per: "principal", Rate: rate, Burst: burst}}}
}

// TestLimiterAdmitsBurstThenRate: with the clock still, exactly burst
// requests pass (leases of burst/10, so burst/10 acquisitions); then one
// token per 1/rate.
func TestLimiterAdmitsBurstThenRate(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	acq := &countingBuckets{MemoryBuckets: MemoryBuckets{Now: clk.now}}
	l, reg := newLimiter(t, perPrincipal("10/s", 20), clk, acq)
	ctx := context.Background()
	r := Request{Method: config.RateMethodToolsCall, Subject: "alice", Tool: "t", Backend: "b"}
	admitted := 0
	for range 50 {
		if l.Allow(ctx, r) == nil {
			admitted++
		}
	}
	if admitted != 20 {
		t.Fatalf("admitted %d of 50 at once, want the burst, 20", admitted)
	}
	// 20 tokens in leases of 2, then one acquisition that found the bucket
	// empty; the refusals after it are local.
	if got := acq.calls.Load(); got != 11 {
		t.Fatalf("%d acquisitions, want 11", got)
	}
	var err *LimitedError
	if !errors.As(l.Allow(ctx, r), &err) || err.Limit != "per-user" || err.RetryAfterSeconds() != 1 {
		t.Fatalf("refusal %v, want per-user with retry after 1s", err)
	}
	if !errors.Is(err, ErrLimited) {
		t.Fatal("a LimitedError is not ErrLimited")
	}
	// Another principal has its own bucket.
	if e := l.Allow(ctx, Request{Method: config.RateMethodToolsCall, Subject: "bob"}); e != nil {
		t.Fatalf("bob: %v", e)
	}
	// Two seconds later: 20 more (the rate), never more than the burst.
	clk.add(2 * time.Second)
	admitted = 0
	for range 50 {
		if l.Allow(ctx, r) == nil {
			admitted++
		}
	}
	if admitted != 20 {
		t.Fatalf("admitted %d after 2s at 10/s, want 20", admitted)
	}
	if got := testutil.ToFloat64(l.metrics.decisions.WithLabelValues("per-user", "allowed")); got != 41 {
		t.Fatalf("allowed metric %v, want 41", got)
	}
	if got := testutil.ToFloat64(l.metrics.decisions.WithLabelValues("per-user", "refused")); got != 61 {
		t.Fatalf("refused metric %v, want 61", got)
	}
	if n, _ := testutil.GatherAndCount(reg, "switchboard_test_ratelimit_requests_total"); n != 2 {
		t.Fatalf("%d series, want 2", n)
	}
}

// TestLimiterLeasesLapse: a lease unspent within LeaseTTL is not spent
// later (its tokens left the bucket; spending them late would over-admit
// the next second).
func TestLimiterLeasesLapse(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	acq := &countingBuckets{MemoryBuckets: MemoryBuckets{Now: clk.now}}
	// rate 1/h: the bucket does not refill within the test.
	l, _ := newLimiter(t, perPrincipal("1/h", 100), clk, acq)
	ctx := context.Background()
	r := Request{Method: config.RateMethodFindTool, Subject: "alice"}
	if err := l.Allow(ctx, r); err != nil { // leases 10, spends 1
		t.Fatal(err)
	}
	clk.add(LeaseTTL)
	for i := range 90 {
		if err := l.Allow(ctx, r); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	// 1 + 90 spent; the 9 that lapsed are gone: 100 - 10 - 90 = 0.
	if err := l.Allow(ctx, r); !errors.Is(err, ErrLimited) {
		t.Fatalf("request past the bucket: %v, want refused", err)
	}
}

// TestLimiterEveryMatchingLimit: a request takes a token of every limit
// it matches, and a refusal by one takes none of the others.
func TestLimiterEveryMatchingLimit(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	acq := &countingBuckets{MemoryBuckets: MemoryBuckets{Now: clk.now}}
	cfg := config.RateLimits{Limits: []config.RateLimit{
		{Name: "user", Per: "principal", Rate: "1/h", Burst: 5},
		{Name: "tickets", Per: "tool", Rate: "1/h", Burst: 3, Match: config.RateLimitMatch{Tools: []string{"tickets_*"}}},
		{Name: "github", Per: "backend", Rate: "1/h", Burst: 100, Match: config.RateLimitMatch{Backends: []string{"github"}}},
		{Name: "support", Per: "server", Rate: "1/h", Burst: 100, Match: config.RateLimitMatch{Servers: []string{"support"}}},
		{Name: "admins", Per: "principal", Rate: "1/h", Burst: 1, Match: config.RateLimitMatch{Groups: []string{"admin*"}}},
	}}
	l, _ := newLimiter(t, cfg, clk, acq)
	ctx := context.Background()
	call := func(subject, tool string, groups ...string) error {
		return l.Allow(ctx, Request{Method: config.RateMethodToolsCall, Subject: subject, Groups: groups, Tool: tool, Backend: "jira"})
	}
	for i := range 3 {
		if err := call("alice", "tickets_search"); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	var lim *LimitedError
	if err := call("alice", "tickets_search"); !errors.As(err, &lim) || lim.Limit != "tickets" {
		t.Fatalf("4th tickets call: %v, want refused by tickets", err)
	}
	// The refusal took nothing of alice's 5: two are left.
	for i := range 2 {
		if err := call("alice", "other"); err != nil {
			t.Fatalf("other call %d: %v", i, err)
		}
	}
	if err := call("alice", "other"); !errors.As(err, &lim) || lim.Limit != "user" {
		t.Fatalf("6th call: %v, want refused by user", err)
	}
	// A group's limit applies to its members only.
	if err := call("root", "other", "admins"); err != nil {
		t.Fatal(err)
	}
	if err := call("root", "other", "admins"); !errors.As(err, &lim) || lim.Limit != "admins" {
		t.Fatalf("2nd admin call: %v, want refused by admins", err)
	}
	// find_tool matches neither a tool limit nor a backend one.
	ms := compile(t, cfg).match(Request{Method: config.RateMethodFindTool, Subject: "x", Server: "support"})
	var names []string
	for _, m := range ms {
		names = append(names, m.key)
	}
	if strings.Join(names, ",") != "user|principal|x,support|server|support" {
		t.Fatalf("find_tool matched %v", names)
	}
}

// TestLimiterUnavailable: a unreachable acquisition admits (open) or refuses
// (closed), is counted, and is not retried for a second.
func TestLimiterUnavailable(t *testing.T) {
	for _, mode := range []string{config.RateFailOpen, config.RateFailClosed} {
		t.Run(mode, func(t *testing.T) {
			clk := &clock{t: time.Unix(1000, 0)}
			acq := &countingBuckets{MemoryBuckets: MemoryBuckets{Now: clk.now}}
			acq.fail.Store(true)
			cfg := perPrincipal("10/s", 20)
			cfg.OnUnavailable = mode
			l, reg := newLimiter(t, cfg, clk, acq)
			r := Request{Method: config.RateMethodPromptsGet, Subject: "alice", Backend: "b"}
			for range 5 {
				err := l.Allow(context.Background(), r)
				if (mode == config.RateFailOpen) != (err == nil) {
					t.Fatalf("%s: %v", mode, err)
				}
			}
			if got := acq.calls.Load(); got != 1 {
				t.Fatalf("%d acquisitions while down, want 1 (then a second's backoff)", got)
			}
			if got := testutil.ToFloat64(l.metrics.unreachable.WithLabelValues(mode)); got != 5 {
				t.Fatalf("unavailable_total{decision=%s} = %v, want 5", mode, got)
			}
			if n, _ := testutil.GatherAndCount(reg, "switchboard_test_ratelimit_unavailable_total"); n != 1 {
				t.Fatalf("unavailable metric series %d", n)
			}
			if n, _ := testutil.GatherAndCount(reg, "switchboard_test_ratelimit_lease_acquisitions_total"); n != 1 {
				t.Fatalf("lease metric series %d", n)
			}
			acq.fail.Store(false)
			clk.add(unavailableBackoff)
			if err := l.Allow(context.Background(), r); err != nil {
				t.Fatalf("after recovery: %v", err)
			}
		})
	}
}

// TestLimiterConcurrentNeverOverAdmits: many goroutines on one limiter
// never admit more than the bucket holds.
func TestLimiterConcurrentNeverOverAdmits(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	acq := &countingBuckets{MemoryBuckets: MemoryBuckets{Now: clk.now}}
	l, _ := newLimiter(t, perPrincipal("1/h", 57), clk, acq)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 20 {
				if l.Allow(context.Background(), Request{Method: config.RateMethodToolsCall, Subject: "a", Backend: "b"}) == nil {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := admitted.Load(); got > 57 || got < 57-int64(LeaseSize(57)) {
		t.Fatalf("admitted %d, want at most 57 and at least %d", got, 57-LeaseSize(57))
	}
}

func TestApplySwapsLimits(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	acq := &countingBuckets{MemoryBuckets: MemoryBuckets{Now: clk.now}}
	l, _ := newLimiter(t, config.RateLimits{}, clk, acq)
	r := Request{Method: config.RateMethodToolsCall, Subject: "a", Backend: "b"}
	for range 10 {
		if err := l.Allow(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if acq.calls.Load() != 0 {
		t.Fatal("no limits, yet an acquisition")
	}
	l.Apply(compile(t, perPrincipal("1/h", 1)))
	if l.Allow(context.Background(), r) != nil || !errors.Is(l.Allow(context.Background(), r), ErrLimited) {
		t.Fatal("the applied limit of 1 did not hold")
	}
	// Raised to let the refused caller through, at once: what was known
	// empty at the old rate (for the next hour) is asked again.
	l.Apply(compile(t, perPrincipal("100/s", 100)))
	clk.add(2 * time.Second)
	if err := l.Allow(context.Background(), r); err != nil {
		t.Fatalf("2 s after the limit was raised to 100/s: %v", err)
	}
}

func TestKeyBounded(t *testing.T) {
	long := strings.Repeat("x", 10_000)
	if k := Key("n", "principal", long); len(k) > 512 || !strings.HasPrefix(k, "n|principal|sha256:") {
		t.Fatalf("key %q", k)
	}
	if Key("n", "principal", long) == Key("n", "principal", long+"y") {
		t.Fatal("two long values share a key")
	}
}

func TestLocalKeysBounded(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	acq := &countingBuckets{MemoryBuckets: MemoryBuckets{Now: clk.now}}
	l, _ := newLimiter(t, perPrincipal("1/h", 10), clk, acq)
	for i := range maxLocalKeys + 50 {
		_ = l.Allow(context.Background(), Request{Method: config.RateMethodFindTool, Subject: "user" + itoa(i)})
	}
	if n := len(l.local); n > maxLocalKeys {
		t.Fatalf("%d local keys, bound %d", n, maxLocalKeys)
	}
}

func itoa(i int) string {
	var b [20]byte
	n := len(b)
	for {
		n--
		b[n] = byte('0' + i%10)
		if i /= 10; i == 0 {
			return string(b[n:])
		}
	}
}

// BenchmarkAllow is the cost a limit adds to a request: a principal's
// limit with a large burst, so that nearly every request spends a local
// lease and one in LeaseSize acquires (from memory here).
func BenchmarkAllow(b *testing.B) {
	set, err := Compile(config.RateLimits{Limits: []config.RateLimit{
		{Name: "user", Per: "principal", Rate: "1000000/s", Burst: 1_000_000},
		{Name: "tool", Per: "tool", Rate: "1000000/s", Burst: 1_000_000, Match: config.RateLimitMatch{Tools: []string{"tickets_*"}}},
	}})
	if err != nil {
		b.Fatal(err)
	}
	l := New(set, &MemoryBuckets{}, quiet, nil)
	r := Request{Method: config.RateMethodToolsCall, Subject: "alice", Tool: "tickets_search", Backend: "jira"}
	b.ReportAllocs()
	for b.Loop() {
		if err := l.Allow(context.Background(), r); err != nil {
			b.Fatal(err)
		}
	}
}

// Configured answers the compiled rate and burst of a limit by name, and
// nothing for a name the set does not have; a limiter answers the set it
// applies now.
func TestConfiguredLimits(t *testing.T) {
	set, err := Compile(config.RateLimits{Limits: []config.RateLimit{{Name: "calls", Per: config.RatePerPrincipal, Rate: "120/m", Burst: 7}}})
	if err != nil {
		t.Fatal(err)
	}
	if rate, burst, ok := set.Configured("calls"); !ok || rate != 2 || burst != 7 {
		t.Fatalf("calls: %v %d %v; want 2/s, burst 7", rate, burst, ok)
	}
	if _, _, ok := set.Configured("other"); ok {
		t.Fatal("a limit not configured is reported configured")
	}
	l := New(nil, &MemoryBuckets{}, slog.New(slog.DiscardHandler), nil)
	if _, _, ok := l.Limits().Configured("calls"); ok {
		t.Fatal("an empty limiter reports calls")
	}
	l.Apply(set)
	if _, _, ok := l.Limits().Configured("calls"); !ok {
		t.Fatal("after Apply, the limiter does not report calls")
	}
}

// TestKeyOfAnyValueIsValid: whatever a subject or a tool name holds (NUL,
// a line break, non-ASCII, "|", a megabyte, or what looks like a hashed
// value), its key is printable ASCII within the RPC's 512 bytes, and
// distinct values give distinct keys; plain values stay readable.
func TestKeyOfAnyValueIsValid(t *testing.T) {
	hashedLookalike := Key("l", "tool", "\x00")[len("l|tool|"):]
	values := []string{"alice", "", "a\x00b", "a\nb", "josé", "a|b", strings.Repeat("x", 1<<20), hashedLookalike, "\x00"}
	seen := map[string]string{}
	for _, v := range values {
		k := Key("per-user", "tool", v)
		if len(k) > 512 {
			t.Errorf("%.20q: a key of %d bytes", v, len(k))
		}
		for i := 0; i < len(k); i++ {
			if k[i] < 0x20 || k[i] > 0x7e {
				t.Errorf("%.20q: key %q holds byte %#x", v, k, k[i])
				break
			}
		}
		if other, ok := seen[k]; ok {
			t.Errorf("%.20q and %.20q share the key %q", v, other, k)
		}
		seen[k] = v
	}
	if k := Key("per-user", "principal", "alice"); k != "per-user|principal|alice" {
		t.Errorf("a plain value's key is %q", k)
	}
}

// refusingBuckets refuses as malformed any request holding one key, and
// takes every other from MemoryBuckets.
type refusingBuckets struct {
	MemoryBuckets
	bad string
}

func (b *refusingBuckets) Acquire(ctx context.Context, reqs []TokenRequest) ([]Grant, error) {
	for _, r := range reqs {
		if r.Key == b.bad {
			return nil, ErrRefusedRequest
		}
	}
	return b.MemoryBuckets.Acquire(ctx, reqs)
}

// TestRefusedRequestFailsOnlyItself: a token request the buckets refuse
// as malformed fails the request that asked, and only it: the buckets
// are not taken for unavailable, so the next request, with onUnavailable
// closed, is admitted from its own bucket.
func TestRefusedRequestFailsOnlyItself(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	cfg := perPrincipal("10/s", 20)
	cfg.OnUnavailable = config.RateFailClosed
	acq := &refusingBuckets{MemoryBuckets: MemoryBuckets{Now: clk.now}, bad: Key("per-user", "principal", "mallory")}
	l, _ := newLimiter(t, cfg, clk, acq)
	ctx := context.Background()
	err := l.Allow(ctx, Request{Method: config.RateMethodToolsCall, Subject: "mallory", Tool: "t", Backend: "b"})
	if !errors.Is(err, ErrRefusedRequest) {
		t.Fatalf("the refused request: %v", err)
	}
	if err := l.Allow(ctx, Request{Method: config.RateMethodToolsCall, Subject: "alice", Tool: "t", Backend: "b"}); err != nil {
		t.Fatalf("another principal's request after a refused one: %v", err)
	}
	if v := testutil.ToFloat64(l.metrics.unreachable.WithLabelValues("closed")); v != 0 {
		t.Fatalf("%v requests decided as if the buckets were unavailable", v)
	}
}

// A refused request counts against the limits per principal only: a
// bucket per tool or server name the client chose would be a bucket per
// made-up name, and a limit on backends cannot see one (it is unknown, so
// a denied item costs what a missing one does).
func TestRefusedRequestsMatchOnlyLimitsPerPrincipal(t *testing.T) {
	set, err := Compile(config.RateLimits{Limits: []config.RateLimit{
		{Name: "user", Per: config.RatePerPrincipal, Rate: "1/s"},
		{Name: "ops-users", Per: config.RatePerPrincipal, Rate: "1/s", Match: config.RateLimitMatch{Backends: []string{"ops"}}},
		{Name: "tool", Per: config.RatePerTool, Rate: "1/s"},
		{Name: "server", Per: config.RatePerServer, Rate: "1/s"},
		{Name: "backend", Per: config.RatePerBackend, Rate: "1/s"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	names := func(r Request) []string {
		var out []string
		for _, m := range set.match(r) {
			out = append(out, m.l.name)
		}
		return out
	}
	r := Request{Method: config.RateMethodToolsCall, Subject: "alice", Server: "made-up", Tool: "made-up"}
	if got := names(Request{Method: r.Method, Subject: "alice", Server: "s", Tool: "t", Backend: "ops"}); len(got) != 5 {
		t.Fatalf("an admitted call matches %v, want every limit", got)
	}
	r.Refused = true
	if got := names(r); len(got) != 1 || got[0] != "user" {
		t.Fatalf("a refused call matches %v, want only user", got)
	}
}

// A limit per backend counts by default every request that reaches its
// backend: the requests about a task, which the backend runs or whose
// next round it is asked for, as well as the calls and reads; never a
// request that names no backend.
func TestBackendLimitsCountTaskRequests(t *testing.T) {
	set, err := Compile(config.RateLimits{Limits: []config.RateLimit{
		{Name: "ops", Per: config.RatePerBackend, Rate: "1/s", Match: config.RateLimitMatch{Backends: []string{"ops"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{config.RateMethodToolsCall, config.RateMethodResourceRead, config.RateMethodPromptsGet,
		config.RateMethodCompletion, config.RateMethodResourceSubscribe,
		config.RateMethodTasksGet, config.RateMethodTasksUpdate, config.RateMethodTasksCancel} {
		if got := set.match(Request{Method: m, Subject: "alice", Tool: "ops_sleep", Backend: "ops"}); len(got) != 1 {
			t.Errorf("%s to backend ops matches %d limits, want the limit on ops", m, len(got))
		}
	}
	for _, m := range []string{config.RateMethodFindTool, config.RateMethodTasksList} {
		if got := set.match(Request{Method: m, Subject: "alice"}); len(got) != 0 {
			t.Errorf("%s, which names no backend, matches %d limits", m, len(got))
		}
	}
}

// gatedBuckets holds the next acquisition, once held is set, until the
// test opens the gate.
type gatedBuckets struct {
	MemoryBuckets
	held          atomic.Bool
	entered, gate chan struct{}
}

func (b *gatedBuckets) Acquire(ctx context.Context, reqs []TokenRequest) ([]Grant, error) {
	if b.held.CompareAndSwap(true, false) {
		b.entered <- struct{}{}
		<-b.gate
	}
	return b.MemoryBuckets.Acquire(ctx, reqs)
}

// An acquisition asked at the old rates and answered after Apply does not
// keep the key empty under the new ones.
func TestApplyDuringAcquisition(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	acq := &gatedBuckets{MemoryBuckets: MemoryBuckets{Now: clk.now}}
	l, _ := newLimiter(t, perPrincipal("1/h", 1), clk, acq)
	r := Request{Method: config.RateMethodToolsCall, Subject: "a", Backend: "b"}
	if err := l.Allow(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	acq.entered, acq.gate = make(chan struct{}), make(chan struct{})
	acq.held.Store(true)
	refused := make(chan error, 1)
	go func() { refused <- l.Allow(context.Background(), r) }()
	<-acq.entered
	l.Apply(compile(t, perPrincipal("100/s", 100)))
	close(acq.gate)
	if err := <-refused; !errors.Is(err, ErrLimited) {
		t.Fatalf("asked at 1/h after its token was spent: %v", err)
	}
	clk.add(2 * time.Second)
	if err := l.Allow(context.Background(), r); err != nil {
		t.Fatalf("2 s after the limit was raised to 100/s: %v", err)
	}
}
