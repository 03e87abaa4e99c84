package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
	"github.com/switchboard-mcp/switchboard/services/audit"
)

var _ store.AuditEvents = (*Store)(nil)

var auditColumns = []string{"time", "service", "kind", "outcome", "subject", "groups", "server", "tool", "resource", "prompt",
	"backend", "latency_ms", "trace_id", "session", "arguments_sha256", "arguments", "detail", "recorded_by", "caller", "recorded_by_identity", "via"}

// RecordAuditEvents copies the events in (COPY: one round trip a batch).
func (s *Store) RecordAuditEvents(ctx context.Context, events []audit.Event, by store.AuditWriter) error {
	if len(events) == 0 {
		return nil
	}
	rows := make([][]any, len(events))
	for i, e := range events {
		groups := e.Groups
		if groups == nil {
			groups = []string{}
		}
		rows[i] = []any{e.Time, e.Service, string(e.Kind), string(e.Outcome), e.Subject, groups, e.Server, e.Tool, e.Resource, e.Prompt,
			e.Backend, e.LatencyMS, e.TraceID, e.Session, e.ArgumentsSHA256, string(e.Arguments), e.Detail, by.Credential, e.Caller, by.Identity, e.Via}
	}
	if _, err := s.pool.CopyFrom(ctx, pgx.Identifier{"audit_events"}, auditColumns, pgx.CopyFromRows(rows)); err != nil {
		return classify(fmt.Errorf("record audit events: %w", err))
	}
	return nil
}

// QueryAuditEvents pages newest first by (time, id). The WHERE clause
// holds only the filters set, so that the planner can use the index of
// the one that narrows most (subject, tool, or time alone).
func (s *Store) QueryAuditEvents(ctx context.Context, q store.AuditQuery, limit int) ([]store.AuditRecord, error) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	for _, f := range []struct{ column, value string }{{"subject", q.Subject}, {"tool", q.Tool}, {"server", q.Server},
		{"kind", q.Kind}, {"outcome", q.Outcome}, {"backend", q.Backend}} {
		if f.value != "" {
			where = append(where, f.column+" = "+arg(f.value))
		}
	}
	if !q.Since.IsZero() {
		where = append(where, "time >= "+arg(q.Since))
	}
	if !q.Until.IsZero() {
		where = append(where, "time < "+arg(q.Until))
	}
	if q.After != nil {
		where = append(where, "(time, id) < ("+arg(q.After.Time)+", "+arg(q.After.ID)+")")
	}
	sql := `SELECT id, time, service, kind, outcome, subject, groups, server, tool, resource, prompt,
			backend, latency_ms, trace_id, session, arguments_sha256, arguments, detail, recorded_by, caller, recorded_by_identity, via
		FROM audit_events`
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	sql += " ORDER BY time DESC, id DESC LIMIT " + arg(limit)
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, classify(fmt.Errorf("query audit events: %w", err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.AuditRecord, error) {
		var rec store.AuditRecord
		var kind, outcome, args string
		err := r.Scan(&rec.ID, &rec.Time, &rec.Service, &kind, &outcome, &rec.Subject, &rec.Groups, &rec.Server, &rec.Tool,
			&rec.Resource, &rec.Prompt, &rec.Backend, &rec.LatencyMS, &rec.TraceID, &rec.Session, &rec.ArgumentsSHA256, &args,
			&rec.Detail, &rec.RecordedBy, &rec.Caller, &rec.RecordedByIdentity, &rec.Via)
		rec.Kind, rec.Outcome, rec.Schema = audit.Kind(kind), audit.Outcome(outcome), audit.Schema
		if args != "" {
			rec.Arguments = []byte(args)
		}
		if len(rec.Groups) == 0 {
			rec.Groups = nil
		}
		return rec, err
	})
	if err != nil {
		return nil, classify(fmt.Errorf("query audit events: %w", err))
	}
	return out, nil
}

// auditDeleteBatch bounds the rows one retention statement deletes, so
// that it never holds locks on a large part of the table for long.
const auditDeleteBatch = 10_000

// DeleteAuditEventsBefore deletes in batches until nothing older is left.
func (s *Store) DeleteAuditEventsBefore(ctx context.Context, t time.Time) (int64, error) {
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, `DELETE FROM audit_events WHERE id IN (
			SELECT id FROM audit_events WHERE time < $1 ORDER BY time LIMIT $2)`, t, auditDeleteBatch)
		if err != nil {
			return total, classify(fmt.Errorf("delete old audit events: %w", err))
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < auditDeleteBatch {
			return total, nil
		}
	}
}
