package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// sessionEventChannel is the channel migration 0005's triggers announce
// session state changes and relayed answers on.
const sessionEventChannel = "switchboard_session_events"

// principalLockSpace seeds the hash that keys the advisory lock that serializes the changes of
// one principal's session states, so that its bounds hold across replicas.
const principalLockSpace int64 = 0x5377_6964_7833

// UpdateSessionState applies one change in a transaction that holds the
// principal's advisory lock and the session's row.
func (s *Store) UpdateSessionState(ctx context.Context, c store.SessionStateChange, limits store.SessionStateLimits) (store.SessionState, error) {
	st, err := s.updateSessionState(ctx, c, limits)
	return st, classify(err)
}

func (s *Store) updateSessionState(ctx context.Context, c store.SessionStateChange, limits store.SessionStateLimits) (store.SessionState, error) {
	if len(c.Subscribe) > limits.URIBytes {
		return store.SessionState{}, &store.SessionStateBoundError{Msg: "resource URI too long", URI: true}
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return store.SessionState{}, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($2, $1))`, principalLockSpace, c.Principal); err != nil {
		return store.SessionState{}, fmt.Errorf("lock: %w", err)
	}
	// The session's lock, which RevokeSession takes too: under READ
	// COMMITTED a deletion committing between the check below and the
	// row's lock would otherwise let this change write the state again.
	if err := lockSession(ctx, tx, c.Digest); err != nil {
		return store.SessionState{}, err
	}
	var gone bool
	if err := tx.QueryRow(ctx, `SELECT $2 <= now() OR EXISTS (SELECT 1 FROM revoked_sessions WHERE session_digest = $1 AND expires_at >= now())`,
		c.Digest, c.ExpiresAt).Scan(&gone); err != nil {
		return store.SessionState{}, fmt.Errorf("check session: %w", err)
	}
	if gone {
		return store.SessionState{}, store.ErrSessionGone
	}
	old, found, err := sessionStateRow(tx.QueryRow(ctx, `SELECT `+sessionStateColumns+` FROM session_states WHERE session_digest = $1 AND expires_at > now() FOR UPDATE`, c.Digest))
	if err != nil {
		return store.SessionState{}, err
	}
	if found && old.Principal != c.Principal {
		// Only the session's own principal can open its id; a gateway
		// naming another is treated as naming a session without state.
		return store.SessionState{}, store.ErrSessionGone
	}
	next := old
	if !found {
		next = store.SessionState{Digest: c.Digest, Principal: c.Principal, ExpiresAt: c.ExpiresAt}
	}
	next.URIs = slices.Clone(old.URIs)
	switch {
	case c.Subscribe != "":
		if slices.Contains(next.URIs, c.Subscribe) {
			return old, nil
		}
		if len(next.URIs) >= limits.Subscriptions {
			return store.SessionState{}, &store.SessionStateBoundError{Msg: "too many resource subscriptions for one session", Subscriptions: true}
		}
		next.URIs = append(next.URIs, c.Subscribe)
	case c.Unsubscribe != "":
		i := slices.Index(next.URIs, c.Unsubscribe)
		if i < 0 {
			return old, nil
		}
		next.URIs = slices.Delete(next.URIs, i, i+1)
	default:
		if found && next.LogLevel == c.LogLevel {
			return old, nil
		}
		next.LogLevel = c.LogLevel
	}
	delta := next.Charge()
	if found {
		delta -= old.Charge()
	}
	if delta > 0 {
		var sessions int
		var bytes int64
		// Only sessions holding state count (one that unsubscribed from
		// everything costs nothing), as on the gateways.
		if err := tx.QueryRow(ctx, `SELECT count(*), coalesce(sum(cost), 0) FROM session_states
			WHERE principal_digest = $1 AND expires_at > now() AND (log_level <> '' OR cardinality(uris) > 0)`,
			c.Principal).Scan(&sessions, &bytes); err != nil {
			return store.SessionState{}, fmt.Errorf("count principal's states: %w", err)
		}
		if !old.Holds() && sessions >= limits.PerPrincipal || bytes+delta > limits.PrincipalBytes {
			return store.SessionState{}, &store.SessionStateBoundError{Msg: "this principal's sessions hold as much state as they may"}
		}
	}
	if next.URIs == nil {
		next.URIs = []string{}
	}
	err = tx.QueryRow(ctx, `
		INSERT INTO session_states (session_digest, principal_digest, log_level, uris, cost, version, expires_at)
		VALUES ($1, $2, $3, $4, $5, nextval('session_state_versions'), $6)
		ON CONFLICT (session_digest) DO UPDATE SET principal_digest = EXCLUDED.principal_digest, log_level = EXCLUDED.log_level,
			uris = EXCLUDED.uris, cost = EXCLUDED.cost, version = EXCLUDED.version, expires_at = EXCLUDED.expires_at
		RETURNING version`,
		next.Digest, next.Principal, next.LogLevel, next.URIs, next.Charge(), next.ExpiresAt).Scan(&next.Version)
	if err != nil {
		return store.SessionState{}, fmt.Errorf("write session state: %w", err)
	}
	return next, tx.Commit(ctx)
}

const sessionStateColumns = `session_digest, principal_digest, log_level, uris, version, expires_at`

func sessionStateRow(row pgx.Row) (store.SessionState, bool, error) {
	var st store.SessionState
	var version int64
	err := row.Scan(&st.Digest, &st.Principal, &st.LogLevel, &st.URIs, &version, &st.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.SessionState{}, false, nil
	}
	if err != nil {
		return store.SessionState{}, false, fmt.Errorf("read session state: %w", err)
	}
	st.Version = uint64(version)
	return st, true, nil
}

// SessionStates lists the live states.
func (s *Store) SessionStates(ctx context.Context) ([]store.SessionState, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+sessionStateColumns+` FROM session_states WHERE expires_at > now()`)
	if err != nil {
		return nil, classify(fmt.Errorf("read session states: %w", err))
	}
	states, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.SessionState, error) {
		st, _, err := sessionStateRow(row)
		return st, err
	})
	return states, classify(err)
}

// SessionStateOf reads one session's state.
func (s *Store) SessionStateOf(ctx context.Context, digest string) (store.SessionState, bool, error) {
	st, found, err := sessionStateRow(s.pool.QueryRow(ctx, `SELECT `+sessionStateColumns+` FROM session_states WHERE session_digest = $1 AND expires_at > now()`, digest))
	return st, found, classify(err)
}

// RelayInputResponse records an answer; the unique key makes the first
// answer to a request the only one, across replicas. The session's lock
// (sessionLockSpace) makes its bounds hold across replicas.
func (s *Store) RelayInputResponse(ctx context.Context, r store.InputResponse, limits store.RelayLimits) (int64, error) {
	id, err := s.relayInputResponse(ctx, r, limits)
	return id, classify(err)
}

func (s *Store) relayInputResponse(ctx context.Context, r store.InputResponse, limits store.RelayLimits) (int64, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := lockSession(ctx, tx, r.SessionDigest); err != nil {
		return 0, err
	}
	var rows int
	var bytes int64
	if err := tx.QueryRow(ctx, `SELECT count(*), coalesce(sum(octet_length(response) + octet_length(request_id)), 0)
		FROM relayed_input_responses WHERE session_digest = $1 AND expires_at > now()`, r.SessionDigest).Scan(&rows, &bytes); err != nil {
		return 0, fmt.Errorf("count session's answers: %w", err)
	}
	if rows >= limits.PerSession || bytes+int64(len(r.Response)+len(r.RequestID)) > limits.SessionBytes {
		return 0, store.ErrRelaysFull
	}
	var id int64
	err = tx.QueryRow(ctx, `
		INSERT INTO relayed_input_responses (owner_replica, session_digest, request_id, response, expires_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (session_digest, request_id) DO NOTHING RETURNING id`,
		r.Owner, r.SessionDigest, r.RequestID, r.Response, r.ExpiresAt).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, store.ErrAlreadyAnswered
	}
	if err != nil {
		return 0, fmt.Errorf("record answer: %w", err)
	}
	return id, tx.Commit(ctx)
}

// sessionLockSpace seeds the hash that keys the advisory lock of one
// session: its state changes, its deletion and its relayed answers take it,
// so that none runs on a view another is changing.
const sessionLockSpace int64 = 0x5377_6964_7834

func lockSession(ctx context.Context, tx pgx.Tx, digest string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($2, $1))`, sessionLockSpace, digest); err != nil {
		return fmt.Errorf("lock session: %w", err)
	}
	return nil
}

// InputResponse reads a recorded answer.
func (s *Store) InputResponse(ctx context.Context, id int64) (store.InputResponse, bool, error) {
	var r store.InputResponse
	err := s.pool.QueryRow(ctx, `SELECT owner_replica, session_digest, request_id, response, expires_at
		FROM relayed_input_responses WHERE id = $1 AND expires_at > now()`, id).
		Scan(&r.Owner, &r.SessionDigest, &r.RequestID, &r.Response, &r.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.InputResponse{}, false, nil
	}
	return r, err == nil, classify(err)
}

// RelayCancellation announces a cancellation on the session event
// channel: "c <session digest> <request id JSON>". A NOTIFY rather than a
// row: a cancellation matters only while its request runs, to whichever
// replica runs it, so there is nothing to keep, to read back, or to purge;
// the payload (at most 2+64+1+256 bytes as the server bounds it) is far
// within NOTIFY's 8000.
func (s *Store) RelayCancellation(ctx context.Context, c store.Cancellation) error {
	if strings.ContainsAny(c.SessionDigest, " ") || c.SessionDigest == "" {
		return fmt.Errorf("relay cancellation: malformed session digest")
	}
	_, err := s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, sessionEventChannel, "c "+c.SessionDigest+" "+c.RequestID)
	return classify(err)
}

// InputResponseIDs lists live answers' ids, for one owner or all.
func (s *Store) InputResponseIDs(ctx context.Context, owner string, afterID int64, limit int) ([]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM relayed_input_responses
		WHERE ($1 = '' OR owner_replica = $1) AND id > $2 AND expires_at > now() ORDER BY id LIMIT $3`, owner, afterID, limit)
	if err != nil {
		return nil, classify(fmt.Errorf("list answers: %w", err))
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	return ids, classify(err)
}

// ListenSessionEvents LISTENs on the session event channel (listen).
func (s *Store) ListenSessionEvents(ctx context.Context, listening func(), stateChanged func(string), answered func(int64), cancelled func(store.Cancellation)) error {
	return s.listen(ctx, sessionEventChannel, "session events", listening, func(payload string) {
		dispatchSessionEvent(payload, stateChanged, answered, cancelled)
	})
}

// dispatchSessionEvent reads a payload: "s <digest>" or "r <id>" (the
// triggers'), or "c <digest> <request id JSON>" (RelayCancellation). A
// payload none of them wrote is skipped (the next full read covers state
// changes).
func dispatchSessionEvent(payload string, stateChanged func(string), answered func(int64), cancelled func(store.Cancellation)) {
	kind, arg, ok := strings.Cut(payload, " ")
	switch {
	case !ok || arg == "":
	case kind == "s":
		stateChanged(arg)
	case kind == "r":
		if id, err := strconv.ParseInt(arg, 10, 64); err == nil {
			answered(id)
		}
	case kind == "c":
		if digest, id, ok := strings.Cut(arg, " "); ok && digest != "" && id != "" {
			cancelled(store.Cancellation{SessionDigest: digest, RequestID: id})
		}
	}
}
