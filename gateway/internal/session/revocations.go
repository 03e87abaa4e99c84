package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboard-mcp/switchboard/services/follow"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

// Revocations holds every deleted Legacy session that any replica
// recorded, so that checking a session is a lookup in memory and never a
// call to another service. A background watcher keeps it current from the
// indexer's WatchRevocations stream (every live revocation first, then each
// new one as any gateway records it) and reconnects with backoff when the
// stream breaks. Deleting a session (Revoke) records it here at once; a
// background publisher then records it in the indexer's database, from
// where it reaches every other replica, retrying with backoff while the
// indexer cannot be reached, until it succeeds or the session expires.
// Neither a check nor a deletion ever waits on the indexer.
//
// While the watch is down (the indexer unreachable, or not yet connected
// after start) Revoked answers from what it holds and so fails open: a
// session deleted on another replica meanwhile is still served here until
// the watch is back, as is a session deleted here on the other replicas
// until the publisher gets through. The watcher logs when it goes down and
// comes back, and Watching, Pending and the
// switchboard_gateway_revocation_watch_up and
// switchboard_gateway_revocations_pending metrics expose the state.
// Sessions are bound to their principal and expire, so such a session can
// only be used by the principal that could simply open a new one; refusing
// every Legacy request while the indexer is down would be the larger harm.
//
// What this replica records itself is bounded (RevocationLimits): in
// total, and per principal, so that one principal opening and deleting
// sessions cannot fill it for everyone. Revocations from the watch are
// always held: the indexer bounds what it keeps, and dropping one would
// serve a deleted session.
type Revocations struct {
	client indexerv1.IndexerServiceClient // nil: local revocations only
	log    *slog.Logger
	now    func() time.Time
	limits RevocationLimits

	// onRevoked is told of revocations the watch brings (OnRevoked).
	onRevoked atomic.Pointer[func(digest string)]

	mu      sync.RWMutex
	revoked map[digestKey]revocation
	// local counts the revocations this replica recorded, in total and by
	// principal digest.
	local       int
	byPrincipal map[string]*deletions
	// pending are this replica's revocations the indexer has not confirmed.
	pending map[digestKey]time.Time
	pruned  time.Time

	// watching is true while a stream is open and has delivered its
	// snapshot.
	watching atomic.Bool
	// publish wakes the publisher.
	publish chan struct{}
	stop    context.CancelFunc
	done    sync.WaitGroup
}

// RevocationLimits bound the deletions one replica records itself.
type RevocationLimits struct {
	// Total is how many it holds at once (gateway.sessions.maxDeleted).
	Total int
	// PerPrincipal is how many of one principal it holds at once
	// (gateway.sessions.maxPerPrincipal).
	PerPrincipal int
}

// Errors of a deletion past a bound: the session stays usable until it
// expires.
var (
	ErrTooManyDeleted        = errors.New("this replica records as many deleted sessions as it may")
	ErrPrincipalDeletedLimit = errors.New("this replica records as many deleted sessions of this principal as it may")
)

// digestKey is a session id digest (IDDigest) as bytes, half the size of
// its hex.
type digestKey [sha256.Size]byte

func parseDigest(digest string) (digestKey, bool) {
	var k digestKey
	if hex.DecodedLen(len(digest)) != len(k) {
		return k, false
	}
	_, err := hex.Decode(k[:], []byte(digest))
	return k, err == nil
}

// revocation is one deleted session: when it expires (unix seconds, the
// precision of a session's expiry) and, when this replica recorded it, its
// principal's count.
type revocation struct {
	expires int64
	owner   *deletions
}

// deletions counts the revocations of one principal this replica holds.
type deletions struct {
	principal string
	n         int
}

// pruneEvery bounds how often expired revocations are dropped.
const pruneEvery = time.Minute

// publishTimeout bounds one attempt to record a revocation in the indexer.
const publishTimeout = 2 * time.Second

// NewRevocations keeps the revocations the indexer behind client streams,
// watching from now on; a nil client keeps this replica's own revocations
// only. Close stops the watch.
func NewRevocations(client indexerv1.IndexerServiceClient, limits RevocationLimits, log *slog.Logger) *Revocations {
	r := &Revocations{client: client, log: log, now: time.Now, limits: limits, revoked: map[digestKey]revocation{},
		byPrincipal: map[string]*deletions{}, pending: map[digestKey]time.Time{}, publish: make(chan struct{}, 1)}
	ctx, stop := context.WithCancel(context.Background())
	r.stop = stop
	if client == nil {
		return r
	}
	r.done.Add(2)
	go func() {
		defer r.done.Done()
		r.watch(ctx)
	}()
	go func() {
		defer r.done.Done()
		r.publisher(ctx)
	}()
	return r
}

// Close stops the watch and the publisher, then sends the deletions the
// indexer has not recorded yet until ctx ends: a replica stopping while
// the indexer is briefly away (both restarted in one rolling upgrade)
// still hands them on, and a deletion whose publication the stop cut
// short is sent again. Those left when ctx ends were made on this
// replica only, and end with it.
func (r *Revocations) Close(ctx context.Context) {
	r.stop()
	r.done.Wait()
	if r.client == nil {
		return
	}
	for backoff := minWatchBackoff; r.Pending() > 0; backoff = min(backoff*2, maxDrainBackoff) {
		if r.publishPending(ctx) == nil {
			return
		}
		select {
		case <-ctx.Done():
			r.log.Warn("gateway stopping with session deletions the indexer has not recorded; other replicas serve those sessions until they expire", "pending", r.Pending())
			return
		case <-time.After(backoff):
		}
	}
}

// Revoked reports whether the session with id digest was deleted on any
// replica, as far as this replica has heard; it never waits on the
// network: it is a lookup in what the watch delivered.
func (r *Revocations) Revoked(digest string) bool {
	k, ok := parseDigest(digest)
	if !ok {
		return false
	}
	r.mu.RLock()
	_, known := r.revoked[k]
	r.mu.RUnlock()
	return known
}

// Revoke records that the session with id digest, of the principal with
// digest principal, was deleted and expires at expiry: here at once, and
// in the indexer in the background. It never waits on the network; it
// fails only past a bound (ErrTooManyDeleted, ErrPrincipalDeletedLimit),
// and then records nothing.
func (r *Revocations) Revoke(digest, principal string, expiry time.Time) error {
	k, ok := parseDigest(digest)
	if !ok {
		return fmt.Errorf("session: %q is not a session id digest", digest)
	}
	now := r.now()
	if !now.Before(expiry) {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.Sub(r.pruned) >= pruneEvery {
		r.prune(now)
	}
	if _, ok := r.revoked[k]; ok {
		return nil
	}
	owner := r.byPrincipal[principal]
	switch {
	case owner != nil && owner.n >= r.limits.PerPrincipal:
		return ErrPrincipalDeletedLimit
	case r.local >= r.limits.Total:
		return ErrTooManyDeleted
	}
	if owner == nil {
		owner = &deletions{principal: strings.Clone(principal)}
		r.byPrincipal[owner.principal] = owner
	}
	owner.n++
	r.local++
	r.revoked[k] = revocation{expires: expiry.Unix(), owner: owner}
	if r.client != nil {
		r.pending[k] = expiry
		select {
		case r.publish <- struct{}{}:
		default:
		}
	}
	return nil
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

// Pending is the number of this replica's revocations the indexer has not
// confirmed yet.
func (r *Revocations) Pending() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.pending)
}

// RegisterMetrics registers switchboard_gateway_revocation_watch_up (1
// while Watching), switchboard_gateway_revocations (how many are held) and
// switchboard_gateway_revocations_pending (how many of this replica's are
// not yet recorded in the indexer) with reg.
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
	pending := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchboard_gateway_revocations_pending",
		Help: "Legacy sessions deleted on this replica that the indexer has not recorded yet; other replicas serve them until it has.",
	}, func() float64 { return float64(r.Pending()) })
	for _, c := range []prometheus.Collector{up, held, pending} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// remember holds a revocation the watch delivered until its expiry,
// keeping the later expiry of two; it reports whether the session was not
// known deleted here before.
func (r *Revocations) remember(k digestKey, expiry time.Time) (fresh bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if now.Sub(r.pruned) >= pruneEvery {
		r.prune(now)
	}
	if !now.Before(expiry) {
		return false
	}
	old, ok := r.revoked[k]
	if !ok || expiry.Unix() > old.expires {
		old.expires = expiry.Unix()
		r.revoked[k] = old
	}
	return !ok
}

// OnRevoked has f called with the digest of each session the watch
// reports deleted that was not known deleted here, after it is recorded:
// the gateway ends the session's requests and GET streams on this
// replica (Local.EndSession). Revocations heard before f is set (at
// start, when no stream is open) are not reported.
func (r *Revocations) OnRevoked(f func(digest string)) { r.onRevoked.Store(&f) }

// prune drops expired revocations, so the map stays bounded by the live
// deleted sessions (expired ids fail to open anyway). Call with r.mu held.
func (r *Revocations) prune(now time.Time) {
	r.pruned = now
	for k, rev := range r.revoked {
		if now.Unix() < rev.expires {
			continue
		}
		delete(r.revoked, k)
		delete(r.pending, k)
		if rev.owner == nil {
			continue
		}
		r.local--
		if rev.owner.n--; rev.owner.n == 0 {
			delete(r.byPrincipal, rev.owner.principal)
		}
	}
}

// Backoff of the watch's reconnects.
const (
	minWatchBackoff = 100 * time.Millisecond
	maxWatchBackoff = 10 * time.Second
	// maxDrainBackoff caps the pause between attempts while a stopping
	// replica sends its last deletions: it has seconds left, not minutes.
	maxDrainBackoff = time.Second
)

// watch follows WatchRevocations until ctx ends.
func (r *Revocations) watch(ctx context.Context) {
	follow.Run(ctx, follow.Streams, r.watchOnce, func(err error, first bool, backoff time.Duration) {
		r.watching.Store(false)
		if first {
			r.log.WarnContext(ctx, "session revocation watch down: serving Legacy sessions without the deletions other replicas record until it reconnects (fail open)", "err", err)
		} else {
			r.log.DebugContext(ctx, "session revocation watch still down", "err", err, "backoff", backoff)
		}
	})
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
			if k, ok := parseDigest(rev.GetSessionDigest()); ok && rev.GetExpiresAt().IsValid() {
				if r.remember(k, rev.GetExpiresAt().AsTime()) {
					if f := r.onRevoked.Load(); f != nil {
						(*f)(rev.GetSessionDigest())
					}
				}
			}
		}
		if msg.GetSnapshotComplete() && !r.watching.Swap(true) {
			connected()
			// The indexer answers again: what waits for it goes now.
			r.wakePublisher()
			r.log.InfoContext(ctx, "session revocation watch up", "revocations", r.Len())
		}
	}
}

func (r *Revocations) wakePublisher() {
	select {
	case r.publish <- struct{}{}:
	default:
	}
}

// publisher records this replica's revocations in the indexer as they
// come, each attempt bounded by publishTimeout; while the indexer fails
// it retries with capped, jittered exponential backoff. A revocation
// leaves pending once recorded, or when its session expires.
func (r *Revocations) publisher(ctx context.Context) {
	backoff := minWatchBackoff
	warned := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.publish:
		}
		for {
			err := r.publishPending(ctx)
			if err == nil || ctx.Err() != nil {
				if warned && err == nil {
					r.log.InfoContext(ctx, "session deletions recorded in the indexer again")
				}
				backoff, warned = minWatchBackoff, false
				break
			}
			if !warned {
				warned = true
				r.log.WarnContext(ctx, "session deletions not recorded in the indexer yet; other replicas serve those sessions until they are (retrying)", "pending", r.Pending(), "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff/2 + rand.N(backoff/2+1)):
			}
			backoff = min(backoff*2, maxWatchBackoff)
		}
	}
}

// publishPending sends every pending revocation, stopping at the first
// failure.
func (r *Revocations) publishPending(ctx context.Context) error {
	r.mu.Lock()
	now := r.now()
	batch := make(map[digestKey]time.Time, len(r.pending))
	for k, expiry := range r.pending {
		if now.Before(expiry) {
			batch[k] = expiry
		} else {
			delete(r.pending, k)
		}
	}
	r.mu.Unlock()
	for k, expiry := range batch {
		actx, cancel := context.WithTimeout(ctx, publishTimeout)
		_, err := r.client.RevokeSession(actx, &indexerv1.RevokeSessionRequest{SessionDigest: hex.EncodeToString(k[:]), ExpiresAt: timestamppb.New(expiry)})
		cancel()
		if err != nil && retryable(err) {
			return err
		}
		if err != nil {
			// The indexer refuses this one (an invalid request, a
			// credential without the right): asking again cannot help.
			r.log.WarnContext(ctx, "the indexer refused a session deletion; other replicas serve that session until it expires", "err", err)
		}
		r.mu.Lock()
		delete(r.pending, k)
		r.mu.Unlock()
	}
	return nil
}

// retryable reports whether a failed RevokeSession may succeed later: the
// indexer was unreachable, slow or overloaded, rather than refusing.
func retryable(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.OutOfRange, codes.FailedPrecondition, codes.PermissionDenied, codes.Unauthenticated, codes.Unimplemented, codes.AlreadyExists:
		return false
	}
	return true
}
