-- The request an event's request was made by, when it is not the
-- client's own: "run_code <run id>" for a code mode program's tool call.
ALTER TABLE audit_events ADD COLUMN via text NOT NULL DEFAULT '';
