-- The digest of each backend tool's definition aggregators list it with
-- (approved_digest: the first ever recorded, or the one an operator
-- approved since) and the one last recorded (seen_digest); a tool whose
-- two differ is pending, and quarantined by aggregators in pin mode.
-- seen_definition is the pending definition as an aggregator reported it,
-- for operators to review; empty once approved.
CREATE TABLE tool_definitions (
    backend         text NOT NULL,
    tool            text NOT NULL,
    approved_digest text NOT NULL,
    seen_digest     text NOT NULL,
    seen_definition text NOT NULL DEFAULT '',
    first_seen      timestamptz NOT NULL DEFAULT now(),
    last_seen       timestamptz NOT NULL DEFAULT now(),
    approved_at     timestamptz,
    approved_by     text NOT NULL DEFAULT '',
    PRIMARY KEY (backend, tool)
);
CREATE INDEX tool_definitions_pending ON tool_definitions (backend, tool) WHERE seen_digest <> approved_digest;

-- Every approval is announced, when the approving transaction commits, so
-- that each indexer replica tells its aggregators to record again. The
-- payload is a JSON object {"b": backend, "t": tool, "d": digest}; names
-- are bounded (256 and 512 bytes) well below NOTIFY's 8000.
CREATE FUNCTION notify_tool_approval() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('switchboard_tool_approvals',
        json_build_object('b', NEW.backend, 't', NEW.tool, 'd', NEW.approved_digest)::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER tool_definitions_notify
    AFTER UPDATE OF approved_digest ON tool_definitions
    FOR EACH ROW WHEN (OLD.approved_digest IS DISTINCT FROM NEW.approved_digest)
    EXECUTE FUNCTION notify_tool_approval();
