-- Search index: tool documents stored once, content-addressed, shared by
-- every scope (identity view) that contains them.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE EXTENSION IF NOT EXISTS unaccent;

-- English stemming with accents folded, so "café" finds "cafe".
CREATE TEXT SEARCH CONFIGURATION switchboard_en (COPY = english);
ALTER TEXT SEARCH CONFIGURATION switchboard_en
    ALTER MAPPING FOR hword, hword_part, word WITH unaccent, english_stem;

CREATE TABLE tool_documents (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- SHA-256 of name, description and input schema.
    content_hash      bytea NOT NULL UNIQUE,
    name              text NOT NULL,
    description       text NOT NULL,
    input_schema_json text NOT NULL,
    -- The name split into words (snake_case, camelCase, dots, dashes).
    name_words        text NOT NULL,
    -- The name lower-cased with separators removed, for trigram similarity
    -- against identifier-like or misspelled queries.
    name_key          text NOT NULL,
    -- Parameter names (split) and descriptions from the input schema.
    param_text        text NOT NULL,
    -- Size of the tool's JSON in a tools/list answer, for token estimates.
    json_bytes        integer NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('switchboard_en', name_words), 'A') ||
        setweight(to_tsvector('switchboard_en', description), 'B') ||
        setweight(to_tsvector('switchboard_en', param_text), 'C')
    ) STORED
);

-- A scope is one distinct tool view; principals whose views are equal (the
-- aggregator's tools_digest) share it.
CREATE TABLE scopes (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tools_digest    text NOT NULL UNIQUE,
    catalog_version bigint NOT NULL,
    tool_count      integer NOT NULL,
    baseline_tokens bigint NOT NULL,
    built_at        timestamptz NOT NULL DEFAULT now(),
    last_used_at    timestamptz NOT NULL DEFAULT now()
);

-- Membership. The primary key (scope_id, doc_id) is the index a scoped
-- search walks: it touches only the scope's rows, however many documents
-- the whole index holds.
CREATE TABLE scope_tools (
    scope_id bigint NOT NULL REFERENCES scopes(id) ON DELETE CASCADE,
    doc_id   bigint NOT NULL REFERENCES tool_documents(id),
    PRIMARY KEY (scope_id, doc_id)
);
CREATE INDEX scope_tools_doc_idx ON scope_tools (doc_id);

-- Per-scope document frequency of every lexeme, for inverse document
-- frequency weighting (PostgreSQL's own ranking has none).
CREATE TABLE scope_lexemes (
    scope_id bigint NOT NULL REFERENCES scopes(id) ON DELETE CASCADE,
    lexeme   text NOT NULL,
    ndoc     integer NOT NULL,
    PRIMARY KEY (scope_id, lexeme)
);

-- Revoked gateway sessions, by SHA-256 of the session id.
CREATE TABLE revoked_sessions (
    session_digest text PRIMARY KEY,
    expires_at     timestamptz NOT NULL
);
CREATE INDEX revoked_sessions_expiry_idx ON revoked_sessions (expires_at);

-- Counts scope builds across replicas (Stats.scope_builds).
CREATE TABLE index_counters (
    name  text PRIMARY KEY,
    value bigint NOT NULL
);
INSERT INTO index_counters (name, value) VALUES ('scope_builds', 0);
