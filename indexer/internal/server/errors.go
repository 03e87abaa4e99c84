package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	"github.com/switchboard-mcp/switchboard/services/config"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/ratelimit"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/svcauth"

	"github.com/switchboard-mcp/switchboard/indexer/internal/revocation"
	"github.com/switchboard-mcp/switchboard/indexer/internal/scope"
	"github.com/switchboard-mcp/switchboard/indexer/internal/sessionevents"
	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// invalidArgumentError is a request the caller must fix.
type invalidArgumentError struct{ msg string }

func (e *invalidArgumentError) Error() string { return e.msg }

func invalidArgument(msg string) error { return &invalidArgumentError{msg: msg} }

// toStatus is the one place the indexer turns errors into gRPC statuses.
// Messages are safe for clients; detail goes to the log.
func (s *Server) toStatus(ctx context.Context, method string, err error) error {
	if err == nil {
		return nil
	}
	var (
		invalid     *invalidArgumentError
		unavailable *store.UnavailableError
		aggErr      *scope.AggregatorError
		bound       *store.SessionStateBoundError
	)
	var limited *ratelimit.LimitedError
	var auditRefused *auditRefusal
	switch {
	case errors.As(err, &limited):
		return apierr.New(codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_RATE_LIMITED, limited.Error(),
			"retryAfterSeconds", strconv.Itoa(limited.RetryAfterSeconds()), "limit", limited.Limit)
	case errors.As(err, &invalid):
		return apierr.New(codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, invalid.msg)
	case errors.As(err, &auditRefused):
		caller, _ := svcauth.CallerFrom(ctx)
		s.Log.WarnContext(ctx, "audit events refused: the service credential may not write them; nothing of the batch is stored",
			"method", method, "caller", caller.Name, "identity", caller.Identity, "auditService", caller.AuditService,
			"reason", auditRefused.reason, "error", auditRefused.Error())
		return apierr.New(codes.PermissionDenied, commonv1.ErrorReason_ERROR_REASON_AUDIT_EVENT_NOT_ALLOWED, auditRefused.Error())
	case errors.Is(err, errExplainOperatorOnly):
		caller, _ := svcauth.CallerFrom(ctx)
		s.Log.WarnContext(ctx, "explained search refused: the caller is not an operator", "method", method, "caller", caller.Name)
		return apierr.New(codes.PermissionDenied, commonv1.ErrorReason_ERROR_REASON_OPERATOR_ONLY,
			"explain is for operator credentials only (serviceAuth.credentials[].operator); search without it")
	case errors.Is(err, errOperatorOnly):
		caller, _ := svcauth.CallerFrom(ctx)
		s.Log.WarnContext(ctx, "operator RPC refused: the caller is not an operator", "method", method, "caller", caller.Name)
		return apierr.New(codes.PermissionDenied, commonv1.ErrorReason_ERROR_REASON_OPERATOR_ONLY,
			method+" is for operator credentials only (serviceAuth.credentials[].operator)")
	case errors.Is(err, errAuditDisabled):
		return apierr.New(codes.FailedPrecondition, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED, errAuditDisabled.Error())
	case errors.Is(err, store.ErrToolDefinitionNotFound):
		return apierr.New(codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND, "no definition of this tool was ever recorded")
	case errors.Is(err, store.ErrToolDefinitionChanged):
		return apierr.New(codes.FailedPrecondition, commonv1.ErrorReason_ERROR_REASON_TOOL_DEFINITION_CHANGED,
			"the digest is not the latest seen definition of the tool: list the pending definitions again and approve what you reviewed")
	case errors.Is(err, store.ErrTaskNotFound):
		// One answer for every task the caller may not see, so that none
		// is told apart from one that does not exist.
		return apierr.New(codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND, "no such task")
	case errors.Is(err, store.ErrAnswersTooLarge):
		return apierr.New(codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT,
			fmt.Sprintf("a task's answers together may be at most %d KiB", config.MaxTaskInputBytes>>10))
	case errors.Is(err, store.ErrTaskExists):
		return apierr.New(codes.AlreadyExists, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED, "a task with this key exists")
	case errors.Is(err, store.ErrTasksFull):
		return apierr.New(codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_TASKS_FULL,
			"the principal, or the cluster, holds as many unexpired tasks as it may; retry when some have expired")
	case errors.Is(err, errTaskOwnerNotAllowed), errors.Is(err, errAssertingCallerOnly):
		caller, _ := svcauth.CallerFrom(ctx)
		s.Log.WarnContext(ctx, "refused: the caller may not assert principals", "method", method, "caller", caller.Name)
		return apierr.New(codes.PermissionDenied, commonv1.ErrorReason_ERROR_REASON_PRINCIPAL_NOT_ALLOWED, err.Error())
	case errors.Is(err, errApprovalsBehind):
		return apierr.New(codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED, "tool approval stream fell behind; reconnect")
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "request cancelled")
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "deadline exceeded")
	case errors.Is(err, errNotReady):
		return apierr.New(codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_NOT_READY, "indexer is starting: its database schema is not ready yet")
	case errors.Is(err, revocation.ErrNotSynced):
		return apierr.New(codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_NOT_READY, "indexer is starting: it has not read the session revocations yet; retry later")
	case errors.Is(err, errTooManyRevocations):
		s.Log.WarnContext(ctx, "session revocation refused: the caller holds as many as it may", "method", method, "max", s.MaxRevocationsPerCaller)
		return apierr.New(codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED,
			"this caller holds as many live session revocations as it may (indexer.maxRevocationsPerCaller); retry when some have expired")
	case errors.Is(err, sessionevents.ErrNotSynced):
		return apierr.New(codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_NOT_READY, "indexer is starting: it has not read the session states yet; retry later")
	case errors.Is(err, errSessionEventsBehind):
		return apierr.New(codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED, "session event stream fell behind; reconnect for a new snapshot")
	case errors.Is(err, store.ErrSessionGone):
		return apierr.New(codes.FailedPrecondition, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED, "the session was deleted or has expired")
	case errors.Is(err, store.ErrAlreadyAnswered):
		return apierr.New(codes.AlreadyExists, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED, "the input request has been answered already")
	case errors.As(err, &bound) && bound.URI:
		return apierr.New(codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_URI_TOO_LONG, bound.Msg)
	case errors.As(err, &bound) && bound.Subscriptions:
		return apierr.New(codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_TOO_MANY_SUBSCRIPTIONS, bound.Msg)
	case errors.As(err, &bound):
		return apierr.New(codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_PRINCIPAL_STATE_FULL, bound.Msg)
	case errors.Is(err, errTooManyRequestStates):
		s.Log.WarnContext(ctx, "request state use refused: the caller holds as many live records as it may", "method", method, "max", maxRequestStatesPerCaller)
		return apierr.New(codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED, "this caller holds as many live request state records as it may; retry when some have expired")
	case errors.Is(err, errTooManyPrincipalRequestStates):
		// Each such retry of one principal's: not logged, as any rate
		// limit's refusal is not.
		return apierr.New(codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED, "this principal holds as many live request state records as it may; retry when some have expired")
	case errors.Is(err, errTooManyInputResponses):
		s.Log.WarnContext(ctx, "relayed input response refused: the caller holds as many as it may", "method", method, "max", maxInputResponsesPerCaller)
		return apierr.New(codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED, "this caller holds as many live relayed input responses as it may; retry when some have expired")
	case errors.Is(err, errTooManyCancellations):
		s.Log.WarnContext(ctx, "relayed cancellation refused: the caller relays them faster than it may", "method", method, "rate", cancellationRate)
		return apierr.New(codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED, "this caller relays cancellations faster than it may; retry in a second")
	case errors.Is(err, rpc.ErrTooManyStreams):
		caller, _ := svcauth.CallerFrom(ctx)
		s.Log.WarnContext(ctx, "watch stream refused: the caller has as many open as it may", "method", method, "caller", caller.Name, "max", rpc.DefaultStreamsPerCaller)
		return apierr.New(codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED, "this caller has as many streams of this kind open as it may; close some first")
	case errors.Is(err, errPrincipalRelaysFull):
		s.Log.WarnContext(ctx, "relayed input response refused: the principal holds as many as it may", "method", method,
			"max", maxInputResponsesPerPrincipal, "maxBytes", maxInputResponseBytesPerPrincipal)
		return apierr.New(codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED, "this principal holds as many live relayed input responses as it may; retry when some have expired")
	case errors.Is(err, store.ErrRelaysFull):
		s.Log.WarnContext(ctx, "relayed input response refused: the session holds as many as it may", "method", method,
			"max", relayLimits.PerSession, "maxBytes", relayLimits.SessionBytes)
		return apierr.New(codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED, "this session holds as many live relayed input responses as it may; retry when some have expired")
	case errors.Is(err, errStateFull):
		s.Log.WarnContext(ctx, "session state change refused: every session's state together is at indexer.sessionStates.maxBytes", "method", method, "max", s.MaxSessionStateBytes)
		return apierr.New(codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_SESSION_STATES_FULL, "all sessions together hold as much state as the cluster may; retry later")
	case errors.Is(err, errFellBehind):
		return apierr.New(codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED, "revocation stream fell behind; reconnect for a new snapshot")
	case errors.As(err, &unavailable):
		s.Log.WarnContext(ctx, "search index database unavailable", "method", method, "error", err)
		return apierr.New(codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_INDEX_UNAVAILABLE, "search index unavailable: its database cannot be reached; retry later")
	case errors.Is(err, scope.ErrViewUnsettled):
		s.Log.WarnContext(ctx, "no consistent tool view from the aggregator; nothing stored", "method", method, "error", err)
		return apierr.New(codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_NOT_READY,
			"search index could not read one consistent tool catalog from the aggregator (its replicas disagree, or the catalog keeps changing); retry later")
	case errors.As(err, &aggErr) && status.Code(aggErr.Err) == codes.NotFound:
		// The only view the aggregator does not find is a virtual server's
		// that is not configured (any more).
		return apierr.New(codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND, "no such server")
	case errors.As(err, &aggErr):
		code := status.Code(aggErr.Err)
		s.Log.WarnContext(ctx, "aggregator call failed", "method", method, "error", err)
		if code == codes.Unavailable || code == codes.DeadlineExceeded {
			return apierr.New(codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_NOT_READY, "search index cannot reach the aggregator; retry later")
		}
		return apierr.New(codes.Internal, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED, "search index could not read the tool catalog")
	default:
		s.Log.ErrorContext(ctx, "indexer request failed", "method", method, "error", err)
		return apierr.New(codes.Internal, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED, "internal error")
	}
}
