package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// toolApprovalChannel is the notification channel migration 0006's
// trigger announces approvals on.
const toolApprovalChannel = "switchboard_tool_approvals"

const toolDefinitionColumns = `backend, tool, approved_digest, seen_digest, seen_definition, first_seen, last_seen, approved_at, approved_by`

// RecordToolDefinitions inserts the tools never seen (their digest is
// approved by being first: a concurrent insert of the same tool through
// another replica conflicts, and the row that landed first is kept) and
// updates the seen digest of the others. A row whose seen digest is
// unchanged is written at most once a minute (for last_seen), so that
// the aggregators' listings do not rewrite every row each time; the rows
// left alone are read back.
func (s *Store) RecordToolDefinitions(ctx context.Context, digests []store.ToolDefinitionDigest) ([]store.ToolDefinition, error) {
	if len(digests) == 0 {
		return nil, nil
	}
	n := len(digests)
	backends, tools, sums, pendingIfNew := make([]string, n), make([]string, n), make([]string, n), make([]bool, n)
	var withDefs []store.ToolDefinitionDigest
	for i, d := range digests {
		backends[i], tools[i], sums[i], pendingIfNew[i] = d.Backend, d.Tool, d.Digest, d.PendingIfNew
		if d.Definition != "" {
			withDefs = append(withDefs, d)
		}
	}
	// Rows are inserted (and so locked) in one order on every replica,
	// so that two replicas recording the same tools cannot deadlock. A
	// definition kept for review goes when the seen digest changes. A new
	// tool of a backend with tools recorded (as of the statement's
	// start, so a backend's first listing is approved whole) starts
	// pending when asked to: an empty approved digest.
	rows, err := s.pool.Query(ctx, `
		INSERT INTO tool_definitions AS t (backend, tool, approved_digest, seen_digest)
		SELECT b, n, CASE WHEN p AND EXISTS (SELECT 1 FROM tool_definitions x WHERE x.backend = u.b) THEN '' ELSE d END, d
		FROM unnest($1::text[], $2::text[], $3::text[], $4::bool[]) AS u(b, n, d, p)
		ORDER BY b COLLATE "C", n COLLATE "C"
		ON CONFLICT (backend, tool) DO UPDATE SET seen_digest = EXCLUDED.seen_digest, last_seen = now(),
			seen_definition = CASE WHEN t.seen_digest = EXCLUDED.seen_digest THEN t.seen_definition ELSE '' END
		WHERE t.seen_digest <> EXCLUDED.seen_digest OR t.last_seen < now() - interval '1 minute'
		RETURNING `+toolDefinitionColumns, backends, tools, sums, pendingIfNew)
	if err != nil {
		return nil, classify(fmt.Errorf("record tool definitions: %w", err))
	}
	written, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.ToolDefinition, error) { return scanToolDefinition(r) })
	if err != nil {
		return nil, classify(fmt.Errorf("record tool definitions: %w", err))
	}
	type key struct{ backend, tool string }
	found := make(map[key]store.ToolDefinition, len(digests))
	for _, d := range written {
		found[key{d.Backend, d.Tool}] = d
	}
	if len(found) < len(digests) {
		var rb, rt []string
		for _, d := range digests {
			if _, ok := found[key{d.Backend, d.Tool}]; !ok {
				rb, rt = append(rb, d.Backend), append(rt, d.Tool)
			}
		}
		rows, err := s.pool.Query(ctx, `SELECT `+toolDefinitionColumns+` FROM tool_definitions
			WHERE (backend, tool) IN (SELECT * FROM unnest($1::text[], $2::text[]))`, rb, rt)
		if err != nil {
			return nil, classify(fmt.Errorf("read tool definitions: %w", err))
		}
		read, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.ToolDefinition, error) { return scanToolDefinition(r) })
		if err != nil {
			return nil, classify(fmt.Errorf("read tool definitions: %w", err))
		}
		for _, d := range read {
			found[key{d.Backend, d.Tool}] = d
		}
	}
	if len(withDefs) > 0 {
		kept, err := s.keepDefinitions(ctx, withDefs)
		if err != nil {
			return nil, err
		}
		// The records as they are after keeping: their definition is the
		// first kept for the seen digest, which may be another's.
		for _, rec := range kept {
			found[key{rec.Backend, rec.Tool}] = rec
		}
	}
	out := make([]store.ToolDefinition, len(digests))
	for i, d := range digests {
		rec, ok := found[key{d.Backend, d.Tool}]
		if !ok {
			return nil, fmt.Errorf("record tool definitions: %s/%s was neither written nor found", d.Backend, d.Tool)
		}
		out[i] = rec
	}
	return out, nil
}

// keepDefinitions keeps the definitions sent with pending digests (only
// for the digest still seen, and not approved), for operators to review,
// and returns the records of the tools whose digest that is. The first
// definition kept for a seen digest stays: another text sent later with
// the same digest (through any replica) leaves it, so what a reviewer
// reads cannot be replaced under them (the upsert clears it when the
// seen digest changes, an approval when it is approved). One statement
// per tool, in one round trip, in the order the upsert locks rows, so
// that concurrent recorders cannot deadlock.
func (s *Store) keepDefinitions(ctx context.Context, defs []store.ToolDefinitionDigest) ([]store.ToolDefinition, error) {
	defs = slices.Clone(defs)
	slices.SortFunc(defs, func(a, b store.ToolDefinitionDigest) int {
		return cmp.Or(strings.Compare(a.Backend, b.Backend), strings.Compare(a.Tool, b.Tool))
	})
	var batch pgx.Batch
	for _, d := range defs {
		batch.Queue(`UPDATE tool_definitions SET seen_definition = CASE WHEN seen_definition = '' THEN $4 ELSE seen_definition END
			WHERE backend = $1 AND tool = $2 AND seen_digest = $3 AND approved_digest <> $3
			RETURNING `+toolDefinitionColumns, d.Backend, d.Tool, d.Digest, d.Definition)
	}
	br := s.pool.SendBatch(ctx, &batch)
	var kept []store.ToolDefinition
	for range defs {
		rec, err := scanToolDefinition(br.QueryRow())
		if errors.Is(err, pgx.ErrNoRows) {
			continue // approved, or another digest seen since
		}
		if err != nil {
			_ = br.Close()
			return nil, classify(fmt.Errorf("keep tool definitions: %w", err))
		}
		kept = append(kept, rec)
	}
	if err := br.Close(); err != nil {
		return nil, classify(fmt.Errorf("keep tool definitions: %w", err))
	}
	return kept, nil
}

// ApproveToolDefinition approves the seen digest if it is d.Digest.
func (s *Store) ApproveToolDefinition(ctx context.Context, d store.ToolDefinitionDigest, by string) (store.ToolDefinition, bool, error) {
	rec, err := scanToolDefinition(s.pool.QueryRow(ctx, `
		UPDATE tool_definitions SET approved_digest = seen_digest, seen_definition = '', approved_at = now(), approved_by = $4
		WHERE backend = $1 AND tool = $2 AND seen_digest = $3 AND approved_digest <> seen_digest
		RETURNING `+toolDefinitionColumns, d.Backend, d.Tool, d.Digest, by))
	if err == nil {
		return rec, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return store.ToolDefinition{}, false, classify(fmt.Errorf("approve tool definition: %w", err))
	}
	rec, err = scanToolDefinition(s.pool.QueryRow(ctx, `SELECT `+toolDefinitionColumns+` FROM tool_definitions
		WHERE backend = $1 AND tool = $2`, d.Backend, d.Tool))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.ToolDefinition{}, false, store.ErrToolDefinitionNotFound
	case err != nil:
		return store.ToolDefinition{}, false, classify(fmt.Errorf("read tool definition: %w", err))
	case rec.SeenDigest != d.Digest:
		return rec, false, store.ErrToolDefinitionChanged
	}
	return rec, false, nil // approved already
}

// ListToolDefinitions pages through the records by key.
func (s *Store) ListToolDefinitions(ctx context.Context, includeApproved bool, afterBackend, afterTool string, limit int) ([]store.ToolDefinition, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+toolDefinitionColumns+` FROM tool_definitions
		WHERE ($1 OR seen_digest <> approved_digest) AND (backend, tool) > ($2, $3)
		ORDER BY backend, tool LIMIT $4`, includeApproved, afterBackend, afterTool, limit)
	if err != nil {
		return nil, classify(fmt.Errorf("list tool definitions: %w", err))
	}
	defs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.ToolDefinition, error) { return scanToolDefinition(r) })
	return defs, classify(err)
}

// ListenToolApprovals LISTENs on the approval channel (listen).
func (s *Store) ListenToolApprovals(ctx context.Context, listening func(), approved func(store.ToolDefinitionDigest)) error {
	return s.listen(ctx, toolApprovalChannel, "tool approvals", listening, func(payload string) {
		var p struct{ B, T, D string }
		// Only the trigger writes here; a payload it did not write is
		// skipped.
		if json.Unmarshal([]byte(payload), &p) == nil {
			approved(store.ToolDefinitionDigest{Backend: p.B, Tool: p.T, Digest: p.D})
		}
	})
}

func scanToolDefinition(row pgx.Row) (store.ToolDefinition, error) {
	var d store.ToolDefinition
	var approvedAt *time.Time
	err := row.Scan(&d.Backend, &d.Tool, &d.ApprovedDigest, &d.SeenDigest, &d.SeenDefinition, &d.FirstSeen, &d.LastSeen, &approvedAt, &d.ApprovedBy)
	if approvedAt != nil {
		d.ApprovedAt = *approvedAt
	}
	return d, err
}
