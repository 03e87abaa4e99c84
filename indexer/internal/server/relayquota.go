package server

import (
	"container/heap"
	"errors"
	"sync"
	"time"
)

// Bounds of the live relayed input responses of one principal on this
// replica: the gateways share one credential, so the caller's bound
// (maxInputResponsesPerCaller) is every principal's together; this one
// keeps any principal from using it up (and shrinks once half the
// caller's is used: ratelimit.FairShare).
const (
	maxInputResponsesPerPrincipal     = 1000
	maxInputResponseBytesPerPrincipal = 64 << 20
)

// errPrincipalRelaysFull: the principal holds as many live relayed input
// responses as it may.
var errPrincipalRelaysFull = errors.New("too many live relayed input responses for this principal")

// relayQuota counts each principal's live relayed answers and their bytes
// until they expire. Principals are digests the caller chooses, so one is
// tracked only while it has an answer live or being written: every
// recorded answer is in one heap by expiry, and an expired one leaves its
// principal's counts, and the principal the map once none is left. The
// zero value is ready.
type relayQuota struct {
	mu          sync.Mutex
	byPrincipal map[string]*principalRelays
	live        relayHeap
}

type principalRelays struct {
	live         int
	bytes        int64
	pending      int
	pendingBytes int64
}

type liveRelay struct {
	expires   time.Time
	principal string
	bytes     int64
}

// reserve takes a place for one answer of size bytes, the principal
// holding fewer than share answers; done must be called with whether it
// was recorded, expiring at expiresAt.
func (q *relayQuota) reserve(principal string, now time.Time, size int64, share int) (done func(recorded bool, expiresAt time.Time), err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.expire(now)
	if q.byPrincipal == nil {
		q.byPrincipal = map[string]*principalRelays{}
	}
	p := q.byPrincipal[principal]
	if p == nil {
		p = &principalRelays{}
		q.byPrincipal[principal] = p
	}
	if p.live+p.pending >= share || p.bytes+p.pendingBytes+size > maxInputResponseBytesPerPrincipal {
		q.forgetIdle(principal, p)
		return nil, errPrincipalRelaysFull
	}
	p.pending++
	p.pendingBytes += size
	return func(recorded bool, expiresAt time.Time) {
		q.mu.Lock()
		defer q.mu.Unlock()
		p.pending--
		p.pendingBytes -= size
		if recorded {
			heap.Push(&q.live, liveRelay{expires: expiresAt, principal: principal, bytes: size})
			p.live++
			p.bytes += size
		}
		// An answer recorded expired already leaves at once.
		q.expire(now)
		q.forgetIdle(principal, p)
	}, nil
}

// expire drops the answers expired at now from their principals' counts.
func (q *relayQuota) expire(now time.Time) {
	for len(q.live) > 0 && q.live[0].expires.Before(now) {
		r := heap.Pop(&q.live).(liveRelay)
		if p := q.byPrincipal[r.principal]; p != nil {
			p.live--
			p.bytes -= r.bytes
			q.forgetIdle(r.principal, p)
		}
	}
}

// forgetIdle stops tracking principal p when it has nothing live or being
// written.
func (q *relayQuota) forgetIdle(principal string, p *principalRelays) {
	if p.live == 0 && p.pending == 0 && q.byPrincipal[principal] == p {
		delete(q.byPrincipal, principal)
	}
}

type relayHeap []liveRelay

func (h relayHeap) Len() int           { return len(h) }
func (h relayHeap) Less(i, j int) bool { return h[i].expires.Before(h[j].expires) }
func (h relayHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *relayHeap) Push(x any)        { *h = append(*h, x.(liveRelay)) }
func (h *relayHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
