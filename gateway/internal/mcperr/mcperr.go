// Package mcperr is the one place where a gRPC status from the aggregator
// or the indexer becomes an MCP error. Only the messages of INVALID_ARGUMENT
// and NOT_FOUND reach the client: services promise those are client-safe.
// A backend's own JSON-RPC error arrives as a typed detail and is re-emitted
// (translate). Every other status gets a fixed message, and its detail goes
// to the log with the trace id.
package mcperr

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	"github.com/switchboard-mcp/switchboard/services/apierr"
	"github.com/switchboard-mcp/switchboard/services/backenderr"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
	"github.com/switchboard-mcp/switchboard/services/ratelimit"
)

// FromStatus translates st for a request of method in era; internal
// reports whether the status is worth logging with its detail.
func FromStatus(st *status.Status, era mcpspec.Era, method string) (mcpErr *wire.Error, internal bool) {
	return fromStatus(st, era, method, nil)
}

// fromStatus is FromStatus for a request whose client declared caps (nil:
// not known), which a backend's own error may need (translate).
func fromStatus(st *status.Status, era mcpspec.Era, method string, caps json.RawMessage) (mcpErr *wire.Error, internal bool) {
	// The task reasons mean the same whatever the status code carrying
	// them.
	switch apierr.Reason(st.Err()) {
	case commonv1.ErrorReason_ERROR_REASON_TASK_REQUIRED:
		return TaskRequired(era), false
	case commonv1.ErrorReason_ERROR_REASON_TASK_NOT_SUPPORTED:
		return wire.NewError(wire.CodeMethodNotFound, "this tool does not run as a task: call it without params.task"), false
	case commonv1.ErrorReason_ERROR_REASON_TASKS_FULL:
		// A bound of the caller's own, not a failure of the services: it
		// clears as the caller's tasks expire, at no time a Retry-After
		// could name, so it is no rate limit.
		return wire.NewError(wire.CodeInternalError, "too many tasks held: no new task is created until some expire; retry later"), false
	}
	switch st.Code() {
	case codes.InvalidArgument, codes.OutOfRange:
		if apierr.Reason(st.Err()) == commonv1.ErrorReason_ERROR_REASON_HEADER_MISMATCH {
			// The aggregator's text says what mismatched, prefix included.
			return wire.NewError(wire.CodeHeaderMismatch, st.Message()), false
		}
		return wire.InvalidParams(st.Message()), false
	case codes.NotFound:
		if method == "resources/read" {
			return resourceNotFound(era), false
		}
		return wire.NewError(wire.CodeInvalidParams, st.Message()), false
	case codes.Unknown:
		if be, ok := backendError(st.Err()); ok {
			return be.translate(era, method, caps), false
		}
		return wire.NewError(wire.CodeInternalError, "internal error"), true
	case codes.Unimplemented:
		// Only a service older than the gateway says this (a rolling
		// upgrade), or another service at its address: logged. A method
		// of a capability the older service lacks (completions, tasks)
		// is one this deployment does not serve yet; any other, which
		// the gateway offers, is no "method not found".
		if method == "completion/complete" || strings.HasPrefix(method, "tasks/") {
			return wire.MethodNotFound(method), true
		}
		return wire.NewError(wire.CodeInternalError, "internal error"), true
	case codes.Canceled:
		return wire.NewError(wire.CodeInternalError, "request cancelled"), false
	case codes.DeadlineExceeded:
		return wire.NewError(wire.CodeInternalError, "the request timed out"), true
	case codes.ResourceExhausted:
		if reason, meta := apierr.Info(st.Err()); reason == commonv1.ErrorReason_ERROR_REASON_RATE_LIMITED {
			return RateLimited(meta["retryAfterSeconds"]), false
		}
		return wire.NewError(wire.CodeInternalError, "service temporarily unavailable; retry later"), true
	case codes.Unavailable, codes.Aborted:
		if reason, meta := apierr.Info(st.Err()); reason == commonv1.ErrorReason_ERROR_REASON_BACKEND_UNAVAILABLE {
			if seconds, err := strconv.Atoi(meta["retryAfterSeconds"]); err == nil && seconds > 0 {
				// The backend said when to come back (its 503's
				// Retry-After): data.retryAfterSeconds, as for a limit.
				// Expected, like a limit: the aggregator logged it.
				seconds = ratelimit.ClientRetryAfter(seconds)
				e := wire.NewError(wire.CodeInternalError, "the server behind this request is unavailable; retry after "+strconv.Itoa(seconds)+"s")
				e.Data = map[string]int{"retryAfterSeconds": seconds}
				return e, false
			}
			return wire.NewError(wire.CodeInternalError, "the server behind this request is unavailable; retry later"), true
		}
		return wire.NewError(wire.CodeInternalError, "service temporarily unavailable; retry later"), true
	case codes.FailedPrecondition, codes.AlreadyExists:
		return wire.NewError(wire.CodeInternalError, "the request cannot be served in the current state"), true
	case codes.Unauthenticated, codes.PermissionDenied:
		// The gateway's own service credential was refused: a deployment
		// error, never the MCP caller's fault or business.
		return wire.NewError(wire.CodeInternalError, "internal error"), true
	default: // Internal, DataLoss, OK (never passed here)
		return wire.NewError(wire.CodeInternalError, "internal error"), true
	}
}

// RateLimited is the answer to a request a rate limit refused, in both
// eras: error code 429 in HTTP 429 with Retry-After, and data.retryAfterSeconds,
// both from the service's ErrorInfo (whole seconds; at least 1 whatever
// it says).
func RateLimited(retryAfter string) *wire.Error {
	seconds, err := strconv.Atoi(retryAfter)
	if err != nil {
		seconds = 1
	}
	seconds = ratelimit.ClientRetryAfter(seconds)
	e := wire.NewError(wire.CodeRateLimited, ratelimit.ClientMessage(seconds))
	e.Data = map[string]int{"retryAfterSeconds": seconds}
	e.HTTPStatus = http.StatusTooManyRequests
	e.RetryAfter = seconds
	return e
}

// TaskRequired is the answer to a call of a tool that must run as a task
// from a client that cannot take one: a Modern client lacks the tasks
// extension (-32021, naming it), a Legacy one sent no params.task (-32601,
// as 2025-11-25 has servers answer it).
func TaskRequired(era mcpspec.Era) *wire.Error {
	if era == mcpspec.EraModern {
		return wire.MissingTasksCapability("this tool runs only as a task: declare the client capability extensions[\"" + wire.TasksExtension + "\"]")
	}
	return wire.NewError(wire.CodeMethodNotFound, "this tool must be called as a task: send tools/call with params.task")
}

// TaskFailed is a failed task's error as its client, which declared caps,
// gets it: the JSON-RPC error the task stored (code, message, data),
// passed on by the rule of a backend's own error; one that cannot be read
// is an internal error.
func TaskFailed(errorJSON string, era mcpspec.Era, caps json.RawMessage) *wire.Error {
	var stored struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if json.Unmarshal([]byte(errorJSON), &stored) != nil {
		return wire.NewError(wire.CodeInternalError, "the task failed")
	}
	b := backend{code: stored.Code, message: stored.Message}
	if len(stored.Data) > 0 && string(stored.Data) != "null" {
		b.dataJSON = string(stored.Data)
	}
	return b.translate(era, "tools/call", caps)
}

// TaskCancelled is a Legacy tasks/result's answer for a cancelled task,
// which has no result to give.
func TaskCancelled(id string) *wire.Error {
	e := wire.NewError(wire.CodeInternalError, "the task was cancelled")
	e.Data = map[string]any{wire.MetaRelatedTask: map[string]string{"taskId": id}}
	return e
}

// FromError maps err of a service call to MCP, logging internal detail
// with ctx (the logger adds the trace id from it; the client gets the id
// too, to quote in a report).
func FromError(ctx context.Context, log *slog.Logger, err error, era mcpspec.Era, method string) *wire.Error {
	return FromCallError(ctx, log, err, era, method, nil)
}

// FromCallError is FromError for a request that reached a backend for a
// client that declared caps: a backend's error that only such a client
// may get (a 2025-11-25 URL elicitation required) is passed on to it.
func FromCallError(ctx context.Context, log *slog.Logger, err error, era mcpspec.Era, method string, caps json.RawMessage) *wire.Error {
	st, ok := status.FromError(err)
	if !ok {
		if errors.Is(err, context.Canceled) {
			st = status.New(codes.Canceled, err.Error())
		} else {
			st = status.New(codes.Unknown, err.Error())
		}
	}
	mcpErr, internal := fromStatus(st, era, method, caps)
	if internal {
		attrs := []any{"method", method, "code", st.Code().String(), "reason", apierr.Reason(err).String(), "detail", st.Message()}
		if traceID := trace.SpanContextFromContext(ctx).TraceID(); traceID.IsValid() {
			mcpErr.Data = map[string]string{"traceId": traceID.String()}
		}
		log.ErrorContext(ctx, "service call failed", attrs...)
	}
	return mcpErr
}

// backend is a backend's own JSON-RPC error as the aggregator passed it.
type backend struct {
	code     int64
	message  string
	dataJSON string
}

// translate re-emits a backend's error. Codes that describe the client's
// request are kept; codes about the aggregator's own exchange with the
// backend (parse errors, header or version problems on that hop, a method
// the backend lacks though the gateway serves it) become internal errors
// with a fixed message, since the client did nothing wrong. Any other
// error is the backend's answer to the request, its message and data
// passed on (with the backend's credentials cut out by the aggregator) as
// a direct client would see them, under -32603.
func (b backend) translate(era mcpspec.Era, method string, caps json.RawMessage) *wire.Error {
	if b.message == "" {
		return wire.NewError(wire.CodeInternalError, "the server behind this request failed")
	}
	code, msg := int(b.code), b.message
	var out *wire.Error
	switch {
	case method == "resources/read" && (code == wire.CodeResourceNotFound || code == wire.CodeInvalidParams && b.namesURI()):
		// A resource not found, the 2026-07-28 way (go-sdk answers so in
		// both eras) or 2025-11-25's: answered as the gateway answers a
		// URI a policy or filter refuses, neither the backend's words nor
		// its spelling of the URI telling a refused URI from a missing one.
		return resourceNotFound(era)
	case code == wire.CodeInvalidParams:
		out = wire.NewError(code, msg)
	case code == wire.CodeResourceNotFound && era == mcpspec.EraLegacy:
		out = wire.NewError(wire.CodeResourceNotFound, msg)
	case code == wire.CodeResourceNotFound:
		out = wire.NewError(wire.CodeInvalidParams, msg)
	case code == wire.CodeMissingCapability && era == mcpspec.EraModern:
		out = wire.NewError(code, msg)
	case code == wire.CodeURLElicitationRequired && era == mcpspec.EraLegacy && mcpspec.Declares(caps, "elicitation.url"):
		// 2025-11-25's way for a server to send the client to a URL (its
		// data names the elicitations), to a client that declared URL
		// mode; any other client, and 2026-07-28 (which asks for a URL in
		// an input request instead), get an internal error.
		out = wire.NewError(code, msg)
	case code == wire.CodeParseError, code == wire.CodeInvalidRequest, code == wire.CodeMethodNotFound, code == wire.CodeHeaderMismatch,
		code == wire.CodeUnsupportedVer:
		return wire.NewError(wire.CodeInternalError, "the server behind this request failed")
	default:
		// Internal errors and implementation-defined codes: keep the
		// backend's message under a code the spec defines.
		out = wire.NewError(wire.CodeInternalError, msg)
	}
	if b.dataJSON != "" && json.Valid([]byte(b.dataJSON)) {
		out.Data = json.RawMessage(b.dataJSON)
	}
	return out
}

// resourceNotFound is the answer to a read of a URI that is missing,
// refused or unknown to its backend alike: 2026-07-28 requires -32602,
// 2025-11-25 defines -32002. The read adds the URI asked for as data.
func resourceNotFound(era mcpspec.Era) *wire.Error {
	if era == mcpspec.EraLegacy {
		return wire.NewError(wire.CodeResourceNotFound, "resource not found")
	}
	return wire.NewError(wire.CodeInvalidParams, "resource not found")
}

// namesURI reports whether the error's data names a uri, as a resource
// not found's does.
func (b backend) namesURI() bool {
	var data struct {
		URI *string `json:"uri"`
	}
	return json.Unmarshal([]byte(b.dataJSON), &data) == nil && data.URI != nil
}

// backendError reads a backend's error from the typed detail the
// aggregator attaches (services/backenderr).
func backendError(err error) (backend, bool) {
	be, ok := backenderr.From(err)
	if !ok {
		return backend{}, false
	}
	return backend{code: be.GetCode(), message: be.GetMessage(), dataJSON: be.GetDataJson()}, true
}
