-- The sealed request states (multi-round-trip retries) gateways accepted,
-- by the SHA-256 of each state's one-time id, so that a state is accepted
-- once whatever replica a retry reaches. A record is kept until the state
-- expires anyway; garbage collection purges it after that.
CREATE TABLE consumed_request_states (
    state_digest text PRIMARY KEY,
    expires_at timestamptz NOT NULL
);

CREATE INDEX consumed_request_states_expiry ON consumed_request_states (expires_at);
