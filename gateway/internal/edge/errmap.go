package edge

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	"github.com/switchboard-mcp/switchboard/services/backenderr"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
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
	case codes.Unknown:
		if be, ok := backenderr.From(st.Err()); ok {
			return backendError(be, e), false
		}
		return newError(codeInternalError, "internal error"), true
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

// backendError re-emits a backend's own JSON-RPC error, which the
// aggregator passes as a BackendError status detail. Only codes that describe the
// client's request are kept; codes about the aggregator's own exchange with
// the backend (parse errors, header or version problems on that hop) become
// internal errors, since the client did nothing wrong.
func backendError(be *aggregatorv1.BackendError, e era) *rpcError {
	code, msg := int(be.GetCode()), be.GetMessage()
	if msg == "" {
		return newError(codeInternalError, "the server behind this request failed")
	}
	var out *rpcError
	switch {
	case code == codeInvalidParams || code == codeMethodNotFound:
		out = newError(code, msg)
	case code == codeResourceNotFound && e == eraLegacy:
		out = newError(codeResourceNotFound, msg)
	case code == codeResourceNotFound:
		out = newError(codeInvalidParams, msg)
	case code == codeMissingCapability && e == eraModern:
		out = newError(code, msg)
	case code == codeParseError, code == codeInvalidRequest, code == codeHeaderMismatch, code == codeUnsupportedVer:
		return newError(codeInternalError, "the server behind this request failed")
	default:
		// Internal errors and implementation-defined codes: keep the
		// backend's message under a code the spec defines.
		out = newError(codeInternalError, msg)
	}
	if data := be.GetDataJson(); data != "" && json.Valid([]byte(data)) {
		out.Data = json.RawMessage(data)
	}
	return out
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
		attrs := []any{"method", method, "code", st.Code().String(), "reason", apierr.Reason(err).String(), "detail", st.Message()}
		if traceID := trace.SpanContextFromContext(ctx).TraceID(); traceID.IsValid() {
			attrs = append(attrs, "trace_id", traceID.String())
			mcpErr.Data = map[string]string{"traceId": traceID.String()}
		}
		log.ErrorContext(ctx, "service call failed", attrs...)
	}
	return mcpErr
}
