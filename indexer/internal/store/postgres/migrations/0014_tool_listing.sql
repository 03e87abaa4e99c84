-- A tool's title, annotations and output schema as its view lists them,
-- carried in find_tool hits with the name, description, input schema and
-- _meta: a model reached through the optimizer learns what a tool returns
-- and a host whether it only reads or destroys, as through tools/list.
-- Empty for none. A document with any of them is a document of its own
-- (its content hash covers them), so views that list a tool differently
-- never share it; a document with none keeps the hash it always had.
-- The scopes built before this, of documents without the fields, are not
-- found from this release on (analysisVersion 4, store.go) and go with
-- garbage collection; an older replica serving on during a rollout keeps
-- its own.
ALTER TABLE tool_documents
  ADD COLUMN title text NOT NULL DEFAULT '',
  ADD COLUMN annotations_json text NOT NULL DEFAULT '',
  ADD COLUMN output_schema_json text NOT NULL DEFAULT '';
