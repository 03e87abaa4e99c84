-- What Legacy gateway sessions set after they were created (log level,
-- resource subscriptions), so that every gateway replica serves them: a
-- sealed session id cannot carry state acquired later. cost is what the
-- row counts against the gateway.sessions bytes bounds; version increases
-- with every change (from one sequence, so it never goes back). A row is
-- dropped when its session is revoked or expires.
CREATE SEQUENCE session_state_versions;

CREATE TABLE session_states (
    session_digest   text PRIMARY KEY,
    principal_digest text NOT NULL,
    log_level        text NOT NULL DEFAULT '',
    uris             text[] NOT NULL DEFAULT '{}',
    cost             bigint NOT NULL,
    version          bigint NOT NULL,
    expires_at       timestamptz NOT NULL
);
CREATE INDEX session_states_principal ON session_states (principal_digest);
CREATE INDEX session_states_expiry ON session_states (expires_at);

-- Client answers to input requests that reached another gateway replica
-- than the one waiting for them, until the owner stops waiting (kept
-- after delivery, so that each request is answered once).
CREATE TABLE relayed_input_responses (
    id             bigserial PRIMARY KEY,
    owner_replica  text NOT NULL,
    session_digest text NOT NULL,
    request_id     text NOT NULL,
    response       text NOT NULL,
    expires_at     timestamptz NOT NULL,
    UNIQUE (session_digest, request_id)
);
CREATE INDEX relayed_input_responses_expiry ON relayed_input_responses (expires_at);

-- Every change of a session's state ("s <digest>") and every new answer
-- ("r <id>") is announced on one channel, when the writing transaction
-- commits; each indexer replica reads the row and streams it on.
CREATE FUNCTION notify_session_state() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('switchboard_session_events', 's ' || OLD.session_digest);
    ELSE
        PERFORM pg_notify('switchboard_session_events', 's ' || NEW.session_digest);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER session_states_notify
    AFTER INSERT OR UPDATE OR DELETE ON session_states
    FOR EACH ROW EXECUTE FUNCTION notify_session_state();

CREATE FUNCTION notify_input_response() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('switchboard_session_events', 'r ' || NEW.id);
    RETURN NULL;
END
$$;

CREATE TRIGGER relayed_input_responses_notify
    AFTER INSERT ON relayed_input_responses
    FOR EACH ROW EXECUTE FUNCTION notify_input_response();
