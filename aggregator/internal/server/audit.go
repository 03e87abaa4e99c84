package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/catalog"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/engine"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/override"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/paramheader"
	"github.com/switchboard-mcp/switchboard/services/audit"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// The aggregator's part of the audit trail: one event per admission
// (admit.go: tool calls, resource reads and subscriptions, prompt gets and
// completions), whatever its outcome. Only here is a
// denial told from a missing item (engine.ErrDenied), and only here is the
// owning backend known. The event records the client's arguments as the
// client sent them, never the ones the backend gets: those hold the
// hidden values of tool overrides, which must never reach the trail.

// WithAudit records the server's admissions in w (nil: none).
func (s *Server) WithAudit(w *audit.Writer) *Server {
	s.audit = w
	return s
}

// auditAdmission records the outcome of admission r, which started at
// start, was admitted as a (nil when refused) and ended with res and err.
// The backend is the one that answered, else the owner in the caller's
// server, if any (a refused request's, for the trail only).
func (s *Server) auditAdmission(ctx context.Context, r admission, start time.Time, backend string, outcome audit.Outcome, detail string) {
	if s.audit == nil {
		return
	}
	e := audit.Call(ctx, r.trail, svcauth.PrincipalFrom(ctx), start)
	e.Server, e.RawArguments, e.Via = r.server, r.args, viaOf(ctx)
	resource := r.key
	if r.kind == catalog.KindResources {
		// Under the one form every spelling shares (route), so that a
		// read, a subscription and a completion of one resource are
		// found under one URI.
		resource = catalog.CanonicalURI(r.key)
	}
	switch r.trail {
	case audit.KindToolCall, audit.KindTaskGet, audit.KindTaskUpdate, audit.KindTaskCancel:
		e.Tool = r.key
	case audit.KindPromptGet:
		e.Prompt = r.key
	case audit.KindCompletion:
		if r.kind == catalog.KindPrompts {
			e.Prompt = r.key
		} else {
			e.Resource = resource
		}
	default:
		e.Resource = resource
	}
	e.Outcome, e.Detail, e.Backend = outcome, detail, backend
	e.Since(time.Now())
	s.audit.Record(e)
}

// taskEnded records, once a round of the task of call req (admitted as
// a, begun at start) ended it, the trail's task_end: the outcome of the
// call the task ran, which its tool_call event, written when the task was
// made, could not know. A round that asks for input ends nothing.
func (s *Server) taskEnded(a *admitted, req *aggregatorv1.CallToolRequest, start time.Time) func(status string, out roundOutcome) {
	return func(status string, out roundOutcome) {
		if s.audit == nil || !mcpspec.TaskEnded(status) {
			return
		}
		ctx := context.WithoutCancel(a.ctx)
		e := audit.Call(ctx, audit.KindTaskEnd, svcauth.PrincipalFrom(ctx), start)
		e.Server, e.Tool, e.Via = req.GetServer(), req.GetName(), viaOf(ctx)
		if a.b != nil {
			e.Backend = a.b.Name()
		}
		e.Outcome, e.Detail = admissionOutcome(out.resp, out.err)
		if status == mcpspec.TaskFailed && out.err == nil {
			// The call answered, but the task could not keep it.
			e.Outcome, e.Detail = audit.OutcomeError, "the call's outcome could not be kept"
		}
		e.Since(time.Now())
		s.audit.Record(e)
	}
}

// admissionOutcome is how an admission ended, as the trail (and the
// traffic page) tell it: by its error, or a tool error result.
func admissionOutcome(res any, err error) (audit.Outcome, string) {
	outcome, detail := auditOutcome(err)
	if err == nil {
		if result, ok := res.(interface{ GetIsError() bool }); ok && result.GetIsError() {
			outcome = audit.OutcomeToolError
		}
	}
	return outcome, detail
}

// admissionBackend is the backend that answered, else the owner in the
// caller's server, if any (a refused request's, for the trail only).
func admissionBackend(a *admitted, res any, err error) string {
	if answered, ok := res.(interface{ GetBackend() string }); ok && err == nil && answered.GetBackend() != "" {
		return answered.GetBackend()
	}
	if a == nil {
		return ""
	}
	if a.b != nil {
		return a.b.Name()
	}
	return a.owner
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
	if err == nil {
		// Before the errors.As targets, which escape to the heap.
		return audit.OutcomeOK, ""
	}
	var inv invalidArgument
	var perr *backend.ProtocolError
	var challenge *backend.ChallengeError
	var mismatch *paramheader.MismatchError
	var fromPeer peerStatus
	var outcomer audit.Outcomer
	switch {
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
		return audit.OutcomeDenied, fmt.Sprintf("the backend refused the call's credentials (HTTP %d)", challenge.Status)
	case errors.As(err, new(*backend.RateLimitedError)):
		return audit.OutcomeRateLimited, "the backend limited its callers (HTTP 429)"
	case errors.Is(err, engine.ErrNotFound), errors.Is(err, errTaskNotFound):
		return audit.OutcomeNotFound, ""
	case errors.Is(err, errTaskRequired):
		return audit.OutcomeInvalid, "the tool runs only as a task"
	case errors.Is(err, errTaskNotSupported):
		return audit.OutcomeInvalid, "the tool does not run as a task"
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
