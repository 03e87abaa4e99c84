// Package store is the indexer's PostgreSQL search index.
//
// Tool documents are stored once, content-addressed by the SHA-256 of their
// name, description and input schema. A scope is one distinct tool view (the
// aggregator's tools_digest): principals whose views are equal share it, and
// it references the documents it contains. Searches rank only the rows of
// one scope, reached through the (scope_id, doc_id) primary key of the
// membership table, so their cost follows the scope's size, not the index's.
package store

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrScopeNotFound means the scope does not exist (never built, or
// garbage-collected since it was looked up).
var ErrScopeNotFound = errors.New("scope not found")

// UnavailableError wraps an error that means the database cannot be
// reached; callers may retry later.
type UnavailableError struct{ Err error }

func (e *UnavailableError) Error() string { return "database unavailable: " + e.Err.Error() }
func (e *UnavailableError) Unwrap() error { return e.Err }

// Store is the search index.
type Store struct {
	pool *pgxpool.Pool
}

// Open connects a pool to url with SQL tracing. It does not wait for the
// database: connections are made on first use.
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	cfg.ConnConfig.Tracer = tracer{}
	// Fail fast when the database is down, so a search answers
	// UNAVAILABLE promptly instead of hanging for the client's deadline.
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("create pool: %w", err)
	}
	return &Store{pool: pool}, nil
}

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// Pool exposes the pool to tests and benchmarks in this module.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Tool is one tool of a view, as the aggregator lists it.
type Tool struct {
	Name            string
	Description     string
	InputSchemaJSON string
	// DefinitionJSON is the complete MCP tool object; its size estimates
	// the tokens the tool costs in a tools/list answer. Optional.
	DefinitionJSON string
}

// sanitized drops NUL characters, which are valid UTF-8 (and so may come
// from any backend) but which PostgreSQL text cannot hold; one such tool
// must not fail the build of a whole scope.
func (t Tool) sanitized() Tool {
	clean := func(s string) string { return strings.ReplaceAll(s, "\x00", "") }
	return Tool{Name: clean(t.Name), Description: clean(t.Description), InputSchemaJSON: clean(t.InputSchemaJSON), DefinitionJSON: t.DefinitionJSON}
}

// Scope describes a built scope.
type Scope struct {
	ID             int64
	Digest         string
	CatalogVersion uint64
	ToolCount      int
	BaselineTokens int64
}

// classify marks connection-level failures as UnavailableError.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08 is connection exception; 57P0x is the server shutting
		// down or unable to accept connections.
		if strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P") {
			return &UnavailableError{Err: err}
		}
		return err
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) || pgconn.SafeToRetry(err) || isNetError(err) {
		return &UnavailableError{Err: err}
	}
	return err
}

// LookupScope returns the scope for digest and records that it is in use,
// or ErrScopeNotFound.
func (s *Store) LookupScope(ctx context.Context, digest string) (Scope, error) {
	sc := Scope{Digest: digest}
	// The touch is throttled so that frequent lookups do not write on every
	// call; garbage collection only needs minute resolution.
	err := s.pool.QueryRow(ctx, `
		WITH touched AS (
			UPDATE scopes SET last_used_at = now()
			WHERE tools_digest = $1 AND last_used_at < now() - interval '1 minute'
		)
		SELECT id, catalog_version, tool_count, baseline_tokens FROM scopes WHERE tools_digest = $1`,
		digest).Scan(&sc.ID, &sc.CatalogVersion, &sc.ToolCount, &sc.BaselineTokens)
	if errors.Is(err, pgx.ErrNoRows) {
		return Scope{}, ErrScopeNotFound
	}
	if err != nil {
		return Scope{}, classify(fmt.Errorf("look up scope: %w", err))
	}
	return sc, nil
}

// Advisory lock keys. Builds hold gcLockKey shared and GC holds it
// exclusively, so a collection never deletes a document between a build's
// upsert and its membership insert.
const (
	migrateLockKey int64 = 0x5377_6964_7831 // "Swidx1"
	gcLockKey      int64 = 0x5377_6964_7832
)

// BuildScope stores the scope for digest with tools in one transaction and
// reports whether this call built it. Concurrent builders of the same
// digest (in this process or other replicas) serialize on an advisory
// lock; the later ones find the scope built and return it.
func (s *Store) BuildScope(ctx context.Context, digest string, catalogVersion uint64, tools []Tool) (Scope, bool, error) {
	sc, built, err := s.buildScope(ctx, digest, catalogVersion, tools)
	return sc, built, classify(err)
}

func (s *Store) buildScope(ctx context.Context, digest string, catalogVersion uint64, tools []Tool) (Scope, bool, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Scope{}, false, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared($1), pg_advisory_xact_lock(hashtextextended($2, 0))`, gcLockKey, digest); err != nil {
		return Scope{}, false, fmt.Errorf("lock scope: %w", err)
	}
	sc := Scope{Digest: digest}
	err = tx.QueryRow(ctx, `SELECT id, catalog_version, tool_count, baseline_tokens FROM scopes WHERE tools_digest = $1`, digest).
		Scan(&sc.ID, &sc.CatalogVersion, &sc.ToolCount, &sc.BaselineTokens)
	if err == nil {
		return sc, false, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return Scope{}, false, fmt.Errorf("check scope: %w", err)
	}

	// The tools go in through COPY into a transaction-local staging table:
	// for thousands of tools it is several times faster than binding them
	// as arrays.
	if _, err := tx.Exec(ctx, `
		CREATE TEMP TABLE staged_tools (
			content_hash bytea, name text, description text, input_schema_json text,
			name_words text, name_key text, param_text text, json_bytes integer
		) ON COMMIT DROP`); err != nil {
		return Scope{}, false, fmt.Errorf("stage tools: %w", err)
	}
	rows := make([][]any, len(tools))
	var totalBytes int64
	for i, t := range tools {
		t = t.sanitized()
		schema := t.InputSchemaJSON
		if schema == "" {
			schema = `{"type":"object"}`
		}
		h := sha256.New()
		for _, part := range []string{t.Name, t.Description, schema} {
			h.Write([]byte(part))
			h.Write([]byte{0})
		}
		size := definitionBytes(t, schema)
		totalBytes += int64(size)
		rows[i] = []any{h.Sum(nil), t.Name, t.Description, schema, nameWords(t.Name), nameKey(t.Name), paramText(schema), int32(size)}
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"staged_tools"},
		[]string{"content_hash", "name", "description", "input_schema_json", "name_words", "name_key", "param_text", "json_bytes"},
		pgx.CopyFromRows(rows)); err != nil {
		return Scope{}, false, fmt.Errorf("stage tools: %w", err)
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO tool_documents (content_hash, name, description, input_schema_json, name_words, name_key, param_text, json_bytes)
		SELECT DISTINCT ON (content_hash) * FROM staged_tools
		ON CONFLICT (content_hash) DO NOTHING`); err != nil {
		return Scope{}, false, fmt.Errorf("store documents: %w", err)
	}
	sc.CatalogVersion, sc.ToolCount, sc.BaselineTokens = catalogVersion, len(tools), totalBytes/4
	if err := tx.QueryRow(ctx, `
		INSERT INTO scopes (tools_digest, catalog_version, tool_count, baseline_tokens)
		VALUES ($1, $2, $3, $4) RETURNING id`,
		digest, int64(catalogVersion), len(tools), sc.BaselineTokens).Scan(&sc.ID); err != nil {
		return Scope{}, false, fmt.Errorf("store scope: %w", err)
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO scope_tools (scope_id, doc_id)
		SELECT DISTINCT $1::bigint, d.id FROM staged_tools s
		JOIN tool_documents d ON d.content_hash = s.content_hash`, sc.ID); err != nil {
		return Scope{}, false, fmt.Errorf("store scope members: %w", err)
	}
	// ts_stat takes the text of a query; the scope id is an integer this
	// code produced, never caller input.
	if _, err := tx.Exec(ctx, fmt.Sprintf(`
		INSERT INTO scope_lexemes (scope_id, lexeme, ndoc)
		SELECT %d, word, ndoc FROM ts_stat('SELECT d.tsv FROM scope_tools st JOIN tool_documents d ON d.id = st.doc_id WHERE st.scope_id = %d')`,
		sc.ID, sc.ID)); err != nil {
		return Scope{}, false, fmt.Errorf("store scope statistics: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE index_counters SET value = value + 1 WHERE name = 'scope_builds'`); err != nil {
		return Scope{}, false, fmt.Errorf("count build: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return Scope{}, false, fmt.Errorf("commit scope: %w", err)
	}
	return sc, true, nil
}

// nameKey is the name lower-cased with every separator removed, cut to
// maxNameKeyRunes: trigram similarity costs time in proportion to it, and
// no real tool name is longer.
func nameKey(name string) string {
	key := []rune(strings.Join(splitWords(name), ""))
	return string(key[:min(len(key), maxNameKeyRunes)])
}

const maxNameKeyRunes = 256

// definitionBytes is the size of the tool as a tools/list entry.
func definitionBytes(t Tool, schema string) int {
	if t.DefinitionJSON != "" {
		return len(t.DefinitionJSON)
	}
	b, _ := json.Marshal(struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		InputSchema json.RawMessage `json:"inputSchema"`
	}{t.Name, t.Description, json.RawMessage(schema)})
	if len(b) == 0 { // schema was not valid JSON
		return len(t.Name) + len(t.Description) + len(schema) + 40
	}
	return len(b)
}

// CollectGarbage deletes scopes unused for longer than retention, then
// documents no scope references. It returns how many of each it deleted.
func (s *Store) CollectGarbage(ctx context.Context, retention time.Duration) (scopes, docs int64, err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, 0, classify(fmt.Errorf("begin: %w", err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, gcLockKey); err != nil {
		return 0, 0, classify(fmt.Errorf("lock: %w", err))
	}
	tag, err := tx.Exec(ctx, `DELETE FROM scopes WHERE last_used_at < now() - make_interval(secs => $1)`, retention.Seconds())
	if err != nil {
		return 0, 0, classify(fmt.Errorf("delete scopes: %w", err))
	}
	scopes = tag.RowsAffected()
	tag, err = tx.Exec(ctx, `DELETE FROM tool_documents d WHERE NOT EXISTS (SELECT 1 FROM scope_tools st WHERE st.doc_id = d.id)`)
	if err != nil {
		return 0, 0, classify(fmt.Errorf("delete documents: %w", err))
	}
	docs = tag.RowsAffected()
	if _, err := tx.Exec(ctx, `DELETE FROM revoked_sessions WHERE expires_at < now()`); err != nil {
		return 0, 0, classify(fmt.Errorf("purge sessions: %w", err))
	}
	return scopes, docs, classify(tx.Commit(ctx))
}

// Stats are index counts.
type Stats struct {
	Documents, Scopes, ScopeBuilds uint64
}

// Stats counts documents, scopes and builds.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	err := s.pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM tool_documents), (SELECT count(*) FROM scopes),
		       (SELECT value FROM index_counters WHERE name = 'scope_builds')`).
		Scan(&st.Documents, &st.Scopes, &st.ScopeBuilds)
	return st, classify(err)
}

// RevokeSession records a revoked session until it expires.
func (s *Store) RevokeSession(ctx context.Context, digest string, expiresAt time.Time) error {
	_, err := s.pool.Exec(ctx, `
		INSERT INTO revoked_sessions (session_digest, expires_at) VALUES ($1, $2)
		ON CONFLICT (session_digest) DO UPDATE SET expires_at = greatest(revoked_sessions.expires_at, EXCLUDED.expires_at)`,
		digest, expiresAt)
	return classify(err)
}

// SessionRevoked reports whether a session is revoked (and not yet past the
// expiry after which it is dead anyway).
func (s *Store) SessionRevoked(ctx context.Context, digest string) (bool, error) {
	var revoked bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM revoked_sessions WHERE session_digest = $1 AND expires_at >= now())`, digest).Scan(&revoked)
	return revoked, classify(err)
}
