package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"google.golang.org/grpc/codes"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/catalog"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/engine"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/override"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/paramheader"
	"github.com/switchboard-mcp/switchboard/services/apierr"
	"github.com/switchboard-mcp/switchboard/services/backenderr"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/ratelimit"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// errOperatorsOnly: an RPC for operators asked by another caller.
var errOperatorsOnly = errors.New("this RPC is for operator credentials (serviceAuth.credentials[].operator)")

// errPeersOnly: a held call's forwarded retry sent by a caller that is no
// aggregator replica (fromPeer).
var errPeersOnly = errors.New("this RPC is for aggregator replicas forwarding a held call's retry (the aggregators' own credential, aggregator.peers.token); send the retry with CallTool")

// errAllChangesDenied: all_changes asked by an untrusted caller.
var errAllChangesDenied = errors.New("all_changes requires a trusted service caller")

// errShuttingDown ends a catalog watch when its replica shuts down: its
// caller opens it again, on another replica.
var errShuttingDown = errors.New("this aggregator replica is shutting down: open the watch again")

// errSubscribeNeedsRead: a credential that may not call ReadResource
// named resource_uris in a watch.
var errSubscribeNeedsRead = errors.New("resource_uris needs a credential allowed ReadResource")

// errRunNeedsCall: a credential that may not call CallTool asked for a
// program, whose tool calls are CallTools.
var errRunNeedsCall = errors.New("RunCode needs a credential allowed CallTool")

// invalidArgument is a malformed request field; its text is client-safe.
type invalidArgument string

func (e invalidArgument) Error() string { return string(e) }

// toStatus is the one place where the aggregator's errors become gRPC
// statuses. Messages are client-safe; internal detail is logged with the
// request's trace context.
func toStatus(ctx context.Context, log *slog.Logger, method string, err error) error {
	if err == nil {
		// Before the targets of errors.As below: they escape to the heap,
		// and every successful call would pay for them.
		return nil
	}
	var inv invalidArgument
	var perr *backend.ProtocolError
	var tokenErr *backend.TokenError
	var challenge *backend.ChallengeError
	var mismatch *paramheader.MismatchError
	var fromPeer peerStatus
	var refused peerRefused
	var limited *ratelimit.LimitedError
	var backendLimited *backend.RateLimitedError
	switch {
	case errors.As(err, &limited):
		// Not attempted: the client may retry after retryAfterSeconds.
		return apierr.New(codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_RATE_LIMITED, limited.Error(),
			"retryAfterSeconds", strconv.Itoa(limited.RetryAfterSeconds()), "limit", limited.Limit)
	case errors.As(err, &backendLimited):
		// The backend's own limit (its 429): not run, and the client may
		// retry when the backend said, as for one of ours.
		return apierr.New(codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_RATE_LIMITED, backendLimited.Error(),
			"retryAfterSeconds", strconv.Itoa(backendLimited.RetryAfterSeconds))
	case errors.As(err, &refused):
		log.WarnContext(ctx, "an aggregator peer refused this replica's forwarded retry: check aggregator.peers.token, the peer's serviceAuth credential for it (ResumeHeldCall) and its TLS", "method", method, "owner", refused.owner, "err", refused.err)
		return apierr.New(codes.Internal, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED, "the aggregator replica holding the call refused this one; the cluster's peer configuration needs fixing")
	case errors.As(err, &fromPeer):
		// A peer's status for a forwarded retry, mapped by the peer.
		return fromPeer.err
	case errors.Is(err, errTaskRequired):
		return apierr.New(codes.FailedPrecondition, commonv1.ErrorReason_ERROR_REASON_TASK_REQUIRED, errTaskRequired.Error())
	case errors.Is(err, errTaskNotSupported):
		return apierr.New(codes.FailedPrecondition, commonv1.ErrorReason_ERROR_REASON_TASK_NOT_SUPPORTED, errTaskNotSupported.Error())
	case errors.Is(err, errCodeBusy):
		return apierr.New(codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED, errCodeBusy.Error())
	case errors.Is(err, errTasksFull):
		return apierr.New(codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_TASKS_FULL, errTasksFull.Error())
	case errors.Is(err, errTaskNotFound):
		return apierr.New(codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND, "task not found")
	case errors.Is(err, errTasksUnavailable):
		log.WarnContext(ctx, "task store unavailable", "method", method, "err", err)
		return apierr.New(codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_INDEX_UNAVAILABLE, "the task store cannot be reached; try again")
	case errors.Is(err, catalog.ErrInvalidCursor):
		return apierr.New(codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_CURSOR, "invalid cursor")
	case errors.As(err, &mismatch):
		// The client's own header: its text is client-safe, and the gateway
		// answers it with -32020.
		return apierr.New(codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_HEADER_MISMATCH, mismatch.Error(), "header", mismatch.Header)
	case errors.Is(err, override.ErrHiddenArgument):
		// The client set what the configuration fixes: its own mistake,
		// answered -32602. The text names the argument, never its value.
		var hidden *override.HiddenArgumentError
		if !errors.As(err, &hidden) {
			return apierr.New(codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_HIDDEN_ARGUMENT, override.ErrHiddenArgument.Error())
		}
		return apierr.New(codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_HIDDEN_ARGUMENT, hidden.Error(), "argument", hidden.Argument)
	case errors.Is(err, override.ErrArgumentsNotObject):
		return apierr.New(codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, override.ErrArgumentsNotObject.Error())
	case errors.As(err, &inv):
		return apierr.New(codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, inv.Error())
	case errors.Is(err, engine.ErrNotFound):
		return apierr.New(codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND, "not found")
	case errors.Is(err, errOperatorsOnly):
		return apierr.New(codes.PermissionDenied, commonv1.ErrorReason_ERROR_REASON_OPERATOR_ONLY, errOperatorsOnly.Error())
	case errors.Is(err, errPeersOnly):
		return apierr.New(codes.PermissionDenied, commonv1.ErrorReason_ERROR_REASON_METHOD_NOT_ALLOWED, errPeersOnly.Error())
	case errors.Is(err, errShuttingDown):
		return apierr.New(codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED, errShuttingDown.Error())
	case errors.Is(err, errAllChangesDenied):
		return apierr.New(codes.PermissionDenied, commonv1.ErrorReason_ERROR_REASON_PRINCIPAL_NOT_ALLOWED, errAllChangesDenied.Error())
	case errors.Is(err, errSubscribeNeedsRead), errors.Is(err, errRunNeedsCall):
		return apierr.New(codes.PermissionDenied, commonv1.ErrorReason_ERROR_REASON_METHOD_NOT_ALLOWED, err.Error())
	case errors.Is(err, rpc.ErrTooManyStreams):
		caller, _ := svcauth.CallerFrom(ctx)
		log.WarnContext(ctx, "watch refused: the caller has as many open as it may (aggregator.maxWatchesPerCaller)", "method", method, "caller", caller.Name)
		return apierr.New(codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED,
			"this caller has as many catalog watches open as it may (aggregator.maxWatchesPerCaller); close some first")
	case errors.Is(err, engine.ErrBackendDown):
		return apierr.New(codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_BACKEND_UNAVAILABLE, "backend unavailable")
	case errors.Is(err, backend.ErrRedirected):
		// Nothing went to the redirect's target; its URL stays in no text.
		log.WarnContext(ctx, "backend redirected to another origin; not followed", "method", method)
		return apierr.New(codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_BACKEND_UNAVAILABLE, "backend unavailable: it redirected to another origin, which is not followed")
	case errors.Is(err, backend.ErrUnavailable):
		log.WarnContext(ctx, "backend unreachable", "method", method, "err", err)
		if seconds := backend.RetryAfter(err); seconds > 0 {
			// The backend said when to come back (a 503's Retry-After).
			return apierr.New(codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_BACKEND_UNAVAILABLE, "backend unavailable",
				"retryAfterSeconds", strconv.Itoa(seconds))
		}
		return apierr.New(codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_BACKEND_UNAVAILABLE, "backend unavailable")
	case errors.Is(err, backend.ErrCallerCredential):
		// The caller's token does not qualify for this backend: the
		// caller's business, answered -32602 with the fixed text (which
		// never quotes the token); the backend was not contacted.
		return apierr.New(codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, backend.ErrCallerCredential.Error())
	case errors.As(err, &tokenErr):
		// A failed exchange fails this call only: the backend was not
		// contacted and keeps its health. The client learns the OAuth
		// error code, never a token or secret.
		log.InfoContext(ctx, "no token for the backend", "method", method, "grant", tokenErr.Grant, "error", tokenErr.Code)
		return backenderr.New("token exchange failed", &aggregatorv1.BackendError{Code: jsonrpcInternalError, Message: tokenErr.Error(),
			DataJson: dataJSON(map[string]string{"reason": "token_exchange_failed", "grant": tokenErr.Grant, "error": tokenErr.Code})})
	case errors.As(err, &challenge):
		// MCP clients answer a 401 challenge by (re)authorizing: a
		// challenge to the caller's own credential (tokenExchange) goes to
		// them in the error's data, redacted. A refused credential of the
		// aggregator's own (static, clientCredentials) is no challenge
		// the caller can answer: the backend logged it for the operator.
		// A 403 took the credential, which does not allow the call: an
		// insufficient_scope challenge names the scope it needs.
		data := map[string]any{"reason": "unauthorized", "httpStatus": challenge.Status}
		if challenge.Status == http.StatusForbidden {
			data["reason"] = "forbidden"
		}
		if !challenge.Caller {
			return backenderr.New("backend refused the credentials", &aggregatorv1.BackendError{Code: jsonrpcInternalError,
				Message:  fmt.Sprintf("the tool's server refused the credentials Switchboard holds for it (HTTP %d); an operator must fix them", challenge.Status),
				DataJson: dataJSON(data)})
		}
		if challenge.Challenge != "" {
			data["wwwAuthenticate"] = challenge.Challenge
		}
		return backenderr.New("backend refused the credentials", &aggregatorv1.BackendError{Code: jsonrpcInternalError,
			Message: fmt.Sprintf("the tool's server refused the credentials of this call (HTTP %d)", challenge.Status), DataJson: dataJSON(data)})
	case errors.Is(err, backend.ErrMalformedRequest):
		// The caller's request, not the backend, is at fault: no health is
		// lost, and the backend's own words stay in the log.
		log.InfoContext(ctx, "backend rejected a request as malformed", "method", method, "err", err)
		return apierr.New(codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "the backend rejected the request as malformed")
	case errors.Is(err, backend.ErrTooManyHeld):
		log.WarnContext(ctx, "call refused: too many calls wait for client input", "method", method)
		return apierr.New(codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED, "too many calls wait for client input; try again later")
	case errors.Is(err, backend.ErrProtocolViolation):
		log.WarnContext(ctx, "backend broke the protocol", "method", method, "err", err)
		return apierr.New(codes.Internal, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED, "the backend answered outside the protocol")
	case errors.Is(err, backend.ErrTimeout):
		log.WarnContext(ctx, "backend timed out", "method", method, "err", err)
		return apierr.New(codes.DeadlineExceeded, commonv1.ErrorReason_ERROR_REASON_BACKEND_TIMEOUT, "backend did not answer in time")
	case errors.As(err, &perr):
		// The backend's own JSON-RPC error is what an MCP client would have
		// seen from it; the gateway may re-emit it from the detail.
		return backenderr.New("backend error: "+perr.Message, &aggregatorv1.BackendError{Code: perr.Code, Message: perr.Message, DataJson: perr.Data})
	case errors.Is(err, context.Canceled):
		return apierr.New(codes.Canceled, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED, "request cancelled")
	case errors.Is(err, context.DeadlineExceeded):
		return apierr.New(codes.DeadlineExceeded, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED, "request deadline exceeded")
	default:
		log.ErrorContext(ctx, "internal error", "method", method, "err", err)
		return apierr.New(codes.Internal, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED, "internal error")
	}
}

// jsonrpcInternalError is the JSON-RPC code of the credential failures
// passed to the client as a backend's error (-32603, with the detail in
// data): the gateway re-emits it with its message and data.
const jsonrpcInternalError = -32603

// dataJSON is v as JSON text for a BackendError's data.
func dataJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}
