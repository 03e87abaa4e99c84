package methods

import (
	"context"
	"encoding/json"

	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

// The Legacy session methods: their state lives in session.Local.

// setLogLevel applies the level to this session's later tool calls, whose
// backends' log messages are relayed on their response streams.
func (s *Server) setLogLevel(_ context.Context, req *Request, _ Responder) (json.RawMessage, *wire.Error) {
	level, ok := req.Params.String("level")
	if !ok || !mcpspec.IsLogLevel(level) {
		return nil, wire.InvalidParams("level must be an MCP log level")
	}
	s.local.SetLogLevel(req.Session, level, req.SessionExpiry)
	return json.RawMessage(`{}`), nil
}

// subscribe adds a URI to the session's subscriptions: its updates reach
// the session's GET stream if the caller may read it and its backend
// supports subscribe; any other URI is accepted and never updated, so a
// denied URI looks like an unknown one.
func (s *Server) subscribe(_ context.Context, req *Request, _ Responder) (json.RawMessage, *wire.Error) {
	uri, ok := req.Params.String("uri")
	if !ok || uri == "" {
		return nil, wire.InvalidParams("uri is required")
	}
	if !s.local.Subscribe(req.Session, uri, req.SessionExpiry) {
		return nil, wire.InvalidParams("too many resource subscriptions")
	}
	return json.RawMessage(`{}`), nil
}

func (s *Server) unsubscribe(_ context.Context, req *Request, _ Responder) (json.RawMessage, *wire.Error) {
	uri, ok := req.Params.String("uri")
	if !ok || uri == "" {
		return nil, wire.InvalidParams("uri is required")
	}
	s.local.Unsubscribe(req.Session, uri, req.SessionExpiry)
	return json.RawMessage(`{}`), nil
}
