// How a backend's failures become the caller's errors: one mapping for
// the raw path and the go-sdk sessions, with the backend's secrets out of
// every text (redact.go).

package backend

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// classify maps an SDK or raw-path error to the caller's own context
// error, ErrMalformedRequest, ErrProtocolViolation, ErrTimeout,
// *ProtocolError, *ChallengeError or ErrUnavailable, with the backend's
// secrets and the call's own Authorization removed (redact.go).
func (c *Client) classify(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if refused := refusedRedirect(err); refused != nil {
		return refused
	}
	err = recordedAnswer(ctx, err)
	var challenge *ChallengeError
	if errors.As(err, &challenge) {
		// A credential was refused; the backend is fine.
		return c.refused(ctx, challenge)
	}
	if errors.Is(err, ErrMalformedRequest) {
		// The rejection's body is bounded only once its secrets are out,
		// so that none is cut in two.
		return fmt.Errorf("%w (%s)", ErrMalformedRequest, bound(c.redactCall(ctx, err.Error()), maxRejectionText))
	}
	if errors.Is(err, ErrProtocolViolation) {
		// One bad answer; the session stays.
		return fmt.Errorf("%w (%s)", ErrProtocolViolation, c.redactCall(ctx, err.Error()))
	}
	if errors.Is(err, errBudget) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w after %s", ErrTimeout, c.budget(ctx))
	}
	if wire, ok := backendsOwn(err); ok {
		if name, caps := missingCapability(wire); caps != "" {
			return &ProtocolError{Code: mcp.CodeMissingRequiredClientCapabilities, Message: "missing required client capability: " + name, Data: caps}
		}
		set := c.redactor.forCall(ctx)
		return &ProtocolError{Code: wire.Code, Message: set.redactText(wire.Message), Data: set.redactJSON(string(wire.Data))}
	}
	var answered *statusError
	if errors.As(err, &answered) && answered.status == http.StatusTooManyRequests {
		// Refused unread: the caller may send it again when the backend
		// says, and the backend is up.
		return &RateLimitedError{RetryAfterSeconds: answered.retryAfter}
	}
	un := &unavailableError{text: c.redactCall(ctx, err.Error()), failure: failureOf(err), advice: adviceFor(err)}
	if errors.As(err, &answered) && answered.status == http.StatusServiceUnavailable && answered.retryAfterGiven {
		// Overloaded or in maintenance, and it says for how long: the
		// caller may wait that long rather than guess.
		un.retryAfter = answered.retryAfter
	}
	return un
}

// recordedAnswer is err, a failure under a go-sdk session, or in its
// place the failure the transport kept for the call in ctx
// (callerCred.answer), which says what go-sdk's error does not: a
// refused credential, a limit, a Retry-After, a line too long. The
// backend's own JSON-RPC error and a timeout stay.
func recordedAnswer(ctx context.Context, err error) error {
	cred := callerCredential(ctx)
	if cred == nil {
		return err
	}
	answer := cred.answer.Load()
	if _, own := backendsOwn(err); answer == nil || own || errors.Is(err, errBudget) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return *answer
}

// backendsOwn is the JSON-RPC error the backend answered, if err is one:
// not one go-sdk makes of a failure of its own (a closed connection, a
// missing session, a request its transport could not send).
func backendsOwn(err error) (*jsonrpc.Error, bool) {
	var wire *jsonrpc.Error
	if errors.As(err, &wire) && !errors.Is(err, mcp.ErrConnectionClosed) && !errors.Is(err, mcp.ErrSessionMissing) && wire.Code != rejectedCode {
		return wire, true
	}
	return nil, false
}

// refused is the error of a 401 or 403 challenge to the call in ctx. The
// caller can act on a challenge to its own credential (tokenExchange: it
// signs in again, or asks for the scope a 403 names) and gets it,
// redacted. A refused static or client-credentials
// credential is the aggregator's own: the caller gets the challenge-less
// error, the operator the challenge in the log, redacted.
func (c *Client) refused(ctx context.Context, ch *ChallengeError) error {
	text := bound(c.redactCall(ctx, ch.Challenge), maxChallenge)
	if c.cfg.Auth.Mode == AuthTokenExchange {
		return &ChallengeError{Challenge: text, Caller: true, Status: ch.Status}
	}
	mode := c.cfg.Auth.Mode
	if mode == AuthStatic {
		mode = "static"
	}
	c.log.WarnContext(ctx, "the backend refused the aggregator's own credentials: check them", "status", ch.Status, "auth", mode, "challenge", text)
	return &ChallengeError{Status: ch.Status}
}

// bound cuts text to at most n bytes.
func bound(text string, n int) string {
	if len(text) > n {
		return text[:n]
	}
	return text
}

// rejectedCode is the code the SDK's transport gives requests it could not
// deliver (HTTP failures); they are transport errors, not backend answers.
const rejectedCode = -32005

// missingCapability is the name and the requiredCapabilities (JSON) of a
// backend's error that says a tool needed a client capability the caller did not
// declare, "" for any other. A Modern backend says so with -32021; a
// go-sdk backend in a Legacy session (the plain route's, which declares
// no capabilities, as the caller declared none) fails the call with its
// own text instead, which is read here, so that the caller gets the same
// answer on every route.
func missingCapability(e *jsonrpc.Error) (name, requiredJSON string) {
	if e.Code == mcp.CodeMissingRequiredClientCapabilities {
		return "", ""
	}
	switch {
	case strings.Contains(e.Message, `client does not support "url" elicitation`):
		return "elicitation (url)", `{"requiredCapabilities":{"elicitation":{"url":{}}}}`
	case strings.Contains(e.Message, "client does not support elicitation"),
		strings.Contains(e.Message, `client does not support "form" elicitation`):
		return "elicitation", `{"requiredCapabilities":{"elicitation":{}}}`
	case strings.Contains(e.Message, "client does not support CreateMessage"):
		return "sampling", `{"requiredCapabilities":{"sampling":{}}}`
	}
	return "", ""
}
