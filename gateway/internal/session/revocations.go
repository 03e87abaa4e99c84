package session

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

// Revocations records deleted sessions where every replica sees them (the
// indexer's database) and keeps a local cache of what it learned: a revoked
// id stays revoked until it would have expired anyway.
//
// When the indexer cannot be reached, Check fails open: the session is
// served and a warning is logged. Sessions are bound to their principal and
// expire, so a deleted-but-not-yet-recorded session can only ever be used by
// the same principal that could simply open a new one; refusing every Legacy
// request while the indexer is down would be the larger harm.
type Revocations struct {
	client indexerv1.IndexerServiceClient // nil: local revocations only
	log    *slog.Logger
	now    func() time.Time

	mu      sync.Mutex
	revoked map[string]time.Time // id digest -> session expiry
}

// NewRevocations uses client (which may be nil) as the shared store.
func NewRevocations(client indexerv1.IndexerServiceClient, log *slog.Logger) *Revocations {
	return &Revocations{client: client, log: log, now: time.Now, revoked: map[string]time.Time{}}
}

// Revoke records that the session with id digest and expiry was deleted. It
// returns the shared store's error, after recording the revocation locally.
func (r *Revocations) Revoke(ctx context.Context, digest string, expiry time.Time) error {
	r.remember(digest, expiry)
	if r.client == nil {
		return nil
	}
	_, err := r.client.RevokeSession(ctx, &indexerv1.RevokeSessionRequest{SessionDigest: digest, ExpiresAt: timestamppb.New(expiry)})
	return err
}

// Revoked reports whether the session was deleted on any replica.
func (r *Revocations) Revoked(ctx context.Context, digest string, expiry time.Time) bool {
	r.mu.Lock()
	_, known := r.revoked[digest]
	r.mu.Unlock()
	if known {
		return true
	}
	if r.client == nil {
		return false
	}
	resp, err := r.client.CheckSession(ctx, &indexerv1.CheckSessionRequest{SessionDigest: digest})
	if err != nil {
		if ctx.Err() == nil {
			r.log.WarnContext(ctx, "session revocation check failed; serving the session (fail open)", "err", err)
		}
		return false
	}
	if resp.GetRevoked() {
		r.remember(digest, expiry)
	}
	return resp.GetRevoked()
}

func (r *Revocations) remember(digest string, expiry time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	// Expired ids fail to open anyway; prune them so the cache stays bounded
	// by the number of live deleted sessions.
	for d, exp := range r.revoked {
		if !now.Before(exp) {
			delete(r.revoked, d)
		}
	}
	r.revoked[digest] = expiry
}
