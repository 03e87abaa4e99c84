-- Announce every recorded (or extended) revocation on a notification
-- channel, so each indexer replica can stream it to the gateways at once
-- instead of each gateway asking per request. The payload is the digest
-- and the expiry in microseconds since the Unix epoch. Notifications are
-- delivered when the writing transaction commits.
CREATE FUNCTION notify_revocation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('switchboard_revocations',
        NEW.session_digest || ' ' || (extract(epoch FROM NEW.expires_at) * 1000000)::bigint);
    RETURN NULL;
END
$$;

CREATE TRIGGER revoked_sessions_notify
    AFTER INSERT OR UPDATE ON revoked_sessions
    FOR EACH ROW EXECUTE FUNCTION notify_revocation();
