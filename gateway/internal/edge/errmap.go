package edge

import (
	"context"
	"errors"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// statusToMCP is the one place where a gRPC status from the aggregator or
// the indexer becomes an MCP error. Only the messages of INVALID_ARGUMENT
// and NOT_FOUND reach the client: services promise those are client-safe.
// Every other code gets a fixed message; internal reports whether the
// status is worth logging with its detail.
func statusToMCP(st *status.Status, e era, method string) (mcpErr *rpcError, internal bool) {
	switch st.Code() {
	case codes.InvalidArgument, codes.OutOfRange:
		return newError(codeInvalidParams, "invalid params: "+st.Message()), false
	case codes.NotFound:
		if method == "resources/read" {
			// 2026-07-28 requires -32602 for a missing resource; 2025-11-25
			// defines -32002.
			if e == eraLegacy {
				return newError(codeResourceNotFound, "resource not found"), false
			}
			return newError(codeInvalidParams, "resource not found"), false
		}
		return newError(codeInvalidParams, st.Message()), false
	case codes.Unimplemented:
		return newError(codeMethodNotFound, "method not found: "+method), false
	case codes.Canceled:
		return newError(codeInternalError, "request cancelled"), false
	case codes.DeadlineExceeded:
		return newError(codeInternalError, "the request timed out"), true
	case codes.Unavailable, codes.ResourceExhausted, codes.Aborted:
		if apierr.Reason(st.Err()) == commonv1.ErrorReason_ERROR_REASON_BACKEND_UNAVAILABLE {
			return newError(codeInternalError, "the server behind this request is unavailable; retry later"), true
		}
		return newError(codeInternalError, "service temporarily unavailable; retry later"), true
	case codes.FailedPrecondition, codes.AlreadyExists:
		return newError(codeInternalError, "the request cannot be served in the current state"), true
	case codes.Unauthenticated, codes.PermissionDenied:
		// The gateway's own service credential was refused: a deployment
		// error, never the MCP caller's fault or business.
		return newError(codeInternalError, "internal error"), true
	default: // Unknown, Internal, DataLoss, OK (never passed here)
		return newError(codeInternalError, "internal error"), true
	}
}

// grpcError maps err of a service call to MCP, logging internal detail with
// the trace id (which the client also gets, to quote in a report).
func grpcError(ctx context.Context, log *slog.Logger, err error, e era, method string) *rpcError {
	st, ok := status.FromError(err)
	if !ok {
		if errors.Is(err, context.Canceled) {
			st = status.New(codes.Canceled, err.Error())
		} else {
			st = status.New(codes.Unknown, err.Error())
		}
	}
	mcpErr, internal := statusToMCP(st, e, method)
	if internal {
		traceID := trace.SpanContextFromContext(ctx).TraceID()
		log.ErrorContext(ctx, "service call failed", "method", method, "code", st.Code().String(),
			"reason", apierr.Reason(err).String(), "detail", st.Message(), "trace_id", traceID.String())
		if traceID.IsValid() {
			mcpErr.Data = map[string]string{"traceId": traceID.String()}
		}
	}
	return mcpErr
}
