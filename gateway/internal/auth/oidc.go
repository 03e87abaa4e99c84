package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/switchboard-mcp/switchboard/services/callerid"
	"github.com/switchboard-mcp/switchboard/services/config"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// acceptedAlgorithms are the asymmetric JWS algorithms OIDC providers use.
// Symmetric algorithms are refused: the gateway must never accept a token
// signed with a key the client could know.
var acceptedAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// clockLeeway tolerates small clock differences with the issuer.
const clockLeeway = 30 * time.Second

// maxJWKSBytes bounds the JWKS document read from the issuer.
const maxJWKSBytes = 1 << 20

// OIDC validates JWT bearer tokens against an issuer's JWKS.
//
// The keys are held in an atomic pointer: verifying a token whose key is
// held takes no lock and never waits on the issuer. Fetches run one at a
// time in a goroutine of their own (the refresh state's lock is held only
// to start or finish one), at most one per MinInterval, and after a
// failure only once the back-off has passed; see config.JWKSRefresh.
type OIDC struct {
	cfg         config.OIDC
	client      *http.Client
	groupsClaim string
	now         func() time.Time

	keys atomic.Pointer[keySet]

	mu       sync.Mutex // guards the refresh state below, never held during a fetch
	inflight *refresh   // the fetch under way, nil when none
	next     time.Time  // no fetch starts before this
	failures int        // consecutive failed fetches
}

// keySet is one fetched JWKS.
type keySet struct {
	set       jose.JSONWebKeySet
	fetchedAt time.Time
}

// refresh is one fetch; done is closed when it ended, with err set.
type refresh struct {
	done chan struct{}
	err  error
}

// NewOIDC builds an OIDC authenticator. Keys are fetched on first use,
// with client (nil: a default one) made to follow no redirect
// (WithoutRedirects). The issuer and the JWKS URL must be https, or http
// to a loopback address (config.SecureURL).
func NewOIDC(cfg config.OIDC, client *http.Client) (*OIDC, error) {
	if cfg.Issuer == "" || cfg.Audience == "" || cfg.JWKSURL == "" {
		return nil, errors.New("gateway.auth.oidc: issuer, audience and jwksURL are required")
	}
	if err := config.SecureURL(cfg.Issuer); err != nil {
		return nil, fmt.Errorf("gateway.auth.oidc.issuer: %w", err)
	}
	if err := config.SecureURL(cfg.JWKSURL); err != nil {
		return nil, fmt.Errorf("gateway.auth.oidc.jwksURL: %w", err)
	}
	cfg = cfg.WithDefaults()
	return &OIDC{cfg: cfg, client: WithoutRedirects(client), groupsClaim: cfg.GroupsClaim, now: time.Now}, nil
}

// KeepKeysOf gives o the signing keys prev holds, when prev verifies the
// same issuer's tokens against the same JWKS (a reload that changed other
// settings: the refresh bounds, the groups claim, the audience): keys
// already held outlast an outage of the issuer, a reload included.
func (o *OIDC) KeepKeysOf(prev Authenticator) {
	p, ok := prev.(*OIDC)
	if !ok || p.cfg.Issuer != o.cfg.Issuer || p.cfg.JWKSURL != o.cfg.JWKSURL {
		return
	}
	if held := p.keys.Load(); held != nil {
		o.keys.Store(held)
	}
}

// WithoutRedirects returns a copy of client (nil: a default client) that
// follows no redirect: a 3xx answer is the answer. The signing keys, the
// discovery document and the token request go to the URL configured or
// discovered, checked by config.SecureURL, and nowhere a redirect names
// (which could be plain http, or another server).
func WithoutRedirects(client *http.Client) *http.Client {
	c := &http.Client{}
	if client != nil {
		*c = *client
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

// HTTPStatusError describes an unexpected HTTP status, naming a redirect
// as one that is not followed (and never where it pointed).
func HTTPStatusError(what string, code int) error {
	if code >= 300 && code < 400 {
		return fmt.Errorf("%s: HTTP %d: redirects are not followed", what, code)
	}
	return fmt.Errorf("%s: HTTP %d", what, code)
}

// Authenticate implements Authenticator: the bearer token must name
// audience ("" is the configured audience) among its aud.
func (o *OIDC) Authenticate(r *http.Request, audience string) (*commonv1.Principal, error) {
	raw, ok := BearerToken(r)
	if !ok {
		return nil, ErrUnauthenticated
	}
	if audience == "" {
		audience = o.cfg.Audience
	}
	p, _, err := o.verify(r.Context(), raw, audience)
	// A principal the services would refuse (past their bounds, a control
	// character), or a token too large to bind to it, is refused here, at
	// the edge, rather than failing every request after it. (The console's
	// login, through Verify, says so in its own words.)
	if err == nil && (len(raw) > callerid.MaxToken || svcauth.CheckPrincipal(p) != nil) {
		return nil, ErrUnauthenticated
	}
	return p, err
}

// Verify checks a JWT as Authenticate does (signature by a key of the
// issuer, issuer, the configured audience, expiry, subject) and returns
// its principal and all of its claims. The operator console verifies ID
// tokens with it (its audience then the console's client id) and reads
// their nonce.
func (o *OIDC) Verify(ctx context.Context, raw string) (*commonv1.Principal, map[string]any, error) {
	return o.verify(ctx, raw, o.cfg.Audience)
}

// verify is the one check of a token, Authenticate's and Verify's: its
// aud must contain audience, exactly.
func (o *OIDC) verify(ctx context.Context, raw, audience string) (*commonv1.Principal, map[string]any, error) {
	tok, err := jwt.ParseSigned(raw, acceptedAlgorithms)
	if err != nil || len(tok.Headers) != 1 {
		return nil, nil, ErrUnauthenticated
	}
	key, err := o.key(ctx, tok.Headers[0].KeyID)
	if err != nil {
		return nil, nil, err
	}
	var std jwt.Claims
	extra := map[string]any{}
	if err := tok.Claims(key, &std, &extra); err != nil {
		return nil, nil, ErrUnauthenticated
	}
	expected := jwt.Expected{Issuer: o.cfg.Issuer, AnyAudience: jwt.Audience{audience}, Time: o.now()}
	if err := std.ValidateWithLeeway(expected, clockLeeway); err != nil || std.Subject == "" || std.Expiry == nil {
		return nil, nil, ErrUnauthenticated
	}
	// The one rule of claims to principal, which the aggregator applies
	// again to bind the forwarded token to the principal (callerid.Bound).
	return callerid.FromClaims(extra, o.groupsClaim), extra, nil
}

// TokenExpiry is when Authenticate stops accepting r's bearer token, a
// JWT it accepted for this same request (not verified again here): its
// exp and the clock leeway; false when the request carries none. A stream
// the token opened ends then.
func TokenExpiry(r *http.Request) (time.Time, bool) {
	raw, ok := BearerToken(r)
	if !ok {
		return time.Time{}, false
	}
	tok, err := jwt.ParseSigned(raw, acceptedAlgorithms)
	if err != nil {
		return time.Time{}, false
	}
	var std jwt.Claims
	if tok.UnsafeClaimsWithoutVerification(&std) != nil || std.Expiry == nil {
		return time.Time{}, false
	}
	return std.Expiry.Time().Add(clockLeeway), true
}

// ErrKeysUnavailable answers a token whose key could not be looked up
// because the issuer could not be reached.
var ErrKeysUnavailable = fmt.Errorf("%w (signing keys unavailable)", ErrUnauthenticated)

// key returns the verification key for kid. A held key is returned at
// once (an old set is refreshed in the background meanwhile). An unknown
// kid (a rotation, or a forged id) waits for a fetch when one is under
// way or may start, and is refused otherwise.
func (o *OIDC) key(ctx context.Context, kid string) (*jose.JSONWebKey, error) {
	if ks := o.keys.Load(); ks != nil {
		if k := ks.lookup(kid); k != nil {
			if o.now().Sub(ks.fetchedAt) >= time.Duration(o.cfg.JWKSRefresh.MaxAge) {
				o.startRefresh()
			}
			return k, nil
		}
	}
	r := o.startRefresh()
	if r == nil {
		if o.keys.Load() == nil {
			return nil, ErrKeysUnavailable
		}
		return nil, ErrUnauthenticated
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		return nil, ErrUnauthenticated
	}
	if ks := o.keys.Load(); ks != nil {
		if k := ks.lookup(kid); k != nil {
			return k, nil
		}
	}
	if r.err != nil {
		return nil, ErrKeysUnavailable
	}
	return nil, ErrUnauthenticated
}

// startRefresh returns the fetch under way, or starts one when the
// interval and the back-off allow it; nil when neither.
func (o *OIDC) startRefresh() *refresh {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.inflight != nil {
		return o.inflight
	}
	if o.now().Before(o.next) {
		return nil
	}
	r := &refresh{done: make(chan struct{})}
	o.inflight = r
	go o.run(r)
	return r
}

// run fetches the JWKS and records the outcome: new keys and the next
// allowed fetch one interval away, or, after a failure, the keys kept and
// the next fetch backed off.
func (o *OIDC) run(r *refresh) {
	set, err := o.fetch()
	o.mu.Lock()
	now := o.now()
	if err == nil {
		o.keys.Store(&keySet{set: set, fetchedAt: now})
		o.failures = 0
		o.next = now.Add(time.Duration(o.cfg.JWKSRefresh.MinInterval))
	} else {
		o.failures++
		wait := o.backoff(o.failures)
		o.next = now.Add(wait)
		slog.Warn("gateway.auth.oidc: fetching the signing keys failed; tokens with keys already held are still verified",
			"jwksURL", o.cfg.JWKSURL, "err", err, "failures", o.failures, "retry_after", wait)
	}
	r.err = err
	o.inflight = nil
	o.mu.Unlock()
	close(r.done)
}

// backoff is the wait after the n-th consecutive failure: MinInterval,
// doubled with each further failure, at most MaxBackoff.
func (o *OIDC) backoff(n int) time.Duration {
	wait, limit := time.Duration(o.cfg.JWKSRefresh.MinInterval), time.Duration(o.cfg.JWKSRefresh.MaxBackoff)
	for i := 1; i < n && wait < limit; i++ {
		wait *= 2
	}
	return min(wait, limit)
}

func (ks *keySet) lookup(kid string) *jose.JSONWebKey {
	for i := range ks.set.Keys {
		k := &ks.set.Keys[i]
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		if kid == "" || k.KeyID == kid {
			return k
		}
	}
	return nil
}

// fetch reads the JWKS, bounded by the refresh timeout and not by any
// request: the requests waiting for it may go away, the fetch serves the
// next ones.
func (o *OIDC) fetch() (jose.JSONWebKeySet, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(o.cfg.JWKSRefresh.Timeout))
	defer cancel()
	var set jose.JSONWebKeySet
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.cfg.JWKSURL, nil)
	if err != nil {
		return set, err
	}
	resp, err := o.client.Do(req)
	if err != nil {
		return set, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return set, HTTPStatusError("jwks", resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxJWKSBytes)).Decode(&set); err != nil {
		return set, fmt.Errorf("jwks: %w", err)
	}
	return set, nil
}
