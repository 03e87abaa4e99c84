-- The MCP tasks the aggregators run for their clients, so that any
-- aggregator replica answers for any task (tasks.proto). task_key is the
-- SHA-256 of the task's id (hex); owner and server
-- are who created it and through which virtual server, and every client's
-- read names both. runner and lease_expires_at are the aggregator replica
-- running the current round and until when ('' and NULL while nobody runs
-- it). A row is deleted once it expires.
CREATE TABLE tasks (
    task_key             text PRIMARY KEY,
    owner                text NOT NULL,
    server               text NOT NULL,
    tool                 text NOT NULL,
    backend              text NOT NULL,
    status               text NOT NULL CHECK (status IN ('working', 'input_required', 'completed', 'failed', 'cancelled')),
    status_message       text NOT NULL,
    created_at           timestamptz NOT NULL,
    updated_at           timestamptz NOT NULL,
    expires_at           timestamptz NOT NULL,
    poll_interval_ms     bigint NOT NULL,
    call_json            text NOT NULL,
    input_requests_json  text NOT NULL,
    input_responses_json text NOT NULL,
    request_state        text NOT NULL,
    result_json          text NOT NULL,
    error_json           text NOT NULL,
    runner               text NOT NULL,
    lease_expires_at     timestamptz,
    round                bigint NOT NULL
);
-- An owner's tasks in one server, newest first (ListTasks' keyset pages);
-- its prefix counts an owner's tasks against tasks.maxPerPrincipal.
CREATE INDEX tasks_owner_listing ON tasks (owner, server, created_at DESC, task_key DESC);
-- The unexpired tasks against tasks.maxTasks, and garbage collection.
CREATE INDEX tasks_expiry ON tasks (expires_at);
-- How many rows tasks holds, against tasks.maxTasks: one row, changed by
-- the statements that insert and delete tasks in their transactions, so
-- that a creation checks the total without counting the table or taking
-- turns with every other creation.
CREATE TABLE task_rows (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    count    bigint NOT NULL CHECK (count >= 0)
);
INSERT INTO task_rows (only_row, count) VALUES (true, 0);
