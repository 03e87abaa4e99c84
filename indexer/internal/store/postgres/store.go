// Package postgres is the indexer's store on PostgreSQL.
//
// Documents live in tool_documents, content-addressed, with a weighted
// tsvector PostgreSQL derives from the name words, the description and the
// parameter text. A scope is a row of scopes with its members in
// scope_tools (primary key (scope_id, doc_id)) and the document frequency
// of each of its lexemes in scope_lexemes. Revoked sessions live in
// revoked_sessions; a trigger announces each one on a notification
// channel, which ListenRevocations follows. The request states gateways
// accepted live in consumed_request_states, the aggregators' tasks in tasks
// (tasks.go).
//
// A search is ranked in this process (see search.go): a scope never
// changes once built, so its documents, with the lexemes and weights
// PostgreSQL analysed them into, are read once and kept; PostgreSQL then
// only stems the words of a query, and a search costs the same whatever
// the index holds.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard-mcp/switchboard/services/config"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// Store is the PostgreSQL store.
type Store struct {
	pool  *pgxpool.Pool
	cache *scopeCache
	stems *stemCache
	// migrationLockTimeout is Options.MigrationLockTimeout (migrate.go).
	migrationLockTimeout time.Duration
}

var _ store.Store = (*Store)(nil)

// Options tune a store.
type Options struct {
	// CachedDocuments bounds the distinct documents of the scopes kept in
	// memory for searching (indexer.scopeCache.documents' default when 0).
	// The scope being searched is kept whatever its size.
	CachedDocuments int
	// CachedMemberships bounds the sum of the sizes of the scopes kept in
	// memory (indexer.scopeCache.memberships' default when 0): a document
	// in three of them counts three times. Each membership costs about a
	// kilobyte (the document's postings, its vector of meaning, its
	// places), each document about three more (docs/operations.md).
	CachedMemberships int
	// MigrationLockTimeout bounds how long a migration waits for a lock on
	// a table it changes (defaultMigrationLockTimeout when 0).
	MigrationLockTimeout time.Duration
}

// CacheStats reports what the cache of scopes searched from memory holds
// and has done (the indexer's scope cache metrics).
func (s *Store) CacheStats() CacheStats { return s.cache.stats() }

// CheckURL reports whether Open could parse url (its form only: nothing is
// dialled). The error names the key, never the URL: pgx's error quotes it
// (all but its password), and the URL is usually a secret of its own
// (${DATABASE_URL}).
func CheckURL(url string) error {
	if _, err := pgxpool.ParseConfig(url); err != nil {
		return &config.KeyError{Key: "indexer.database", Err: errors.New("not a PostgreSQL URL or connection string (postgres://user:password@host:port/database)")}
	}
	return nil
}

// Open connects a pool to url with SQL tracing. It does not wait for the
// database: connections are made on first use.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
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
	if opts.CachedDocuments <= 0 {
		opts.CachedDocuments = config.DefaultScopeCacheDocuments
	}
	if opts.CachedMemberships <= 0 {
		opts.CachedMemberships = config.DefaultScopeCacheMemberships
	}
	if opts.MigrationLockTimeout <= 0 {
		opts.MigrationLockTimeout = defaultMigrationLockTimeout
	}
	return &Store{pool: pool, cache: newScopeCache(opts.CachedDocuments, opts.CachedMemberships), stems: newStemCache(stemCacheBytes),
		migrationLockTimeout: opts.MigrationLockTimeout}, nil
}

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// Ping checks that PostgreSQL answers.
func (s *Store) Ping(ctx context.Context) error { return classify(s.pool.Ping(ctx)) }

// Pool exposes the pool to tests and benchmarks in this module.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// classify marks connection-level failures as store.UnavailableError.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08 is connection exception; 57P0x is the server shutting
		// down or unable to accept connections.
		if strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P") {
			return &store.UnavailableError{Err: err}
		}
		return err
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) || pgconn.SafeToRetry(err) || isNetError(err) {
		return &store.UnavailableError{Err: err}
	}
	return err
}

// Advisory lock keys. Builds hold gcLockKey shared and GC holds it
// exclusively, so a collection never deletes a document between a build's
// upsert and its membership insert.
const (
	migrateLockKey int64 = 0x5377_6964_7831 // "Swidx1"
	gcLockKey      int64 = 0x5377_6964_7832
)

// analysisVersion names how a build analyses tools into documents
// (store.Tool.Document). It changes when the analysis does, so that an
// upgraded indexer builds a view's scope again instead of reusing one
// whose documents were analysed the old way; the old scopes, unused, go
// with garbage collection. 2: the backend's own name of a prefixed tool is
// indexed too. 3: a tool of its MCP App alone (visibility without
// "model") is left out of the scope. 4: a document carries the tool's
// title, annotations and output schema (migration 0014; the scopes
// before it, of documents without them, are found by the same view
// digests, and an older replica serving on during a rollout stores more).
const analysisVersion = "4"

// scopeKey is what a scope is stored under: its view's digest, for one
// analysisVersion. Version 1 stored the bare digest.
func scopeKey(digest string) string { return "a" + analysisVersion + ":" + digest }

// LookupScope returns the scope for digest and records that it is in use,
// or store.ErrScopeNotFound.
func (s *Store) LookupScope(ctx context.Context, digest string) (store.Scope, error) {
	sc := store.Scope{Digest: digest}
	var version int64
	// The touch is throttled so that frequent lookups do not write on every
	// call; garbage collection only needs minute resolution.
	err := s.pool.QueryRow(ctx, `
		WITH touched AS (
			UPDATE scopes SET last_used_at = now()
			WHERE tools_digest = $1 AND last_used_at < now() - interval '1 minute'
		)
		SELECT id, catalog_version, tool_count, baseline_tokens FROM scopes WHERE tools_digest = $1`,
		scopeKey(digest)).Scan(&sc.ID, &version, &sc.ToolCount, &sc.BaselineTokens)
	sc.CatalogVersion = uint64(version)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Scope{}, store.ErrScopeNotFound
	}
	if err != nil {
		return store.Scope{}, classify(fmt.Errorf("look up scope: %w", err))
	}
	return sc, nil
}

// CollectGarbage deletes scopes unused for longer than retention, then
// documents no scope references, then expired revocations, request
// state records, session states, relayed input responses, full
// rate-limit buckets and expired tasks, and the records of tools unseen
// for store.ToolDefinitionRetention (ToolDefinitions).
func (s *Store) CollectGarbage(ctx context.Context, retention time.Duration) (store.Collected, error) {
	var c store.Collected
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return c, classify(fmt.Errorf("begin: %w", err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, gcLockKey); err != nil {
		return c, classify(fmt.Errorf("lock: %w", err))
	}
	tag, err := tx.Exec(ctx, `DELETE FROM scopes WHERE last_used_at < now() - make_interval(secs => $1)`, retention.Seconds())
	if err != nil {
		return c, classify(fmt.Errorf("delete scopes: %w", err))
	}
	c.Scopes = tag.RowsAffected()
	tag, err = tx.Exec(ctx, `DELETE FROM tool_documents d WHERE NOT EXISTS (SELECT 1 FROM scope_tools st WHERE st.doc_id = d.id)`)
	if err != nil {
		return c, classify(fmt.Errorf("delete documents: %w", err))
	}
	c.Documents = tag.RowsAffected()
	tag, err = tx.Exec(ctx, `DELETE FROM revoked_sessions WHERE expires_at < now()`)
	if err != nil {
		return c, classify(fmt.Errorf("purge sessions: %w", err))
	}
	c.Revocations = tag.RowsAffected()
	tag, err = tx.Exec(ctx, `DELETE FROM consumed_request_states WHERE expires_at < now()`)
	if err != nil {
		return c, classify(fmt.Errorf("purge request states: %w", err))
	}
	c.RequestStates = tag.RowsAffected()
	tag, err = tx.Exec(ctx, `DELETE FROM session_states WHERE expires_at < now()`)
	if err != nil {
		return c, classify(fmt.Errorf("purge session states: %w", err))
	}
	c.SessionStates = tag.RowsAffected()
	tag, err = tx.Exec(ctx, `DELETE FROM relayed_input_responses WHERE expires_at < now()`)
	if err != nil {
		return c, classify(fmt.Errorf("purge input responses: %w", err))
	}
	c.SessionStates += tag.RowsAffected()
	// A bucket that has refilled is the same as none.
	tag, err = tx.Exec(ctx, `DELETE FROM rate_buckets WHERE full_at < now()`)
	if err != nil {
		return c, classify(fmt.Errorf("purge rate buckets: %w", err))
	}
	c.RateBuckets = tag.RowsAffected()
	tag, err = tx.Exec(ctx, `DELETE FROM tasks WHERE expires_at < now()`)
	if err != nil {
		return c, classify(fmt.Errorf("purge tasks: %w", err))
	}
	c.Tasks = tag.RowsAffected()
	if _, err := tx.Exec(ctx, `UPDATE task_rows SET count = count - $1`, c.Tasks); err != nil {
		return c, classify(fmt.Errorf("count tasks: %w", err))
	}
	// A backend listing ever new tool names (generated ones, or a hostile
	// one) grows the table otherwise (store.ToolDefinitionRetention).
	unseen := store.ToolDefinitionRetention.Seconds()
	tag, err = tx.Exec(ctx, `DELETE FROM tool_definitions WHERE approved_digest = '' AND last_seen < now() - make_interval(secs => $1)`, unseen)
	if err != nil {
		return c, classify(fmt.Errorf("purge tool definitions: %w", err))
	}
	c.ToolDefinitions = tag.RowsAffected()
	return c, classify(tx.Commit(ctx))
}

// Stats counts documents, scopes and builds.
func (s *Store) Stats(ctx context.Context) (store.Stats, error) {
	var st store.Stats
	err := s.pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM tool_documents), (SELECT count(*) FROM scopes),
		       (SELECT value FROM index_counters WHERE name = 'scope_builds')`).
		Scan(&st.Documents, &st.Scopes, &st.ScopeBuilds)
	return st, classify(err)
}
