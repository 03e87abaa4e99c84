package server

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/catalog"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/engine"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/override"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/paramheader"
	"github.com/switchboard-mcp/switchboard/services/audit"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// The aggregator's part of the audit trail: one event per tool call,
// resource read and prompt get, whatever its outcome. Only here is a
// denial told from a missing item (engine.ErrDenied), and only here is the
// owning backend known. The event records the client's arguments as the
// client sent them, never the ones the backend gets: those hold the
// hidden values of tool overrides, which must never reach the trail.

// WithAudit records the server's calls, reads and prompt gets in w (nil:
// none).
func (s *Server) WithAudit(w *audit.Writer) *Server {
	s.audit = w
	return s
}

// auditCall records one call, read or prompt get that started at start
// and ended with err (toolError: the result is an error result). name is
// the tool's or prompt's advertised name, or the resource's URI; backend
// is the one that answered ("" when none did: then the snapshot's owner,
// if any, is recorded).
func (s *Server) auditCall(ctx context.Context, kind audit.Kind, start time.Time, server, name, args, backendName string, toolError bool, err error) {
	if s.audit == nil {
		return
	}
	e := audit.Call(ctx, kind, svcauth.PrincipalFrom(ctx), start)
	e.Server, e.Backend, e.RawArguments = server, backendName, args
	switch kind {
	case audit.KindToolCall:
		e.Tool = name
	case audit.KindPromptGet:
		e.Prompt = name
	default:
		e.Resource = name
	}
	e.Outcome, e.Detail = auditOutcome(err)
	if err == nil && toolError {
		e.Outcome = audit.OutcomeToolError
	}
	if err != nil && e.Backend == "" {
		e.Backend = s.ownerOf(kind, server, name)
	}
	e.Since(time.Now())
	s.audit.Record(e)
}

// RecordRefused records a request refused where no handler that audits
// returns the refusal (an error returned from CallTool, ReadResource or
// GetPrompt is recorded already: one that implements audit.Outcomer, as
// a rate limit's can, gets its own outcome).
func (s *Server) RecordRefused(ctx context.Context, kind audit.Kind, server, name string, outcome audit.Outcome) {
	if s.audit == nil {
		return
	}
	e := audit.Call(ctx, kind, svcauth.PrincipalFrom(ctx), time.Now())
	e.Server, e.Tool, e.Outcome = server, name, outcome
	switch kind {
	case audit.KindPromptGet:
		e.Tool, e.Prompt = "", name
	case audit.KindResourceRead:
		e.Tool, e.Resource = "", name
	}
	e.Backend = s.ownerOf(kind, server, name)
	s.audit.Record(e)
}

// ownerOf is the backend that owns the item in the server's snapshot, ""
// for none: a failed call's backend, for the trail only.
func (s *Server) ownerOf(kind audit.Kind, server, name string) string {
	snap, _, err := s.e.ServerSnapshot(server)
	if err != nil {
		return ""
	}
	switch kind {
	case audit.KindToolCall:
		it, _ := snap.Tool(name)
		return it.Owner()
	case audit.KindPromptGet:
		it, _ := snap.Prompt(name)
		return it.Owner()
	}
	if r, ok := snap.Resource(name); ok {
		return r.Backend
	}
	var owner string
	snap.MatchTemplates(name, func(t *catalog.Item[*aggregatorv1.ResourceTemplate]) bool {
		owner = t.Backend
		return false
	})
	return owner
}

// promptArguments is the JSON of a prompt get's arguments, for the trail.
func (s *Server) promptArguments(args map[string]string) string {
	if s.audit == nil || len(args) == 0 {
		return ""
	}
	raw, _ := json.Marshal(args) // a map of strings always encodes
	return string(raw)
}

// auditOutcome is the trail's outcome of an error, and a few words on its
// class; it follows the cases of toStatus.
func auditOutcome(err error) (audit.Outcome, string) {
	var inv invalidArgument
	var perr *backend.ProtocolError
	var challenge *backend.ChallengeError
	var mismatch *paramheader.MismatchError
	var fromPeer peerStatus
	var outcomer audit.Outcomer
	switch {
	case err == nil:
		return audit.OutcomeOK, ""
	case errors.As(err, &outcomer):
		// An error that says its outcome (a rate limit's refusal).
		return outcomer.AuditOutcome(), ""
	case errors.Is(err, engine.ErrDenied):
		return audit.OutcomeDenied, "denied by the authorization policy"
	case errors.Is(err, backend.ErrCallerCredential):
		return audit.OutcomeDenied, "the caller's token does not qualify for the backend"
	case errors.Is(err, backend.ErrTokenExchange):
		return audit.OutcomeError, "no token from the authorization server"
	case errors.As(err, &challenge):
		return audit.OutcomeDenied, "the backend refused the call's credentials (HTTP 401)"
	case errors.Is(err, engine.ErrNotFound):
		return audit.OutcomeNotFound, ""
	case errors.Is(err, catalog.ErrInvalidCursor), errors.As(err, &mismatch), errors.Is(err, override.ErrHiddenArgument),
		errors.Is(err, override.ErrArgumentsNotObject), errors.As(err, &inv), errors.Is(err, backend.ErrMalformedRequest):
		return audit.OutcomeInvalid, ""
	case errors.Is(err, backend.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return audit.OutcomeTimeout, ""
	case errors.Is(err, context.Canceled):
		return audit.OutcomeCancelled, ""
	case errors.Is(err, engine.ErrBackendDown), errors.Is(err, backend.ErrUnavailable), errors.Is(err, backend.ErrRedirected):
		return audit.OutcomeBackendError, "backend unavailable"
	case errors.Is(err, backend.ErrProtocolViolation):
		return audit.OutcomeBackendError, "backend broke the protocol"
	case errors.As(err, &perr):
		return audit.OutcomeBackendError, "backend JSON-RPC error " + strconv.FormatInt(perr.Code, 10)
	case errors.As(err, &fromPeer):
		return audit.OutcomeError, "forwarded to the replica holding the call"
	default:
		return audit.OutcomeError, ""
	}
}
