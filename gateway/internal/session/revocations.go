package session

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/timestamppb"

	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

// Revocations holds every deleted Legacy session that any replica
// recorded, so that checking a session is a lookup in memory and never a
// call to another service. A background watcher keeps it current from the
// indexer's WatchRevocations stream (every live revocation first, then each
// new one as any gateway records it) and reconnects with backoff when the
// stream breaks. Deleting a session (Revoke) records it here at once and in
// the indexer's database, from where it reaches every other replica.
//
// While the watch is down (the indexer unreachable, or not yet connected
// after start) Revoked answers from what it holds and so fails open: a
// session deleted on another replica meanwhile is still served here until
// the watch is back. The watcher logs when it goes down and comes back,
// and Watching and the switchboard_gateway_revocation_watch_up metric
// expose the state. Sessions are bound to their principal and expire, so
// such a session can only be used by the principal that could simply open
// a new one; refusing every Legacy request while the indexer is down would
// be the larger harm.
type Revocations struct {
	client indexerv1.IndexerServiceClient // nil: local revocations only
	log    *slog.Logger
	now    func() time.Time

	mu      sync.RWMutex
	revoked map[string]time.Time // id digest -> session expiry
	pruned  time.Time

	// watching is true while a stream is open and has delivered its
	// snapshot.
	watching atomic.Bool
	stop     context.CancelFunc
	done     chan struct{}
}

// pruneEvery bounds how often expired revocations are dropped.
const pruneEvery = time.Minute

// NewRevocations keeps the revocations the indexer behind client streams,
// watching from now on; a nil client keeps this replica's own revocations
// only. Close stops the watch.
func NewRevocations(client indexerv1.IndexerServiceClient, log *slog.Logger) *Revocations {
	r := &Revocations{client: client, log: log, now: time.Now, revoked: map[string]time.Time{}, done: make(chan struct{})}
	ctx, stop := context.WithCancel(context.Background())
	r.stop = stop
	if client == nil {
		close(r.done)
		return r
	}
	go func() {
		defer close(r.done)
		r.watch(ctx)
	}()
	return r
}

// Close stops the watch and waits for it to end.
func (r *Revocations) Close() {
	r.stop()
	<-r.done
}

// Revoked reports whether the session with id digest was deleted on any
// replica, as far as this replica has heard; it never waits on the
// network: it is a lookup in what the watch delivered.
func (r *Revocations) Revoked(digest string) bool {
	r.mu.RLock()
	_, known := r.revoked[digest]
	r.mu.RUnlock()
	return known
}

// Revoke records that the session with id digest and expiry was deleted:
// here at once, then in the indexer, whose error it returns.
func (r *Revocations) Revoke(ctx context.Context, digest string, expiry time.Time) error {
	r.remember(digest, expiry)
	if r.client == nil {
		return nil
	}
	_, err := r.client.RevokeSession(ctx, &indexerv1.RevokeSessionRequest{SessionDigest: digest, ExpiresAt: timestamppb.New(expiry)})
	return err
}

// Watching reports whether the watch is up: a stream is open and this
// replica holds every revocation recorded before it opened.
func (r *Revocations) Watching() bool { return r.watching.Load() }

// Len is the number of revocations held.
func (r *Revocations) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.revoked)
}

// RegisterMetrics registers switchboard_gateway_revocation_watch_up (1
// while Watching) and switchboard_gateway_revocations (how many are held)
// with reg.
func (r *Revocations) RegisterMetrics(reg prometheus.Registerer) error {
	up := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchboard_gateway_revocation_watch_up",
		Help: "1 while the session revocation watch on the indexer is up; 0 while Legacy sessions are checked against what this replica already holds (fail open).",
	}, func() float64 {
		if r.Watching() {
			return 1
		}
		return 0
	})
	held := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchboard_gateway_revocations",
		Help: "Deleted Legacy sessions this replica holds until they expire.",
	}, func() float64 { return float64(r.Len()) })
	for _, c := range []prometheus.Collector{up, held} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// remember holds a revocation until its expiry, keeping the later expiry
// of two.
func (r *Revocations) remember(digest string, expiry time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	// Expired ids fail to open anyway; drop them now and then so the map
	// stays bounded by the live deleted sessions.
	if now.Sub(r.pruned) >= pruneEvery {
		for d, exp := range r.revoked {
			if !now.Before(exp) {
				delete(r.revoked, d)
			}
		}
		r.pruned = now
	}
	if !now.Before(expiry) {
		return
	}
	if old, ok := r.revoked[digest]; !ok || expiry.After(old) {
		r.revoked[digest] = expiry
	}
}

// Backoff of the watch's reconnects.
const (
	minWatchBackoff = 100 * time.Millisecond
	maxWatchBackoff = 10 * time.Second
)

// watch follows WatchRevocations until ctx ends, reconnecting with capped,
// jittered exponential backoff.
func (r *Revocations) watch(ctx context.Context) {
	backoff := minWatchBackoff
	// warned is whether the current outage was logged as a warning.
	warned := false
	for ctx.Err() == nil {
		err := r.watchOnce(ctx, func() {
			backoff = minWatchBackoff
			warned = false
		})
		if ctx.Err() != nil {
			return
		}
		r.watching.Store(false)
		if !warned {
			warned = true
			r.log.WarnContext(ctx, "session revocation watch down: serving Legacy sessions without the deletions other replicas record until it reconnects (fail open)", "err", err)
		} else {
			r.log.DebugContext(ctx, "session revocation watch still down", "err", err, "backoff", backoff)
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		backoff = min(backoff*2, maxWatchBackoff)
	}
}

// watchOnce reads one stream until it breaks; connected runs once its
// snapshot is complete.
func (r *Revocations) watchOnce(ctx context.Context, connected func()) error {
	stream, err := r.client.WatchRevocations(ctx, &indexerv1.WatchRevocationsRequest{})
	if err != nil {
		return err
	}
	for {
		msg, err := stream.Recv()
		if err != nil {
			return err
		}
		for _, rev := range msg.GetRevocations() {
			if len(rev.GetSessionDigest()) == 64 && rev.GetExpiresAt().IsValid() {
				r.remember(rev.GetSessionDigest(), rev.GetExpiresAt().AsTime())
			}
		}
		if msg.GetSnapshotComplete() && !r.watching.Swap(true) {
			connected()
			r.log.InfoContext(ctx, "session revocation watch up", "revocations", r.Len())
		}
	}
}
