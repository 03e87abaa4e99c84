-- The audit trail (docs/operations.md, "Audit trail"): one row per event
-- the services sent (RecordAuditEvents) or the indexer wrote itself,
-- kept for audit.retention. recorded_by is the credential that sent the
-- event. Queries page newest first by (time, id); the indexes serve the
-- filters operators use most: by principal, by tool, and by time alone.
CREATE TABLE audit_events (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    time             timestamptz NOT NULL,
    service          text NOT NULL,
    kind             text NOT NULL,
    outcome          text NOT NULL,
    subject          text NOT NULL DEFAULT '',
    groups           text[] NOT NULL DEFAULT '{}',
    server           text NOT NULL DEFAULT '',
    tool             text NOT NULL DEFAULT '',
    resource         text NOT NULL DEFAULT '',
    prompt           text NOT NULL DEFAULT '',
    backend          text NOT NULL DEFAULT '',
    latency_ms       double precision NOT NULL DEFAULT 0,
    trace_id         text NOT NULL DEFAULT '',
    session          text NOT NULL DEFAULT '',
    arguments_sha256 text NOT NULL DEFAULT '',
    arguments        text NOT NULL DEFAULT '',
    detail           text NOT NULL DEFAULT '',
    recorded_by      text NOT NULL DEFAULT '',
    recorded_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_events_time ON audit_events (time DESC, id DESC);
CREATE INDEX audit_events_subject ON audit_events (subject, time DESC, id DESC);
CREATE INDEX audit_events_tool ON audit_events (tool, time DESC, id DESC);
