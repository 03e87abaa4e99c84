// Package hostile holds the hostile input test: malformed and hostile MCP
// requests against a running Switchboard, each checked against the HTTP
// status and JSON-RPC code the MCP specification requires.
package hostile
