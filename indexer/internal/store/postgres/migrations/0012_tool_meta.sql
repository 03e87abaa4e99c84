-- A tool's _meta as its view lists it (an MCP App's page among others),
-- carried in find_tool hits; empty for a tool without one. A document
-- with one is a document of its own (its content hash covers it), so
-- two views that show a tool's app differently never share it.
ALTER TABLE tool_documents ADD COLUMN meta_json text NOT NULL DEFAULT '';
