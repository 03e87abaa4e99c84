package backend

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/services/callerid"
)

// Per-caller credentials (see oauth.go for the OAuth modes). A
// tokenExchange backend acts as the calling user: each call carries a
// token the authorization server exchanged for the caller's own (the one
// the gateway validated, RequestContext.subject_token), never the
// caller's token itself, which the gateway accepts and a backend could
// replay there. The caller's token is bound to the principal asserted
// with it before it gets here (the server's admission, callerid.Bound).
// The credential travels in the call's context (WithCaller) to both the
// raw path and the go-sdk transport; requests without a caller (the
// handshake, listings, probes) carry only the configured credential.
// Every HTTP client of a backend follows redirects on the backend's own
// origin only (redirect.go), so no credential reaches another host. None
// is ever logged or part of an error's text.

// ErrCallerCredential: the call needs the caller's own token for this
// backend and there is none that may be used (no token forwarded, or one
// that does not belong to the principal). The text is safe for the client.
var ErrCallerCredential = errors.New("this tool's server acts as the calling user and needs the caller's own bearer token (signed in through the gateway's OIDC issuer); the caller's credential does not qualify")

type callerKey struct{}

// NeedsCaller reports whether the backend's calls carry the caller's
// identity (tokenExchange).
func (c *Client) NeedsCaller() bool {
	return c.cfg.Auth.Mode == AuthTokenExchange
}

// WithCaller returns ctx carrying the credential of a call to this
// backend on behalf of the caller subject, whose validated bearer token is
// subjectToken: for static credentials, the configured headers (whatever
// the token); a token exchanged for it (tokenExchange); the gateway's own
// (clientCredentials).
// A call that cannot be authenticated fails here, before anything is sent
// to the backend: ErrCallerCredential, or a *TokenError.
func (c *Client) WithCaller(ctx context.Context, subject, subjectToken string) (context.Context, error) {
	cred := &callerCred{key: serviceKey}
	var err error
	switch c.cfg.Auth.Mode {
	case AuthTokenExchange:
		if subjectToken == "" || len(subjectToken) > callerid.MaxToken {
			return ctx, ErrCallerCredential
		}
		cred.key = exchangeKey(subject, subjectToken)
		cred.authorization, err = c.tokens.exchanged(ctx, subject, cred.key, subjectToken)
	case AuthClientCredentials:
		cred.authorization, err = c.tokens.serviceToken(ctx)
	}
	if err != nil {
		return ctx, err
	}
	return context.WithValue(ctx, callerKey{}, cred), nil
}

// callerCred is the credential of a call (WithCaller) or of a request
// the aggregator makes on the session every caller shares (sharedRequest),
// and what its requests met that go-sdk reports only in part.
type callerCred struct {
	// authorization is the Authorization the requests carry; "" for the
	// configured credential (the static headers, or the client-credentials
	// token the stack adds).
	authorization string
	// key is where authorization is cached (tokenSource.refused).
	key [32]byte
	// shared marks a request on the session every caller shares, whose
	// go-sdk connection an HTTP error answering it must not end
	// (sdkTransport).
	shared bool
	// answer is the last failure one of its requests met under a go-sdk
	// session, read as the raw path reads it: an HTTP error answer
	// (rejection; go-sdk reports its status alone) or a line past the
	// bound on a message (boundedLines; go-sdk reports a lost stream).
	// classify reports it in go-sdk's error's place (recordedAnswer).
	answer atomic.Pointer[error]
	// abandon, set on the credential of a held call's session
	// (CallToolAsking), ends the call when the request carrying the
	// client's answer to the backend meets an error (answerFailed):
	// go-sdk drops that request's failure, so the backend's tool would
	// wait for an answer that is not coming and the caller for the
	// call's timeout. abandoned says it did.
	abandon   context.CancelFunc
	abandoned atomic.Bool
}

// sharedRequest returns ctx for a request the aggregator makes on the
// session every caller shares (a subscription, which callers share too),
// carrying the configured credential.
func sharedRequest(ctx context.Context) context.Context {
	return context.WithValue(ctx, callerKey{}, &callerCred{key: serviceKey, shared: true})
}

// record keeps err as the last failure of cred's requests, unless the
// call ended on its answer's.
func (cred *callerCred) record(err error) {
	if !cred.abandoned.Load() {
		cred.answer.Store(&err)
	}
}

// answerFailed ends the held call whose client's answer met err and
// keeps err as its failure: the requests that follow (the cancellation
// go-sdk sends then) may fail too, but they are not what ended it.
func (cred *callerCred) answerFailed(err error) {
	if cred.abandoned.CompareAndSwap(false, true) {
		cred.answer.Store(&err)
		cred.abandon()
	}
}

// callerCredential is the credential WithCaller or sharedRequest put in
// ctx, or nil.
func callerCredential(ctx context.Context) *callerCred {
	v, _ := ctx.Value(callerKey{}).(*callerCred)
	return v
}

// callerAuthorization is the Authorization WithCaller put in ctx, or "".
func callerAuthorization(ctx context.Context) string {
	if cred := callerCredential(ctx); cred != nil {
		return cred.authorization
	}
	return ""
}

// tokenExpiry is a JWT's exp, if it is one and has one.
func tokenExpiry(token string) (time.Time, bool) {
	claims, ok := callerid.Claims(token)
	if !ok {
		return time.Time{}, false
	}
	exp, _ := claims["exp"].(float64)
	if exp <= 0 {
		return time.Time{}, false
	}
	return time.Unix(int64(exp), 0), true
}
