package server

import (
	"container/heap"
	"errors"
	"sync"
	"time"
)

// errTooManyRevocations: the caller holds as many live revocations as it
// may.
var errTooManyRevocations = errors.New("too many live session revocations for this caller")

// revocationQuota bounds the live revocations each caller (a service
// credential that is not an operator's) has recorded through this
// replica, so that no credential can fill the indexer's table and every
// gateway's memory: a revocation is about 150 bytes in each. A revocation
// leaves its caller's count when it expires; a caller past its bound gets
// RESOURCE_EXHAUSTED until then. Each RevokeSession counts, a repeated
// one for the same session too.
type revocationQuota struct {
	max int
	// full is the error past the bound.
	full error

	mu       sync.Mutex
	byCaller map[string]*callerRevocations
	// swept is when the keys whose records all expired were last
	// forgotten (sweepEvery): a quota kept per principal would otherwise
	// keep every principal it ever saw.
	swept time.Time
}

// sweepEvery is how often a quota forgets the keys left with nothing live.
const sweepEvery = time.Minute

// callerRevocations are one caller's live revocations: their expiries (a
// min-heap, so the expired ones leave first) and the ones being written.
type callerRevocations struct {
	expiries expiryHeap
	pending  int
}

func newRevocationQuota(max int) *revocationQuota {
	return newLiveQuota(max, errTooManyRevocations)
}

// newLiveQuota bounds any records with an expiry that callers make, as
// revocationQuota bounds revocations (relayed input responses use one too).
func newLiveQuota(max int, full error) *revocationQuota {
	return &revocationQuota{max: max, full: full, byCaller: map[string]*callerRevocations{}}
}

// reserve takes a place for one more of caller's revocations, or fails
// with errTooManyRevocations. done must be called with whether the
// revocation was recorded, expiring at expiresAt.
func (q *revocationQuota) reserve(caller string, now time.Time) (done func(recorded bool, expiresAt time.Time), err error) {
	return q.reserveUpTo(caller, now, q.max)
}

// reserveUpTo is reserve with a bound of this call's own instead of the
// quota's (a principal's fair share).
func (q *revocationQuota) reserveUpTo(caller string, now time.Time, bound int) (done func(recorded bool, expiresAt time.Time), err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if now.Sub(q.swept) >= sweepEvery {
		q.swept = now
		for key, c := range q.byCaller {
			c.expire(now)
			if len(c.expiries) == 0 && c.pending == 0 {
				delete(q.byCaller, key)
			}
		}
	}
	c := q.byCaller[caller]
	if c == nil {
		c = &callerRevocations{}
		q.byCaller[caller] = c
	}
	c.expire(now)
	if len(c.expiries)+c.pending >= bound {
		return nil, q.full
	}
	c.pending++
	return func(recorded bool, expiresAt time.Time) {
		q.mu.Lock()
		defer q.mu.Unlock()
		c.pending--
		if recorded {
			heap.Push(&c.expiries, expiresAt)
		}
	}, nil
}

// held is how many records caller has live at now or being written.
func (q *revocationQuota) held(caller string, now time.Time) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	c := q.byCaller[caller]
	if c == nil {
		return 0
	}
	c.expire(now)
	return len(c.expiries) + c.pending
}

// expire drops the revocations expired by now.
func (c *callerRevocations) expire(now time.Time) {
	for len(c.expiries) > 0 && c.expiries[0].Before(now) {
		heap.Pop(&c.expiries)
	}
}

type expiryHeap []time.Time

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].Before(h[j]) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(time.Time)) }
func (h *expiryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
