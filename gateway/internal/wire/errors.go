// Package wire is the gateway's MCP wire format, pure: JSON-RPC framing,
// the error codes, the Modern request rules (_meta, mirrored headers), the
// SSE framing and the shaping of results for each era. Nothing here does
// I/O or talks to another service; the era rule itself lives in
// services/mcpspec, shared with the demo backend.
package wire

import (
	"net/http"
	"strconv"

	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

// JSON-RPC and MCP error codes the gateway emits: the codes the spec
// defines, and one application code (CodeRateLimited).
const (
	CodeParseError        = -32700
	CodeInvalidRequest    = -32600
	CodeMethodNotFound    = -32601
	CodeInvalidParams     = -32602
	CodeInternalError     = -32603
	CodeResourceNotFound  = -32002 // Legacy (2025-11-25) only
	CodeHeaderMismatch    = -32020
	CodeMissingCapability = -32021
	CodeUnsupportedVer    = -32022
	// CodeURLElicitationRequired: a backend's error sending a 2025-11-25
	// client that declared URL mode to its elicitations' URLs (Legacy
	// only; 2026-07-28 must not emit it).
	CodeURLElicitationRequired = -32042
	// CodeRateLimited refuses a request a rate limit (config rateLimits)
	// did not admit: HTTP 429 with Retry-After, data.retryAfterSeconds.
	// Neither MCP revision defines a code for it, and 2026-07-28 forbids
	// new codes in -32000..-32019 and undefined ones in -32020..-32099
	// (JSON-RPC reserves -32768..-32000 besides), so it is an
	// application's code outside them all: 429, the HTTP status it
	// travels with. (It was -32029 before; see docs/configuration.md.)
	CodeRateLimited = 429
)

// Error is a JSON-RPC error on its way to the client.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
	// HTTPStatus, when set, is the HTTP status of the answer in place of
	// the code's (429 for a stream past its limit).
	HTTPStatus int `json:"-"`
	// RetryAfter, when not zero, is the Retry-After (seconds) of an answer
	// with HTTPStatus: when the client may try again.
	RetryAfter int `json:"-"`
}

func (e *Error) Error() string { return strconv.Itoa(e.Code) + " " + e.Message }

// NewError returns an error without data.
func NewError(code int, msg string) *Error { return &Error{Code: code, Message: msg} }

// InvalidParams is the common -32602 with an "invalid params: " prefix.
func InvalidParams(detail string) *Error {
	return NewError(CodeInvalidParams, "invalid params: "+detail)
}

// ModernStatus is the HTTP status of a Modern error response: the spec
// fixes 404 for an unknown method and 400 for malformed requests; other
// errors travel as JSON-RPC errors in a 200 response, as go-sdk servers
// send them, so that clients see the message instead of a bare HTTP
// failure. Legacy errors are always 200.
func (e *Error) ModernStatus() int {
	if e.HTTPStatus != 0 {
		return e.HTTPStatus
	}
	switch e.Code {
	case CodeMethodNotFound:
		return http.StatusNotFound
	case CodeParseError, CodeInvalidRequest, CodeInvalidParams, CodeHeaderMismatch, CodeMissingCapability, CodeUnsupportedVer:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// ClientFault reports whether e answers what the client got wrong (bad
// input, an item it may not see, a limit): an HTTP 4xx in Modern, and
// Legacy's resource not found. What else fails is the service's.
func (e *Error) ClientFault() bool {
	s := e.ModernStatus()
	return s >= 400 && s < 500 || e.Code == CodeResourceNotFound
}

// UnsupportedVersion is -32022 for a request that declared requested
// itself (in _meta or its header). Its supported are the versions such a
// request may declare, which a client retries with: Modern only, as
// Legacy is negotiated by initialize, not declared per request, and a
// client retrying with it would be refused again.
func UnsupportedVersion(requested string) *Error {
	e := NewError(CodeUnsupportedVer, "unsupported protocol version: "+requested)
	e.Data = map[string]any{"supported": []string{mcpspec.Modern}, "requested": requested}
	return e
}

// MethodNotFound is -32601 for method.
func MethodNotFound(method string) *Error {
	return NewError(CodeMethodNotFound, "method not found: "+method)
}
