-- A tool's title, annotations and output schema as its view lists them,
-- carried in find_tool hits with the name, description, input schema and
-- _meta: a model reached through the optimizer learns what a tool returns
-- and a host whether it only reads or destroys, as through tools/list.
-- Empty for none. A document with any of them is a document of its own
-- (its content hash covers them), so views that list a tool differently
-- never share it; a document with none keeps the hash it always had.
ALTER TABLE tool_documents
  ADD COLUMN IF NOT EXISTS title text NOT NULL DEFAULT '',
  ADD COLUMN IF NOT EXISTS annotations_json text NOT NULL DEFAULT '',
  ADD COLUMN IF NOT EXISTS output_schema_json text NOT NULL DEFAULT '';

-- Every scope built before this held documents without those fields
-- (and, before 0012, without _meta), and is found by its view's digest,
-- which the fields did not change: dropped, each is built again at its
-- next search, from documents that carry them. Scopes are a cache of the
-- aggregator's views; a replica that still holds one it dropped builds
-- it again (ErrScopeNotFound).
DELETE FROM scopes;
