package methods

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/switchboard-mcp/switchboard/gateway/internal/mcperr"
	"github.com/switchboard-mcp/switchboard/gateway/internal/session"
	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

// The Legacy session methods: their state is shared by every replica
// through the indexer (session.Shared), or, without one, held by this
// replica (session.Local).

// setLogLevel applies the level to this session's later tool calls, whose
// backends' log messages are relayed on their response streams.
func (s *Server) setLogLevel(ctx context.Context, req *Request, _ Responder) (json.RawMessage, *wire.Error) {
	level, ok := req.Params.String("level")
	if !ok || !mcpspec.IsLogLevel(level) {
		return nil, wire.InvalidParams("level must be an MCP log level")
	}
	if err := s.shared.SetLogLevel(ctx, req.Session, session.PrincipalDigest(req.Principal), level, req.SessionExpiry); err != nil {
		return nil, stateError(err)
	}
	return json.RawMessage(`{}`), nil
}

// subscribe adds a URI to the session's subscriptions: its updates reach
// the session's GET stream if the caller may read it and its backend
// supports subscribe; any other URI is accepted and never updated, so a
// denied URI looks like an unknown one.
func (s *Server) subscribe(ctx context.Context, req *Request, _ Responder) (json.RawMessage, *wire.Error) {
	uri, ok := req.Params.String("uri")
	if !ok || uri == "" {
		return nil, wire.InvalidParams("uri is required")
	}
	if err := s.shared.Subscribe(ctx, req.Session, session.PrincipalDigest(req.Principal), uri, req.SessionExpiry); err != nil {
		return nil, stateError(err)
	}
	return json.RawMessage(`{}`), nil
}

func (s *Server) unsubscribe(ctx context.Context, req *Request, _ Responder) (json.RawMessage, *wire.Error) {
	uri, ok := req.Params.String("uri")
	if !ok || uri == "" {
		return nil, wire.InvalidParams("uri is required")
	}
	if err := s.shared.Unsubscribe(ctx, req.Session, session.PrincipalDigest(req.Principal), uri, req.SessionExpiry); err != nil {
		return nil, stateError(err)
	}
	return json.RawMessage(`{}`), nil
}

// stateError is the client's answer to a change of session state past a
// bound (session.Limits): a request that asks too much of one session is
// invalid (-32602); one that finds the principal's or the replica's share
// used up cannot be served now (-32603, the code the spec has for it).
func stateError(err error) *wire.Error {
	switch {
	case errors.Is(err, session.ErrTooManySubscriptions):
		return wire.InvalidParams("too many resource subscriptions for one session; unsubscribe from some first")
	case errors.Is(err, session.ErrURITooLong):
		return wire.InvalidParams("uri too long to subscribe to")
	case errors.Is(err, session.ErrStateChangesLimited):
		return mcperr.RateLimited("1")
	case errors.Is(err, session.ErrSessionGone):
		return wire.NewError(wire.CodeInvalidRequest, "session not found: initialize a new session")
	case errors.Is(err, session.ErrStateUnrecorded):
		return wire.NewError(wire.CodeInternalError, "the session's state cannot be recorded right now; retry later")
	case errors.Is(err, session.ErrPrincipalFull):
		return wire.NewError(wire.CodeInternalError, "too much session state held for this principal on this gateway; delete sessions no longer used, or retry later")
	case errors.Is(err, session.ErrPrincipalClusterFull):
		return wire.NewError(wire.CodeInternalError, "too much session state held for this principal; delete sessions no longer used, or retry later")
	case errors.Is(err, session.ErrClusterFull):
		return wire.NewError(wire.CodeInternalError, "the sessions of all gateways hold as much state as they may; retry later")
	default:
		return wire.NewError(wire.CodeInternalError, "this gateway holds as much session state as it may; retry later")
	}
}
