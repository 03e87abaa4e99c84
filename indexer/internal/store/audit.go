package store

import (
	"context"
	"time"

	"github.com/switchboard-mcp/switchboard/services/audit"
)

// AuditEvents keeps the audit trail (docs/operations.md, "Audit trail").
// It is apart from Store: a deployment without audit.database never uses
// it.
type AuditEvents interface {
	// RecordAuditEvents stores events as written by the writer by.
	RecordAuditEvents(ctx context.Context, events []audit.Event, by AuditWriter) error
	// QueryAuditEvents returns at most limit events matching q, newest
	// first (by time, then id), after the key q.After when set.
	QueryAuditEvents(ctx context.Context, q AuditQuery, limit int) ([]AuditRecord, error)
	// DeleteAuditEventsBefore deletes the events older than t and reports
	// how many.
	DeleteAuditEventsBefore(ctx context.Context, t time.Time) (int64, error)
}

// AuditQuery filters the trail: every field set must match exactly.
type AuditQuery struct {
	Subject, Tool, Server, Kind, Outcome, Backend string
	// Since (inclusive) and Until (exclusive) bound the time; zero: none.
	Since, Until time.Time
	// After is the key of the last event of the previous page; nil for
	// the first page.
	After *AuditKey
}

// AuditKey orders stored events: newest time first, then highest id.
type AuditKey struct {
	Time time.Time
	ID   int64
}

// AuditWriter is who wrote stored events: the service credential that
// shipped them and how it authenticated (svcauth.Caller.Name and
// Identity), or the indexer itself (AuditWriterLocal).
type AuditWriter struct {
	Credential, Identity string
}

// AuditWriterLocal writes the indexer's own events.
var AuditWriterLocal = AuditWriter{Credential: "indexer", Identity: "local"}

// AuditRecord is a stored event.
type AuditRecord struct {
	audit.Event
	ID int64
	// RecordedBy and RecordedByIdentity are its AuditWriter; the identity
	// is empty for events stored before it was kept.
	RecordedBy, RecordedByIdentity string
}
