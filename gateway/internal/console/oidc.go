package console

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/gateway/internal/auth"
	"github.com/switchboard-mcp/switchboard/services/config"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/textcut"
)

// The OIDC round trip keeps its state (state, nonce, PKCE verifier) in a
// cookie of its own, sealed for that purpose only. It is SameSite=Lax, not
// Strict: the provider's redirect back to the callback is a cross-site
// navigation, on which a browser does not send Strict cookies.
const (
	oidcCookie      = "switchboard_console_oidc"
	purposeOIDC     = "switchboard-console-oidc"
	maxOIDCBody     = 1 << 20
	oidcTimeout     = 10 * time.Second
	discoveryMaxAge = 10 * time.Minute
	// discoveryRetry is how long a failed discovery is answered from
	// memory: a login page anyone on the ops network may load must not
	// send the provider a request, and the log a warning, per load while
	// the provider is down.
	discoveryRetry = 10 * time.Second
)

// OIDCLogin logs operators in through the OpenID provider's
// authorization-code flow, with PKCE (S256), state and nonce. A reload
// that changes gateway.auth.oidc or gateway.console.oidc replaces it
// whole (Console.SetOIDC).
type OIDCLogin struct {
	cfg      config.ConsoleOIDC
	issuer   string
	verifier *auth.OIDC
	client   *http.Client
	// admits is the SHA-256 of who admits operators: the provider, the
	// client, the groups claim and the operator group. A session it made
	// opens only while the login in force has the same (sessionFrom).
	admits []byte

	mu      sync.Mutex
	meta    *providerMeta
	fetched time.Time
	// failed is the last discovery's error, at failedAt; nil once one
	// worked.
	failed   error
	failedAt time.Time
}

// errDiscoveryRecent wraps the error of a discovery that failed less than
// discoveryRetry ago, answered without asking the provider again.
var errDiscoveryRecent = errors.New("discovery failed recently")

// providerMeta is what the console needs of the discovery document.
type providerMeta struct {
	Issuer                string `json:"issuer"`
	AuthorizationEndpoint string `json:"authorization_endpoint"`
	TokenEndpoint         string `json:"token_endpoint"`
	// JWKSURI is not used (the keys are gateway.auth.oidc.jwksURL's),
	// but a document that names an insecure one is refused with the rest.
	JWKSURI string `json:"jwks_uri"`
}

// check refuses a document of another issuer, without the endpoints the
// login needs, or naming an endpoint that is not https (http only to a
// loopback address, config.SecureURL): the operator's browser is sent to
// the authorization endpoint, and the client secret, the code and the
// PKCE verifier to the token endpoint. Its errors name the fields, never
// their values.
func (m *providerMeta) check(issuer string) error {
	if m.Issuer != issuer {
		return errors.New("discovery: the document names another issuer")
	}
	for _, e := range []struct {
		field, value string
		required     bool
	}{
		{"authorization_endpoint", m.AuthorizationEndpoint, true},
		{"token_endpoint", m.TokenEndpoint, true},
		{"jwks_uri", m.JWKSURI, false},
	} {
		if e.value == "" && !e.required {
			continue
		}
		if e.value == "" {
			return fmt.Errorf("discovery: the document lacks %s", e.field)
		}
		if err := config.SecureURL(e.value); err != nil {
			return fmt.Errorf("discovery: %s: %w", e.field, err)
		}
	}
	return nil
}

// NewOIDCLogin builds the login from gateway.console.oidc and the provider
// of gateway.auth.oidc (issuer, signing keys, groups claim); the ID
// token's audience is the console's client id. Its HTTP client (nil: a
// default one) follows no redirect: discovery, the keys and the token
// request go to the issuer's and the discovered endpoints only.
func NewOIDCLogin(cfg config.ConsoleOIDC, provider config.OIDC, client *http.Client) (*OIDCLogin, error) {
	if client == nil {
		client = &http.Client{Timeout: oidcTimeout}
	}
	client = auth.WithoutRedirects(client)
	idp := provider
	idp.Audience = cfg.ClientID
	v, err := auth.NewOIDC(idp, client)
	if err != nil {
		return nil, fmt.Errorf("gateway.console.oidc: %w", err)
	}
	admits := sha256.Sum256([]byte(strings.Join([]string{provider.Issuer, cfg.ClientID, provider.GroupsClaim, cfg.OperatorGroup}, "\x00")))
	return &OIDCLogin{cfg: cfg, issuer: provider.Issuer, verifier: v, client: client, admits: admits[:]}, nil
}

// discover returns the provider's endpoints, fetched at most once per
// discoveryMaxAge while they work, and at most once per discoveryRetry
// while they do not.
func (o *OIDCLogin) discover(ctx context.Context) (*providerMeta, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.meta != nil && time.Since(o.fetched) < discoveryMaxAge {
		return o.meta, nil
	}
	if o.failed != nil && time.Since(o.failedAt) < discoveryRetry {
		return nil, fmt.Errorf("%w: %w", errDiscoveryRecent, o.failed)
	}
	m, err := o.fetchDiscovery(ctx)
	if err != nil {
		// A caller that went away (its client hung up) learnt nothing of
		// the provider: remembering that would let anyone keep logins
		// failing. A provider too slow for oidcTimeout is remembered.
		if !errors.Is(ctx.Err(), context.Canceled) {
			o.failed, o.failedAt = err, time.Now()
		}
		return nil, err
	}
	o.meta, o.fetched, o.failed = m, time.Now(), nil
	return m, nil
}

// fetchDiscovery asks the provider for its discovery document.
func (o *OIDCLogin) fetchDiscovery(ctx context.Context) (*providerMeta, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(o.issuer, "/")+"/.well-known/openid-configuration", nil)
	if err != nil {
		return nil, err
	}
	resp, err := o.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, auth.HTTPStatusError("discovery", resp.StatusCode)
	}
	var m providerMeta
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxOIDCBody)).Decode(&m); err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	if err := m.check(o.issuer); err != nil {
		return nil, err
	}
	return &m, nil
}

// oidcStart sends the operator to the provider.
func (c *Console) oidcStart(w http.ResponseWriter, r *http.Request) {
	o := c.oidc.Load()
	if o == nil {
		http.NotFound(w, r)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), oidcTimeout)
	defer cancel()
	meta, err := o.discover(ctx)
	if err != nil {
		if !errors.Is(err, errDiscoveryRecent) {
			c.deps.Log.Warn("console: OIDC discovery failed", "err", err)
		}
		c.showLogin(w, r, http.StatusBadGateway, "", "The identity provider cannot be reached.")
		return
	}
	st := loginState{CSRF: randomToken(), State: randomToken(), Nonce: randomToken(), Verifier: randomToken(),
		Next: safeNext(r.URL.Query().Get("next")), Expires: time.Now().Add(loginTTL).Unix()}
	v, err := c.sealer.Load().seal(purposeOIDC, st)
	if err == nil && len(oidcCookie)+1+len(v) > maxCookieBytes {
		// A browser would drop the cookie, and the callback refuse the
		// login: a next of many "&" (JSON writes each as six bytes) is
		// left out, and the operator lands on the first page.
		st.Next = ""
		v, err = c.sealer.Load().seal(purposeOIDC, st)
	}
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: v, Path: cookiePath, MaxAge: int(loginTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil})
	challenge := sha256.Sum256([]byte(st.Verifier))
	q := url.Values{
		"response_type": {"code"}, "client_id": {o.cfg.ClientID}, "redirect_uri": {o.cfg.RedirectURL},
		"scope": {strings.Join(o.cfg.EffectiveScopes(), " ")}, "state": {st.State}, "nonce": {st.Nonce},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(challenge[:])}, "code_challenge_method": {"S256"},
	}
	sep := "?"
	if strings.Contains(meta.AuthorizationEndpoint, "?") {
		sep = "&"
	}
	http.Redirect(w, r, meta.AuthorizationEndpoint+sep+q.Encode(), http.StatusSeeOther)
}

// oidcCallback redeems the provider's code, verifies the ID token and
// admits members of the operator group.
func (c *Console) oidcCallback(w http.ResponseWriter, r *http.Request) {
	o := c.oidc.Load()
	if o == nil {
		http.NotFound(w, r)
		return
	}
	client := clientOf(r)
	var st loginState
	ck, err := r.Cookie(oidcCookie)
	if err != nil || c.sealer.Load().open(purposeOIDC, ck.Value, &st) != nil || time.Now().Unix() >= st.Expires || st.State == "" {
		c.showLogin(w, r, http.StatusBadRequest, "", "The login through the identity provider expired or was not started here: try again.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Path: cookiePath, MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil})
	q := r.URL.Query()
	if !tokensEqual(st.State, q.Get("state")) {
		c.showLogin(w, r, http.StatusBadRequest, st.Next, "The identity provider's answer does not belong to this login: try again.")
		return
	}
	// Counted only now, as a login this browser started: a request that
	// any page or peer can send without one must not use up the
	// address's attempts (loginKey's too).
	if c.limited(w, r, client) {
		return
	}
	if e := q.Get("error"); e != "" {
		c.showLogin(w, r, http.StatusUnauthorized, st.Next, "The identity provider refused the login: "+textcut.Prefix(e, 100)+".")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), oidcTimeout)
	defer cancel()
	p, claims, err := o.redeem(ctx, q.Get("code"), st.Verifier)
	if err != nil {
		c.deps.Log.Warn("console: failed login", "method", "oidc", "client", client, "err", err)
		c.showLogin(w, r, http.StatusUnauthorized, st.Next, "The identity provider's token could not be verified.")
		return
	}
	if nonce, _ := claims["nonce"].(string); !tokensEqual(st.Nonce, nonce) {
		c.deps.Log.Warn("console: failed login", "method", "oidc", "client", client, "err", "the ID token's nonce is not this login's")
		c.showLogin(w, r, http.StatusUnauthorized, st.Next, "The identity provider's token could not be verified.")
		return
	}
	if !slices.Contains(p.GetGroups(), o.cfg.OperatorGroup) {
		c.deps.Log.Warn("console: refused login", "method", "oidc", "subject", p.GetSubject(), "client", client, "reason", "not in the operator group")
		c.showLogin(w, r, http.StatusForbidden, st.Next, "You are not in the operator group.")
		return
	}
	c.fails.succeeded(client)
	operator := "oidc:" + p.GetSubject()
	if err := c.startSession(w, r, operator, "oidc", o.admits, o.admission); errors.Is(err, errSessionTooLarge) {
		// Refused here, clearly: a cookie the browser drops or the console
		// cannot open would send the operator round the login again and
		// again.
		c.deps.Log.Warn("console: refused login", "method", "oidc", "subject_bytes", len(p.GetSubject()), "client", client, "reason", "subject too long for a session cookie")
		c.showLogin(w, r, http.StatusBadRequest, st.Next, fmt.Sprintf("Your identity provider's subject is %d bytes long: too long for a console session (its cookie would pass %d bytes). Log in with an operator key.", len(p.GetSubject()), maxCookieBytes))
		return
	} else if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	c.deps.Log.Info("console: login", "operator", operator, "method", "oidc", "client", client)
	next := st.Next
	if next == "" {
		next = "/console/backends"
	}
	// A page of the console's own moves on: the navigation that follows
	// starts on this site, so the browser sends the Strict session cookie
	// (it would not on a redirect that continues the provider's).
	c.render(w, r, http.StatusOK, "continue", page{Title: "Logged in", Continue: next, Data: continueData{Next: next}})
}

type continueData struct{ Next string }

// redeem exchanges the code at the token endpoint (client_secret_basic
// when the client has a secret, PKCE always) and verifies the ID token.
func (o *OIDCLogin) redeem(ctx context.Context, code, verifier string) (*commonv1.Principal, map[string]any, error) {
	if code == "" || len(code) > maxQueryBytes {
		return nil, nil, errors.New("no code")
	}
	meta, err := o.discover(ctx)
	if err != nil {
		return nil, nil, err
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {o.cfg.RedirectURL}, "code_verifier": {verifier}}
	if o.cfg.ClientSecret == "" {
		form.Set("client_id", o.cfg.ClientID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, meta.TokenEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if o.cfg.ClientSecret != "" {
		// RFC 6749 2.3.1: both parts form-encoded before Basic.
		req.SetBasicAuth(url.QueryEscape(o.cfg.ClientID), url.QueryEscape(o.cfg.ClientSecret))
	}
	resp, err := o.client.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("token endpoint: %w", err)
	}
	defer resp.Body.Close()
	var tok struct {
		IDToken string `json:"id_token"`
		Error   string `json:"error"`
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return nil, nil, auth.HTTPStatusError("token endpoint", resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxOIDCBody)).Decode(&tok); err != nil {
		return nil, nil, fmt.Errorf("token endpoint: HTTP %d, %v", resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusOK || tok.IDToken == "" {
		return nil, nil, fmt.Errorf("token endpoint: HTTP %d, error %q", resp.StatusCode, textcut.Prefix(tok.Error, 100))
	}
	p, claims, err := o.verifier.Verify(ctx, tok.IDToken)
	if err != nil {
		return nil, nil, fmt.Errorf("ID token: %w", err)
	}
	if err := authorizedParty(claims, o.cfg.ClientID); err != nil {
		return nil, nil, fmt.Errorf("ID token: %w", err)
	}
	return p, claims, nil
}

// authorizedParty applies OpenID Connect Core's rule for an ID token with
// more than one audience (section 3.1.3.7): it must name the client it was
// issued to in azp, and an azp that is present must be this console's
// client id. Verify has already checked that the client id is among the
// audiences; this refuses a token another client of the provider was
// issued and that merely lists the console too.
func authorizedParty(claims map[string]any, clientID string) error {
	azp, present := claims["azp"]
	if present {
		if s, ok := azp.(string); !ok || s != clientID {
			return errors.New("its azp names another client")
		}
		return nil
	}
	if aud, ok := claims["aud"].([]any); ok && len(aud) > 1 {
		return errors.New("it has several audiences and no azp")
	}
	return nil
}
