package backend

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"time"
)

// Per-caller credentials (see oauth.go for the OAuth modes). A
// passthrough backend acts as the calling user: each call carries the caller's own bearer
// token (the one the gateway validated, RequestContext.subject_token), and
// only when that token's aud claim names the backend's audience, so a
// token issued for one service is never replayed to another. The token
// travels in the call's context (WithCaller) to both the raw path and the
// go-sdk transport; requests without a caller (the handshake, listings,
// probes) carry only the static headers. Every HTTP client of a backend
// follows redirects on the backend's own origin only (redirect.go), so the
// token never reaches another host. It is never logged and never part of
// an error's text.

// ErrCallerCredential: the call needs the caller's own token for this
// backend and there is none that may go there (no token forwarded, or its
// audience does not name the backend). The text is safe for the client.
var ErrCallerCredential = errors.New("this tool's server acts as the calling user and needs the caller's own bearer token (signed in through the gateway's OIDC issuer; for pass-through, issued for this server: its aud claim must name the server); the caller's credential does not qualify")

type callerKey struct{}

// maxSubjectToken bounds the token looked at (the gateway's header limit
// bounds it already; this keeps the decoding here bounded on its own).
const maxSubjectToken = 16 << 10

// NeedsCaller reports whether the backend's calls carry the caller's
// identity (passthrough, tokenExchange).
func (c *Client) NeedsCaller() bool {
	return c.cfg.Auth.Mode == AuthPassthrough || c.cfg.Auth.Mode == AuthTokenExchange
}

// WithCaller returns ctx carrying the Authorization of a call to this
// backend on behalf of the caller subject, whose validated bearer token is
// subjectToken: nothing for static credentials (whatever the token); the
// caller's token when its aud names the backend (passthrough); a token
// exchanged for it (tokenExchange); the gateway's own (clientCredentials).
// A call that cannot be authenticated fails here, before anything is sent
// to the backend: ErrCallerCredential, or a *TokenError.
func (c *Client) WithCaller(ctx context.Context, subject, subjectToken string) (context.Context, error) {
	var value string
	switch c.cfg.Auth.Mode {
	case AuthPassthrough:
		if subjectToken == "" || len(subjectToken) > maxSubjectToken || !audienceNames(subjectToken, c.cfg.Auth.Audience) {
			return ctx, ErrCallerCredential
		}
		value = "Bearer " + subjectToken
	case AuthTokenExchange:
		if subjectToken == "" || len(subjectToken) > maxSubjectToken {
			return ctx, ErrCallerCredential
		}
		v, err := c.tokens.exchanged(ctx, subject, subjectToken)
		if err != nil {
			return ctx, err
		}
		value = v
	case AuthClientCredentials:
		v, err := c.tokens.serviceToken(ctx)
		if err != nil {
			return ctx, err
		}
		value = v
	default:
		return ctx, nil
	}
	return context.WithValue(ctx, callerKey{}, &callerCred{authorization: value}), nil
}

// callerCred is a call's credential (WithCaller), and the challenge of a
// 401 that refused it: the go-sdk paths (held calls, calls on a session of
// their own) see only an HTTP error, so the transport keeps the challenge
// here for classify to report.
type callerCred struct {
	authorization string
	challenge     atomic.Pointer[ChallengeError]
}

// callerCredential is the credential WithCaller put in ctx, or nil.
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

// jwtClaims decodes the claims of a JWT without checking its signature:
// the gateway verified the token before forwarding it over the
// authenticated service channel; this only decides where it may go and
// how long what was exchanged for it may be kept.
func jwtClaims(token string) (aud json.RawMessage, exp float64, ok bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, 0, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, 0, false
	}
	var claims struct {
		Aud json.RawMessage `json:"aud"`
		Exp float64         `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil {
		return nil, 0, false
	}
	return claims.Aud, claims.Exp, true
}

// tokenExpiry is a JWT's exp, if it is one and has one.
func tokenExpiry(token string) (time.Time, bool) {
	_, exp, ok := jwtClaims(token)
	if !ok || exp <= 0 {
		return time.Time{}, false
	}
	return time.Unix(int64(exp), 0), true
}

// audienceNames reports whether the JWT token's aud claim (a string or an
// array of strings) contains audience.
func audienceNames(token, audience string) bool {
	aud, _, ok := jwtClaims(token)
	if !ok || len(aud) == 0 {
		return false
	}
	var one string
	if json.Unmarshal(aud, &one) == nil {
		return one == audience
	}
	var many []string
	if json.Unmarshal(aud, &many) != nil {
		return false
	}
	for _, a := range many {
		if a == audience {
			return true
		}
	}
	return false
}
