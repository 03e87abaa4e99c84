// Package revocation keeps every live session revocation in memory and
// streams them to subscribers (the gateways' WatchRevocations streams):
// first all of them, then each new one as any replica records it.
//
// The store announces revocations as they are recorded (PostgreSQL
// LISTEN/NOTIFY, heard by every replica); the hub reads the whole set
// again whenever that listen (re)starts, since announcements may have
// been missed while it was down, and periodically as a safety net.
package revocation

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/indexer/internal/listen"
	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// ErrNotSynced means the hub has not read the revocations yet, so it could
// not give a subscriber all of them.
var ErrNotSynced = errors.New("revocations not read from the store yet")

// subscriberBuffer bounds the revocations queued for one subscriber; one
// that falls this far behind is dropped (it reconnects and starts from a
// fresh snapshot).
const subscriberBuffer = 4096

// Hub is the in-memory set of live revocations and its subscribers.
type Hub struct {
	sessions store.Sessions
	resync   time.Duration
	log      *slog.Logger
	now      func() time.Time
	// resyncNow asks the resync loop for a full read now.
	resyncNow chan struct{}

	mu     sync.Mutex
	live   map[string]time.Time
	synced bool
	subs   map[*subscriber]struct{}
}

type subscriber struct {
	ch chan store.Revocation
}

// New returns a hub reading from sessions; resync is the period of the
// safety-net full read.
func New(sessions store.Sessions, resync time.Duration, log *slog.Logger) *Hub {
	return &Hub{sessions: sessions, resync: resync, log: log, now: time.Now, resyncNow: make(chan struct{}, 1),
		live: map[string]time.Time{}, subs: map[*subscriber]struct{}{}}
}

// Run follows the store until ctx ends: the listen, reconnected with
// backoff, and the full reads.
func (h *Hub) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { h.resyncLoop(ctx) })
	defer wg.Wait()
	listen.Follow(ctx, h.log, "revocation", func(ctx context.Context, listening func()) error {
		return h.sessions.ListenRevocations(ctx, listening, h.Add)
	}, h.requestResync)
}

func (h *Hub) requestResync() {
	select {
	case h.resyncNow <- struct{}{}:
	default: // one is pending already
	}
}

// resyncLoop reads every revocation when asked and every resync period,
// retrying sooner while reads fail.
func (h *Hub) resyncLoop(ctx context.Context) {
	tick := time.NewTicker(h.resync)
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-h.resyncNow:
		}
		err := h.Resync(ctx)
		switch {
		case err == nil:
			failing = false
		case ctx.Err() != nil:
			return
		default:
			// Warn once per outage; retry every second meanwhile.
			if !failing {
				h.log.WarnContext(ctx, "reading revocations failed; retrying", "error", err)
			}
			failing = true
			time.AfterFunc(time.Second, h.requestResync)
		}
	}
}

// Resync reads every live revocation from the store, passes the ones not
// known yet to the subscribers, and forgets the expired ones.
func (h *Hub) Resync(ctx context.Context) error {
	revs, err := h.sessions.Revocations(ctx)
	if err != nil {
		return err
	}
	for _, r := range revs {
		h.Add(r)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.synced = true
	now := h.now()
	for d, exp := range h.live {
		if exp.Before(now) {
			delete(h.live, d)
		}
	}
	return nil
}

// Add records a revocation (heard from the store, or recorded by this
// replica) and passes it on if it is new or extends a known one.
func (h *Hub) Add(r store.Revocation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if old, ok := h.live[r.Digest]; ok && !r.ExpiresAt.After(old) {
		return
	}
	if r.ExpiresAt.Before(h.now()) {
		return
	}
	h.live[r.Digest] = r.ExpiresAt
	for s := range h.subs {
		select {
		case s.ch <- r:
		default:
			// Too far behind: drop it; it reconnects and gets everything
			// in a fresh snapshot.
			delete(h.subs, s)
			close(s.ch)
		}
	}
}

// Live is the number of live revocations held.
func (h *Hub) Live() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.live)
}

// Subscribe returns every live revocation and a channel of those recorded
// from then on, with nothing missed in between. The channel closes if the
// subscriber falls too far behind. cancel ends the subscription. Before
// the first full read it fails with ErrNotSynced: a partial snapshot would
// let a gateway serve sessions revoked elsewhere.
func (h *Hub) Subscribe() (snapshot []store.Revocation, updates <-chan store.Revocation, cancel func(), err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.synced {
		return nil, nil, nil, ErrNotSynced
	}
	now := h.now()
	for d, exp := range h.live {
		if !exp.Before(now) {
			snapshot = append(snapshot, store.Revocation{Digest: d, ExpiresAt: exp})
		}
	}
	s := &subscriber{ch: make(chan store.Revocation, subscriberBuffer)}
	h.subs[s] = struct{}{}
	return snapshot, s.ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[s]; ok {
			delete(h.subs, s)
			close(s.ch)
		}
	}, nil
}
