-- Index at most the first 64 KiB of a description and of the parameter
-- text. A backend may advertise anything; an oversized description must
-- not fail the whole scope build ("string is too long for tsvector"), and
-- its first 64 KiB say what the tool does.
ALTER TABLE tool_documents DROP COLUMN tsv;
ALTER TABLE tool_documents ADD COLUMN tsv tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('switchboard_en', left(name_words, 4096)), 'A') ||
    setweight(to_tsvector('switchboard_en', left(description, 65536)), 'B') ||
    setweight(to_tsvector('switchboard_en', left(param_text, 65536)), 'C')
) STORED;
