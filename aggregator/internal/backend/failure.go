package backend

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/listing"
)

// Failure is the kind of a backend's last failure, the one part of it
// every caller of ListBackends may see: the failure's text names URLs,
// hosts and ports (and, from a backend's own answer, anything), so only
// operators get that (see Status.LastError).
type Failure int

// Failure kinds.
const (
	FailureNone Failure = iota
	// FailureUnreachable: no connection (refused, reset, no route, no such
	// host).
	FailureUnreachable
	// FailureTimeout: no answer within the timeout.
	FailureTimeout
	// FailureRedirected: a redirect to another origin, not followed.
	FailureRedirected
	// FailureProtocol: an answer outside the MCP protocol, or lists that
	// page forever.
	FailureProtocol
	// FailureRejected: a JSON-RPC error from the backend.
	FailureRejected
	// FailureUnavailable: any other failure (an HTTP error status, a
	// session that broke).
	FailureUnavailable
)

// Reason is the failure's generic text.
func (f Failure) Reason() string {
	return [...]string{
		FailureNone:        "",
		FailureUnreachable: "backend unreachable",
		FailureTimeout:     "backend timed out",
		FailureRedirected:  "backend redirected to another origin (not followed)",
		FailureProtocol:    "backend answered outside the MCP protocol",
		FailureRejected:    "backend answered with an error",
		FailureUnavailable: "backend unavailable",
	}[f]
}

// failureOf is the kind of err, from the error a backend operation ended
// with or from its cause (classify keeps the kind of what it flattens).
func failureOf(err error) Failure {
	var un *unavailableError
	var op *net.OpError
	var dns *net.DNSError
	var perr *ProtocolError
	var wire *jsonrpc.Error
	switch {
	case err == nil:
		return FailureNone
	case errors.Is(err, ErrRedirected), errors.Is(err, errTooManyRedirects):
		return FailureRedirected
	case errors.Is(err, ErrTimeout), errors.Is(err, errBudget), errors.Is(err, context.DeadlineExceeded):
		return FailureTimeout
	case errors.As(err, &un):
		return un.failure
	case errors.As(err, &op), errors.As(err, &dns):
		return FailureUnreachable
	case errors.Is(err, ErrProtocolViolation), errors.Is(err, listing.ErrCursorLoop), errors.Is(err, listing.ErrTooLarge):
		return FailureProtocol
	case errors.As(err, &perr), errors.As(err, &wire) && wire.Code != rejectedCode, errors.As(err, new(*RateLimitedError)):
		return FailureRejected
	default:
		return FailureUnavailable
	}
}

// unavailableError is ErrUnavailable with its cause's text (secrets
// removed) and kind; the cause itself is not kept, so nothing branches on
// what the SDK wrapped.
type unavailableError struct {
	text    string
	failure Failure
	// advice is Advice's, read from the cause (adviceFor).
	advice string
	// retryAfter is the Retry-After of a backend's 503, in seconds; 0
	// when it gave none.
	retryAfter int
}

// RetryAfter is how long, in seconds, a backend that answered a request
// HTTP 503 asked to be left alone (its Retry-After), or 0: err is not
// such an answer, or it named no time.
func RetryAfter(err error) int {
	var un *unavailableError
	if errors.As(err, &un) {
		return un.retryAfter
	}
	return 0
}

func (e *unavailableError) Error() string { return ErrUnavailable.Error() + ": " + e.text }
func (e *unavailableError) Unwrap() error { return ErrUnavailable }

// statusError is a backend's answer to a request with an HTTP error
// status (503, 429, a proxy's 502): the request failed, but the backend,
// or what stands before it, answered, so its session is not broken.
type statusError struct {
	method string
	status int
	// retryAfter is the answer's Retry-After, in seconds (retryAfterSeconds);
	// retryAfterGiven says the answer had one.
	retryAfter      int
	retryAfterGiven bool
}

// RateLimitedError is a backend's 429: it refused the request without
// running it, and asks to be asked again in RetryAfterSeconds.
type RateLimitedError struct{ RetryAfterSeconds int }

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("the backend is limiting its callers: retry after %d s", e.RetryAfterSeconds)
}

// retryAfterSeconds reads a Retry-After header, delta-seconds or an HTTP
// date, as whole seconds from now: at least 1 (also for none, or one that
// cannot be read) and at most an hour, which bounds the wait a backend
// can make its clients promise.
func retryAfterSeconds(header string, now time.Time) int {
	secs := 1
	if n, err := strconv.Atoi(strings.TrimSpace(header)); err == nil {
		secs = n
	} else if at, err := http.ParseTime(header); err == nil {
		secs = int(math.Ceil(at.Sub(now).Seconds()))
	}
	return min(max(secs, 1), 3600)
}

func (e *statusError) Error() string {
	if e.method == "" {
		// A request without a method: a reply to the backend.
		return fmt.Sprintf("backend answered HTTP %d to a reply", e.status)
	}
	return fmt.Sprintf("%s: backend answered HTTP %d", e.method, e.status)
}

// answered reports whether err is a backend's answer with an HTTP error
// status: a session that carried it is kept, since closing a Legacy one
// would end every other call in flight on it at the backend.
func answered(err error) bool {
	var se *statusError
	return errors.As(err, &se)
}
