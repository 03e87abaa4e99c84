package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// revocationChannel is the notification channel migration 0003's trigger
// announces revocations on.
const revocationChannel = "switchboard_revocations"

// RevokeSession records a revoked session until it expires.
func (s *Store) RevokeSession(ctx context.Context, digest string, expiresAt time.Time) error {
	return classify(s.revokeSession(ctx, digest, expiresAt))
}

func (s *Store) revokeSession(ctx context.Context, digest string, expiresAt time.Time) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// Under the session's lock, so that no state change of the session
	// runs on a view from before the revocation (updateSessionState).
	if err := lockSession(ctx, tx, digest); err != nil {
		return err
	}
	// The session's state goes with it, in the same statement.
	if _, err := tx.Exec(ctx, `
		WITH dropped AS (DELETE FROM session_states WHERE session_digest = $1)
		INSERT INTO revoked_sessions (session_digest, expires_at) VALUES ($1, $2)
		ON CONFLICT (session_digest) DO UPDATE SET expires_at = greatest(revoked_sessions.expires_at, EXCLUDED.expires_at)`,
		digest, expiresAt); err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	return tx.Commit(ctx)
}

// SessionRevoked reports whether a session is revoked (and not yet past the
// expiry after which it is dead anyway).
func (s *Store) SessionRevoked(ctx context.Context, digest string) (bool, error) {
	var revoked bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM revoked_sessions WHERE session_digest = $1 AND expires_at >= now())`, digest).Scan(&revoked)
	return revoked, classify(err)
}

// Revocations lists the revocations that have not expired.
func (s *Store) Revocations(ctx context.Context) ([]store.Revocation, error) {
	rows, err := s.pool.Query(ctx, `SELECT session_digest, expires_at FROM revoked_sessions WHERE expires_at >= now()`)
	if err != nil {
		return nil, classify(fmt.Errorf("read revocations: %w", err))
	}
	revs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Revocation, error) {
		var r store.Revocation
		err := row.Scan(&r.Digest, &r.ExpiresAt)
		return r, err
	})
	return revs, classify(err)
}

// ListenRevocations LISTENs on the revocation channel (listen).
func (s *Store) ListenRevocations(ctx context.Context, listening func(), revoked func(store.Revocation)) error {
	return s.listen(ctx, revocationChannel, "revocations", listening, func(payload string) {
		// Only the trigger writes here; a payload it did not write is
		// skipped, and the next full read covers the row.
		if rev, err := parseRevocation(payload); err == nil {
			revoked(rev)
		}
	})
}

// listen LISTENs on channel on a connection of its own (a pooled one would
// be held for as long as the listen lasts), calls listening once it
// follows, then notified with each payload, until ctx ends or the
// connection fails; it always returns an error. what names the events in
// it.
func (s *Store) listen(ctx context.Context, channel, what string, listening func(), notified func(payload string)) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return classify(fmt.Errorf("connect: %w", err))
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		return classify(fmt.Errorf("listen: %w", err))
	}
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return classify(fmt.Errorf("wait for %s: %w", what, err))
		}
		notified(n.Payload)
	}
}

// parseRevocation reads the trigger's payload: "<digest> <expiry in
// microseconds since the Unix epoch>".
func parseRevocation(payload string) (store.Revocation, error) {
	digest, micros, ok := strings.Cut(payload, " ")
	us, err := strconv.ParseInt(micros, 10, 64)
	if !ok || err != nil || digest == "" {
		return store.Revocation{}, fmt.Errorf("malformed revocation notification %q", payload)
	}
	return store.Revocation{Digest: digest, ExpiresAt: time.UnixMicro(us)}, nil
}
