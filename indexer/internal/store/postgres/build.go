package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// BuildScope stores the scope for digest with tools in one transaction and
// reports whether this call built it. Concurrent builders of the same
// digest (in this process or other replicas) serialize on an advisory
// lock; the later ones find the scope built and return it.
func (s *Store) BuildScope(ctx context.Context, digest string, catalogVersion uint64, tools []store.Tool) (store.Scope, bool, error) {
	sc, built, err := s.buildScope(ctx, digest, catalogVersion, tools)
	return sc, built, classify(err)
}

func (s *Store) buildScope(ctx context.Context, digest string, catalogVersion uint64, tools []store.Tool) (store.Scope, bool, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return store.Scope{}, false, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	key := scopeKey(digest)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared($1), pg_advisory_xact_lock(hashtextextended($2, 0))`, gcLockKey, key); err != nil {
		return store.Scope{}, false, fmt.Errorf("lock scope: %w", err)
	}
	sc := store.Scope{Digest: digest}
	var version int64
	err = tx.QueryRow(ctx, `SELECT id, catalog_version, tool_count, baseline_tokens FROM scopes WHERE tools_digest = $1`, key).
		Scan(&sc.ID, &version, &sc.ToolCount, &sc.BaselineTokens)
	sc.CatalogVersion = uint64(version)
	if err == nil {
		return sc, false, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return store.Scope{}, false, fmt.Errorf("check scope: %w", err)
	}

	// The tools go in through COPY into a transaction-local staging table:
	// for thousands of tools it is several times faster than binding them
	// as arrays.
	if _, err := tx.Exec(ctx, `
		CREATE TEMP TABLE staged_tools (
			content_hash bytea, name text, description text, input_schema_json text,
			name_words text, name_key text, param_text text, json_bytes integer, meta_json text,
			title text, annotations_json text, output_schema_json text
		) ON COMMIT DROP`); err != nil {
		return store.Scope{}, false, fmt.Errorf("stage tools: %w", err)
	}
	rows := make([][]any, len(tools))
	var totalBytes int64
	for i, t := range tools {
		d := t.Document()
		totalBytes += int64(d.JSONBytes)
		rows[i] = []any{d.ContentHash, d.Name, d.Description, d.InputSchemaJSON, d.NameWords, d.NameKey, d.ParamText, int32(d.JSONBytes), d.MetaJSON, d.Title, d.AnnotationsJSON, d.OutputSchemaJSON}
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"staged_tools"},
		[]string{"content_hash", "name", "description", "input_schema_json", "name_words", "name_key", "param_text", "json_bytes", "meta_json", "title", "annotations_json", "output_schema_json"},
		pgx.CopyFromRows(rows)); err != nil {
		return store.Scope{}, false, fmt.Errorf("stage tools: %w", err)
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO tool_documents (content_hash, name, description, input_schema_json, name_words, name_key, param_text, json_bytes, meta_json,
			title, annotations_json, output_schema_json)
		SELECT DISTINCT ON (content_hash) * FROM staged_tools
		ON CONFLICT (content_hash) DO NOTHING`); err != nil {
		return store.Scope{}, false, fmt.Errorf("store documents: %w", err)
	}
	sc.CatalogVersion, sc.ToolCount, sc.BaselineTokens = catalogVersion, len(tools), totalBytes/4
	if err := tx.QueryRow(ctx, `
		INSERT INTO scopes (tools_digest, catalog_version, tool_count, baseline_tokens)
		VALUES ($1, $2, $3, $4) RETURNING id`,
		// catalog_version is a bigint holding the uint64's bits: catalog
		// versions are content-derived, so half of them are above 2^63.
		key, int64(catalogVersion), len(tools), sc.BaselineTokens).Scan(&sc.ID); err != nil {
		return store.Scope{}, false, fmt.Errorf("store scope: %w", err)
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO scope_tools (scope_id, doc_id)
		SELECT DISTINCT $1::bigint, d.id FROM staged_tools s
		JOIN tool_documents d ON d.content_hash = s.content_hash`, sc.ID); err != nil {
		return store.Scope{}, false, fmt.Errorf("store scope members: %w", err)
	}
	// ts_stat takes the text of a query; the scope id is an integer this
	// code produced, never caller input.
	if _, err := tx.Exec(ctx, fmt.Sprintf(`
		INSERT INTO scope_lexemes (scope_id, lexeme, ndoc)
		SELECT %d, word, ndoc FROM ts_stat('SELECT d.tsv FROM scope_tools st JOIN tool_documents d ON d.id = st.doc_id WHERE st.scope_id = %d')`,
		sc.ID, sc.ID)); err != nil {
		return store.Scope{}, false, fmt.Errorf("store scope statistics: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE index_counters SET value = value + 1 WHERE name = 'scope_builds'`); err != nil {
		return store.Scope{}, false, fmt.Errorf("count build: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return store.Scope{}, false, fmt.Errorf("commit scope: %w", err)
	}
	return sc, true, nil
}
