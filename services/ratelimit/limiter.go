package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/services/audit"
)

// TokenRequest asks one bucket for tokens.
type TokenRequest struct {
	Key    string
	Rate   float64 // tokens per second
	Burst  int
	Tokens int
}

// Grant is what one bucket gave: Granted tokens, and when none, how long
// until it holds a whole one.
type Grant struct {
	Granted    int
	RetryAfter time.Duration
}

// Acquirer takes tokens from the cluster's buckets, one grant per request
// in order: the indexer's AcquireRateTokens RPC (IndexerBuckets), the
// database itself for the indexer.
// ErrRefusedRequest is an Acquirer's error for a request the buckets
// answered and refused as malformed: unlike a failure to reach them, it
// fails only the request that asked.
var ErrRefusedRequest = errors.New("the rate-limit buckets refused the token request as malformed")

type Acquirer interface {
	Acquire(ctx context.Context, reqs []TokenRequest) ([]Grant, error)
}

// LimitedError refuses a request: Limit names the limit whose bucket is
// empty, and RetryAfter says when a token will be there.
type LimitedError struct {
	Limit      string
	RetryAfter time.Duration
}

func (e *LimitedError) Error() string {
	return fmt.Sprintf("rate limit %s exceeded; retry after %ds", e.Limit, e.RetryAfterSeconds())
}

// RetryAfterSeconds is RetryAfter in whole seconds, rounded up, at least 1.
func (e *LimitedError) RetryAfterSeconds() int {
	return max(1, int(math.Ceil(e.RetryAfter.Seconds())))
}

// MaxRetryAfterSeconds bounds the wait told to an MCP client (an hour:
// the slowest rate a limit may have is one token per hour).
const MaxRetryAfterSeconds = 3600

// ClientRetryAfter is the wait an MCP client is told for a refusal that
// said seconds: at least 1, at most MaxRetryAfterSeconds.
func ClientRetryAfter(seconds int) int { return min(max(seconds, 1), MaxRetryAfterSeconds) }

// ClientMessage is what an MCP client is told of a refusal, of its own
// call or of a code mode program's: when to retry (ClientRetryAfter),
// never the limit's name, which is in metrics and in the refusal's
// ErrorInfo only.
func ClientMessage(seconds int) string {
	return "rate limited: retry after " + strconv.Itoa(ClientRetryAfter(seconds)) + "s"
}

// ErrLimited matches every *LimitedError with errors.Is.
var ErrLimited = errors.New("rate limited")

func (e *LimitedError) Is(target error) bool { return target == ErrLimited }

// AuditOutcome makes a refusal rate_limited in the audit trail
// (audit.Outcomer), wherever it is returned from.
func (e *LimitedError) AuditOutcome() audit.Outcome { return audit.OutcomeRateLimited }

const (
	// LeaseTTL is how long a replica may spend the tokens of a lease: a
	// lease unspent by then lapses (it was taken from the bucket, so it
	// is lost, never spent twice).
	LeaseTTL = time.Second
	// acquireTimeout bounds one acquisition: past it the buckets count as
	// unavailable, and the request is admitted or refused by
	// rateLimits.onUnavailable.
	acquireTimeout = 500 * time.Millisecond
	// unavailableBackoff is how long after a failed acquisition the
	// replica decides by onUnavailable without asking again, so that a
	// down indexer does not cost every request a timeout.
	unavailableBackoff = time.Second
	// maxLocalKeys bounds the keys a replica keeps leases for; past it the
	// lapsed ones are dropped, then any (losing their leases, which only
	// under-admits).
	maxLocalKeys = 100_000
	// maxAttempts bounds the acquisitions of one request (others may spend
	// a lease it took before it could).
	maxAttempts = 3
)

// allowance is a replica's local state of one key.
type allowance struct {
	tokens  int       // leased and not yet spent
	expires time.Time // when the leased tokens lapse
	// emptyUntil: the bucket held no whole token when last asked, and will
	// not until then; requests before it are refused without asking.
	emptyUntil time.Time
}

// Limiter applies a Set, taking leases from an Acquirer.
type Limiter struct {
	acq     Acquirer
	log     *slog.Logger
	metrics *Metrics
	now     func() time.Time

	set atomic.Pointer[Set]

	mu        sync.Mutex
	local     map[string]*allowance
	downUntil time.Time // after a failed acquisition
	lastLog   time.Time // of the unavailable warning
}

// New makes a limiter of set (nil: no limits).
func New(set *Set, acq Acquirer, log *slog.Logger, m *Metrics) *Limiter {
	l := &Limiter{acq: acq, log: log, metrics: m, now: time.Now, local: map[string]*allowance{}}
	l.Apply(set)
	return l
}

// Apply swaps the limits (live configuration reload). Leases already held
// are kept: they lapse within LeaseTTL. What was known empty is not: it
// was worked out at the old rates, and a limit raised to let refused
// callers through would keep them out until then (up to an hour); the
// buckets are asked again.
func (l *Limiter) Apply(set *Set) {
	if set == nil {
		set = &Set{}
	}
	l.set.Store(set)
	l.mu.Lock()
	for _, a := range l.local {
		a.emptyUntil = time.Time{}
	}
	l.mu.Unlock()
}

// Limits is the set in force (the last applied).
func (l *Limiter) Limits() *Set { return l.set.Load() }

// Allow takes one token from every limit r matches, or refuses r with a
// *LimitedError when any of them is empty; nothing is taken from the
// others then (the leases already taken stay for the next requests).
func (l *Limiter) Allow(ctx context.Context, r Request) error {
	set := l.set.Load()
	if set.Empty() {
		return nil
	}
	ms := set.match(r)
	if len(ms) == 0 {
		return nil
	}
	for attempt := 0; ; attempt++ {
		want, err := l.spend(ms)
		if want == nil || err != nil {
			return err
		}
		if attempt == maxAttempts-1 {
			// Others spent every lease this request took: as good as empty.
			return l.refuse(&LimitedError{Limit: want[0].l.name, RetryAfter: LeaseTTL / 10})
		}
		if decided, err := l.acquire(ctx, set, want); decided {
			return err
		}
	}
}

// spend takes one local token of every match if each has one. Otherwise
// it returns the matches without one (to acquire), or a *LimitedError
// when one of them is known empty.
func (l *Limiter) spend(ms []matched) ([]matched, error) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	var want []matched
	var refused *LimitedError
	for _, m := range ms {
		a := l.local[m.key]
		switch {
		case a != nil && now.Before(a.emptyUntil):
			if wait := a.emptyUntil.Sub(now); refused == nil || wait > refused.RetryAfter {
				refused = &LimitedError{Limit: m.l.name, RetryAfter: wait}
			}
		case a != nil && a.tokens > 0 && now.Before(a.expires):
		default:
			want = append(want, m)
		}
	}
	if refused != nil {
		return nil, l.refuse(refused)
	}
	if len(want) > 0 {
		return want, nil
	}
	for _, m := range ms {
		l.local[m.key].tokens--
		l.metrics.allowed(m.l.name)
	}
	return nil, nil
}

// acquire takes a lease for each of want, in one call. When the buckets
// cannot be reached, or the caller went, the request is decided: admitted
// (nil) or refused.
func (l *Limiter) acquire(ctx context.Context, set *Set, want []matched) (decided bool, err error) {
	l.mu.Lock()
	down := l.now().Before(l.downUntil)
	l.mu.Unlock()
	if down {
		return true, l.unavailable(set, want, nil)
	}
	reqs := make([]TokenRequest, len(want))
	for i, m := range want {
		reqs[i] = TokenRequest{Key: m.key, Rate: m.l.rate, Burst: m.l.burst, Tokens: m.l.lease}
	}
	actx, cancel := context.WithTimeout(ctx, acquireTimeout)
	grants, err := l.acq.Acquire(actx, reqs)
	cancel()
	if err != nil && ctx.Err() != nil {
		// The caller gave up: not the buckets' failure.
		return true, ctx.Err()
	}
	if err == nil && len(grants) != len(reqs) {
		err = fmt.Errorf("%d grants for %d keys", len(grants), len(reqs))
	}
	if errors.Is(err, ErrRefusedRequest) {
		// The buckets answered: they refused this request as malformed.
		// That is this request's failure, not the buckets' absence: no
		// other request is decided by onUnavailable for it.
		l.log.Error("rate-limit buckets refused a token request as malformed", "err", err)
		return true, err
	}
	if err != nil {
		l.metrics.leased(false)
		l.mu.Lock()
		l.downUntil = l.now().Add(unavailableBackoff)
		l.mu.Unlock()
		return true, l.unavailable(set, want, err)
	}
	l.metrics.leased(true)
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, m := range want {
		a := l.entryLocked(m.key, now)
		g := grants[i]
		if g.Granted > 0 {
			if !now.Before(a.expires) {
				a.tokens = 0
			}
			a.tokens += g.Granted
			a.expires = now.Add(LeaseTTL)
			a.emptyUntil = time.Time{}
		} else if (a.tokens == 0 || !now.Before(a.expires)) && set == l.set.Load() {
			// (A concurrent request's lease may have come in meanwhile:
			// those tokens are spent first. An answer at the rates of a
			// set Apply has replaced is this request's alone: Apply stores
			// the set before it clears, under l.mu, what was known empty.)
			a.emptyUntil = now.Add(max(g.RetryAfter, time.Millisecond))
		}
	}
	return false, nil
}

// entryLocked returns key's allowance, making room under maxLocalKeys.
func (l *Limiter) entryLocked(key string, now time.Time) *allowance {
	if a := l.local[key]; a != nil {
		return a
	}
	if len(l.local) >= maxLocalKeys {
		for k, a := range l.local {
			if !now.Before(a.expires) && !now.Before(a.emptyUntil) {
				delete(l.local, k)
			}
		}
		for k := range l.local {
			if len(l.local) < maxLocalKeys {
				break
			}
			delete(l.local, k)
		}
	}
	a := &allowance{}
	l.local[key] = a
	return a
}

// unavailable decides a request whose tokens could not be acquired, by
// rateLimits.onUnavailable: admitted (fail open) or refused.
func (l *Limiter) unavailable(set *Set, want []matched, err error) error {
	l.metrics.unavailable(set.failOpen)
	l.mu.Lock()
	logIt := err != nil && l.now().Sub(l.lastLog) >= 10*time.Second
	if logIt {
		l.lastLog = l.now()
	}
	l.mu.Unlock()
	if logIt {
		l.log.Warn("rate-limit buckets unavailable: requests are decided by rateLimits.onUnavailable until they answer",
			"onUnavailable", map[bool]string{true: "open", false: "closed"}[set.failOpen], "err", err)
	}
	if set.failOpen {
		return nil
	}
	return l.refuse(&LimitedError{Limit: want[0].l.name, RetryAfter: unavailableBackoff})
}

func (l *Limiter) refuse(e *LimitedError) error {
	l.metrics.refused(e.Limit)
	return e
}
