package backend

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
)

// Per-caller credentials. A backend configured with PassthroughAudience
// acts as the calling user: each call carries the caller's own bearer
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
var ErrCallerCredential = errors.New("this tool's server acts as the calling user and needs the caller's own token issued for it (its aud claim must name the server's audience); the caller's token does not qualify")

type callerKey struct{}

// maxSubjectToken bounds the token looked at (the gateway's header limit
// bounds it already; this keeps the decoding here bounded on its own).
const maxSubjectToken = 16 << 10

// NeedsCaller reports whether the backend's calls carry the caller's
// identity.
func (c *Client) NeedsCaller() bool { return c.cfg.PassthroughAudience != "" }

// WithCaller returns ctx carrying the Authorization for this backend on
// behalf of the caller whose validated bearer token is subjectToken. A
// backend with static credentials gets ctx as it is, whatever the token;
// a passthrough backend refuses a call without a token whose aud names it
// with ErrCallerCredential, before anything is sent.
func (c *Client) WithCaller(ctx context.Context, subjectToken string) (context.Context, error) {
	if !c.NeedsCaller() {
		return ctx, nil
	}
	if subjectToken == "" || len(subjectToken) > maxSubjectToken || !audienceNames(subjectToken, c.cfg.PassthroughAudience) {
		return ctx, ErrCallerCredential
	}
	return context.WithValue(ctx, callerKey{}, "Bearer "+subjectToken), nil
}

// callerAuthorization is the Authorization WithCaller put in ctx, or "".
func callerAuthorization(ctx context.Context) string {
	v, _ := ctx.Value(callerKey{}).(string)
	return v
}

// audienceNames reports whether the JWT token's aud claim (a string or an
// array of strings) contains audience. The signature is not checked here:
// the gateway verified the token before forwarding it over the
// authenticated service channel; this only decides where it may go.
func audienceNames(token, audience string) bool {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return false
	}
	var claims struct {
		Aud json.RawMessage `json:"aud"`
	}
	if json.Unmarshal(payload, &claims) != nil || len(claims.Aud) == 0 {
		return false
	}
	var one string
	if json.Unmarshal(claims.Aud, &one) == nil {
		return one == audience
	}
	var many []string
	if json.Unmarshal(claims.Aud, &many) != nil {
		return false
	}
	for _, a := range many {
		if a == audience {
			return true
		}
	}
	return false
}
