package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/ratelimit"
)

// StateUses makes a sealed request state good for one retry. Any replica
// can open a state, so the record of the states used up must be one every
// replica shares: the indexer's database (IndexerService.ConsumeRequestState),
// asked when a retry arrives, before the backend sees it. Without an
// indexer the record is this replica's own: a state is then used once per
// replica, which is the whole deployment only when there is one replica.
//
// With an indexer, a retry whose state cannot be recorded (the indexer or
// its database unreachable) is refused for now (ErrUnrecorded) and its
// state is left unused, so the client may retry it later: failing closed,
// because accepting it could let a replay reach the backend unseen. The
// record of a state is kept until the state expires.
type StateUses struct {
	client indexerv1.IndexerServiceClient // nil: this replica only
	// releaser gives uses back (only ClusterStateService serves that);
	// nil when client is.
	releaser indexerv1.ClusterStateServiceClient
	now      func() time.Time
	log      *slog.Logger
	// warn limits the warning for uses the indexer could not record: a
	// client can resend a refused retry at any rate.
	warn logLimiter
	// releaseWarn limits the warning for uses that could not be given
	// back.
	releaseWarn logLimiter

	mu     sync.Mutex
	local  map[string]localUse // by id digest
	owners map[string]int      // live entries of local by principal
	pruned time.Time
}

// localUse is one used state in the record kept without an indexer.
type localUse struct {
	until     time.Time // the state's expiry
	principal string
}

// maxLocalStateUses bounds the record without an indexer: each entry is a
// state a client retried within its TTL. Past it, retries are refused
// until entries expire, rather than a state being forgotten early.
const maxLocalStateUses = 100_000

// maxLocalStateUsesPerPrincipal is one principal's share of the record, so
// that no principal can fill it and block everyone's retries; it shrinks
// once half the record is used (ratelimit.FairShare), so that neither
// can a few principals together.
const maxLocalStateUsesPerPrincipal = maxLocalStateUses / 10

// recordWait bounds the wait for the indexer's answer.
const recordWait = 5 * time.Second

// ErrReplayed means the state was used before.
var ErrReplayed = errors.New("request state already used")

// ErrUnrecorded means the use could not be recorded now; the state is not
// used up.
var ErrUnrecorded = errors.New("request state use cannot be recorded now")

// NewStateUses records uses in the indexer behind client and releaser (one
// connection's two services), or, with a nil client, on this replica; log
// gets the warning when the indexer cannot record one.
func NewStateUses(client indexerv1.IndexerServiceClient, releaser indexerv1.ClusterStateServiceClient, log *slog.Logger) *StateUses {
	return &StateUses{client: client, releaser: releaser, now: time.Now, log: log, local: map[string]localUse{}, owners: map[string]int{}}
}

// Release gives back the use Consume just recorded for the state with
// one-time id: for a retry refused before its backend could see it (a
// rate limit), which the client will send again with the same state.
// Best effort: a use that cannot be given back stays used, and the
// client's next retry is refused as a replay (it must start over).
func (u *StateUses) Release(ctx context.Context, id string) {
	sum := sha256.Sum256([]byte(id))
	digest := hex.EncodeToString(sum[:])
	if u.client == nil {
		u.mu.Lock()
		if use, ok := u.local[digest]; ok {
			u.forget(digest, use)
		}
		u.mu.Unlock()
		return
	}
	if u.releaser == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordWait)
	defer cancel()
	if _, err := u.releaser.ReleaseRequestState(ctx, &indexerv1.ReleaseRequestStateRequest{StateDigest: digest}); err != nil && u.releaseWarn.allow(u.now()) {
		u.log.WarnContext(ctx, "a refused retry's requestState could not be given back; the client's next retry of it is refused as a replay (logged at most once a minute)", "err", err)
	}
}

// Consume uses up the state with one-time id, valid until expiresAt, that
// principal (the digest it is sealed to) retries: nil the first time,
// ErrReplayed after, ErrUnrecorded when that cannot be told now.
func (u *StateUses) Consume(ctx context.Context, principal, id string, expiresAt time.Time) error {
	sum := sha256.Sum256([]byte(id))
	digest := hex.EncodeToString(sum[:])
	if u.client == nil {
		return u.consumeLocal(principal, digest, expiresAt)
	}
	ctx, cancel := context.WithTimeout(ctx, recordWait)
	defer cancel()
	// The principal's digest, so that the indexer bounds each principal's
	// share of the records every principal behind this gateway's
	// credential makes.
	resp, err := u.client.ConsumeRequestState(ctx, &indexerv1.ConsumeRequestStateRequest{StateDigest: digest, ExpiresAt: timestamppb.New(expiresAt), PrincipalDigest: principal})
	switch {
	case err != nil:
		// The principal's share of the records full is its own bound,
		// not a failure to report.
		if status.Code(err) != codes.ResourceExhausted && u.warn.allow(u.now()) {
			u.log.WarnContext(ctx, "a retry's requestState could not be recorded as used; retries are refused until it can be (logged at most once a minute)", "err", err)
		}
		return errors.Join(ErrUnrecorded, err)
	case !resp.GetFirstUse():
		return ErrReplayed
	}
	return nil
}

func (u *StateUses) consumeLocal(principal, digest string, expiresAt time.Time) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.now()
	if use, ok := u.local[digest]; ok && now.Before(use.until) {
		return ErrReplayed
	}
	full := func() bool {
		return len(u.local) >= maxLocalStateUses ||
			u.owners[principal] >= ratelimit.FairShare(maxLocalStateUsesPerPrincipal, len(u.local)+1, maxLocalStateUses)
	}
	if full() {
		// A full record is swept at most once a second, so refused
		// retries stay cheap.
		if now.Sub(u.pruned) < time.Second {
			return ErrUnrecorded
		}
		u.pruned = now
		for d, use := range u.local {
			if !now.Before(use.until) {
				u.forget(d, use)
			}
		}
		if full() {
			return ErrUnrecorded
		}
	}
	if old, ok := u.local[digest]; ok {
		u.forget(digest, old)
	}
	u.local[digest] = localUse{until: expiresAt, principal: principal}
	u.owners[principal]++
	return nil
}

// forget drops one entry of the local record.
func (u *StateUses) forget(digest string, use localUse) {
	delete(u.local, digest)
	if u.owners[use.principal]--; u.owners[use.principal] <= 0 {
		delete(u.owners, use.principal)
	}
}
