-- The rate-limit buckets every replica of every service draws from
-- (config rateLimits): one row per key, "<limit>|<per>|<value>". tokens is
-- what the bucket held at updated_at; it refills on read, at the rate the
-- caller names, up to its burst. granted is what the last acquisition
-- took (RETURNING reads it). full_at is when the bucket is full again, so
-- that garbage collection can drop it: a full bucket and no row are the
-- same.
CREATE TABLE rate_buckets (
    key        text PRIMARY KEY,
    tokens     double precision NOT NULL,
    granted    integer NOT NULL,
    updated_at timestamptz NOT NULL,
    full_at    timestamptz NOT NULL
);
CREATE INDEX rate_buckets_full_at ON rate_buckets (full_at);
