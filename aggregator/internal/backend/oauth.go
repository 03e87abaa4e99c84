package backend

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// OAuth credentials of a backend: the gateway's own token from the client
// credentials grant (RFC 6749 §4.4), or a token exchanged for the caller's
// (RFC 8693), both from a configured token endpoint. Tokens are kept in
// memory only, on each aggregator replica, until RefreshBefore ahead of
// their expiry (and an exchanged token never past the caller's own
// token's exp), or until a backend refuses them (HTTP 401); exchanged
// tokens are keyed by the caller and the caller's token, bounded by
// CacheEntries, and by maxTokensPerCaller for each caller (least recently
// used out). Concurrent calls of one caller share one exchange, and
// concurrent requests one client credentials grant. No token, and no
// client secret, is ever logged or part of an error's text; why a token
// endpoint could not be reached, or answered no usable token, is logged
// for the operator, as the client learns only that it was.

// Credential modes of Auth.Mode.
const (
	AuthStatic            = ""
	AuthTokenExchange     = "tokenExchange"
	AuthClientCredentials = "clientCredentials"
)

// Auth is how a backend's requests are authenticated beyond its static
// headers.
type Auth struct {
	// Mode is AuthStatic, AuthTokenExchange or AuthClientCredentials.
	Mode string
	// Audience: the audience asked for by an exchange or the client
	// credentials grant.
	Audience      string
	TokenEndpoint string
	ClientID      string
	ClientSecret  string
	Scopes        []string
	// CacheEntries bounds the exchanged tokens kept.
	CacheEntries int
	// RefreshBefore: a cached token is not used this close to its expiry.
	RefreshBefore time.Duration
}

// ErrTokenExchange: the authorization server issued no token for the call
// (it refused the caller's token or the aggregator's client, or could not
// be reached). The call fails; the backend was not contacted and its
// health is untouched. The text is safe for the client.
var ErrTokenExchange = errors.New("the authorization server issued no token for this tool's server")

// TokenError is ErrTokenExchange with the OAuth error code the server
// answered ("" when it did not answer one).
type TokenError struct {
	// Grant is "token-exchange" or "client-credentials".
	Grant string
	// Code is the server's error code (RFC 6749 §5.2: invalid_grant, ...),
	// or "unreachable" / "invalid_response".
	Code string
}

func (e *TokenError) Error() string {
	return ErrTokenExchange.Error() + " (" + e.Grant + ": " + e.Code + ")"
}
func (e *TokenError) Unwrap() error { return ErrTokenExchange }

// RFC 8693 names.
const (
	grantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	tokenTypeAccess    = "urn:ietf:params:oauth:token-type:access_token"
	maxTokenResponse   = 64 << 10
)

type cachedToken struct {
	key [32]byte
	// subject is the caller's (exchanged tokens).
	subject string
	value   string // "Bearer ..."
	expiry  time.Time
}

// maxTokensPerCaller bounds the exchanged tokens one caller keeps cached
// per backend: the few its clients use at once. A client renews its token
// long before it expires, and the tokens it moved on from would stay until
// they did: without this bound, a caller renewing every minute would hold
// an hour's sixty, and one presenting many tokens would push every other
// caller's out of the cache, each of their calls then an exchange.
const maxTokensPerCaller = 4

// tokenSource obtains and caches a backend's OAuth tokens.
type tokenSource struct {
	auth   Auth
	client *http.Client
	now    func() time.Time
	log    *slog.Logger

	// lastService is the last client-credentials token issued, cached or
	// not: the redactor cuts it out of what the backend sends back. An
	// uncached token (no expires_in) is a call's own, which the call's
	// texts lose anyway, or that of a handshake, listing or probe, whose
	// failures reach the log and Status.LastError with no call to name
	// it. Storing it costs the redactor nothing: its sets hold no token.
	lastService atomic.Pointer[string]

	mu      sync.Mutex
	service *cachedToken // client credentials
	order   *list.List   // exchanged tokens, most recently used first
	byKey   map[[32]byte]*list.Element
	held    map[string]int // exchanged tokens cached, by caller
	// flights are the grants under way, by cache key (serviceKey for the
	// client credentials grant): concurrent requests for one token wait
	// for the one grant instead of each making their own.
	flights map[[32]byte]*flight
}

// serviceKey is the flight of the client credentials grant: no exchange's
// key (a SHA-256) is all zeros.
var serviceKey [32]byte

// flight is one grant under way; done is closed when value and err are
// set.
type flight struct {
	done  chan struct{}
	value string
	err   error
}

func newTokenSource(a Auth, timeout time.Duration, log *slog.Logger) *tokenSource {
	return &tokenSource{
		auth: a,
		log:  log,
		// A token endpoint's redirect is not followed: the client secret
		// and the caller's token go to the configured URL only.
		client:  &http.Client{Timeout: timeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		now:     time.Now,
		order:   list.New(),
		byKey:   map[[32]byte]*list.Element{},
		held:    map[string]int{},
		flights: map[[32]byte]*flight{},
	}
}

// serviceToken is the client credentials grant's token, cached.
func (t *tokenSource) serviceToken(ctx context.Context) (string, error) {
	t.mu.Lock()
	if s := t.service; s != nil && t.now().Before(s.expiry) {
		t.mu.Unlock()
		return s.value, nil
	}
	return t.shared(ctx, serviceKey, t.grant)
}

// grant makes one client credentials grant and caches its token.
func (t *tokenSource) grant(ctx context.Context) (string, error) {
	form := url.Values{"grant_type": {"client_credentials"}}
	t.addScope(form)
	value, expiry, err := t.request(ctx, "client-credentials", form)
	if err != nil {
		return "", err
	}
	t.lastService.Store(&value)
	if !expiry.IsZero() {
		t.mu.Lock()
		t.service = &cachedToken{value: value, expiry: expiry}
		t.mu.Unlock()
	}
	return value, nil
}

// last is the last client-credentials token issued ("Bearer ..."), or "".
func (t *tokenSource) last() string {
	if v := t.lastService.Load(); v != nil {
		return *v
	}
	return ""
}

// exchangeKey is the cache key of the caller subject's subjectToken.
func exchangeKey(subject, subjectToken string) [32]byte {
	return sha256.Sum256([]byte(subject + "\x00" + subjectToken))
}

// exchanged is a token exchanged for the caller subject's subjectToken,
// cached under its exchangeKey.
func (t *tokenSource) exchanged(ctx context.Context, subject string, key [32]byte, subjectToken string) (string, error) {
	t.mu.Lock()
	if e, ok := t.byKey[key]; ok {
		c := e.Value.(*cachedToken)
		if t.now().Before(c.expiry) {
			t.order.MoveToFront(e)
			t.mu.Unlock()
			return c.value, nil
		}
		t.forget(e)
	}
	return t.shared(ctx, key, func(ctx context.Context) (string, error) { return t.exchange(ctx, subject, key, subjectToken) })
}

// shared is the token fetch gets, one fetch for every concurrent request
// under key. t.mu is held on entry, so that no fetch begins between a
// cache miss and here, and released.
func (t *tokenSource) shared(ctx context.Context, key [32]byte, fetch func(context.Context) (string, error)) (string, error) {
	f, ok := t.flights[key]
	if !ok {
		f = &flight{done: make(chan struct{})}
		t.flights[key] = f
		// The fetch serves every request that waits on it, so the request
		// that began it going away must not end it for the others: it
		// runs on its own, bounded by the token client's timeout.
		go func() {
			f.value, f.err = fetch(context.WithoutCancel(ctx))
			t.mu.Lock()
			delete(t.flights, key)
			t.mu.Unlock()
			close(f.done)
		}()
	}
	t.mu.Unlock()
	select {
	case <-f.done:
		return f.value, f.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// exchange makes one exchange and caches its token under key.
func (t *tokenSource) exchange(ctx context.Context, subject string, key [32]byte, subjectToken string) (string, error) {
	form := url.Values{
		"grant_type":           {grantTokenExchange},
		"subject_token":        {subjectToken},
		"subject_token_type":   {tokenTypeAccess},
		"requested_token_type": {tokenTypeAccess},
		"audience":             {t.auth.Audience},
	}
	t.addScope(form)
	value, expiry, err := t.request(ctx, "token-exchange", form)
	if err != nil {
		return "", err
	}
	// A response without expires_in says nothing of the token's life: it
	// serves this call only (expiry stays zero, nothing is cached). One
	// with it is never kept past the caller's own token either.
	if callerExp, ok := tokenExpiry(subjectToken); ok && !expiry.IsZero() && callerExp.Before(expiry) {
		expiry = callerExp
	}
	if !expiry.IsZero() && t.now().Before(expiry) {
		t.mu.Lock()
		if old, ok := t.byKey[key]; ok {
			t.forget(old)
		}
		t.byKey[key] = t.order.PushFront(&cachedToken{key: key, subject: subject, value: value, expiry: expiry})
		// The caller's least recently used token past its bound, then
		// anyone's past the cache's.
		if t.held[subject]++; t.held[subject] > maxTokensPerCaller {
			for e := t.order.Back(); e != nil; e = e.Prev() {
				if e.Value.(*cachedToken).subject == subject {
					t.forget(e)
					break
				}
			}
		}
		for t.order.Len() > t.auth.CacheEntries {
			t.forget(t.order.Back())
		}
		t.mu.Unlock()
	}
	return value, nil
}

// forget drops the cached exchanged token e. Call with t.mu held.
func (t *tokenSource) forget(e *list.Element) {
	c := t.order.Remove(e).(*cachedToken)
	delete(t.byKey, c.key)
	if t.held[c.subject]--; t.held[c.subject] <= 0 {
		delete(t.held, c.subject)
	}
}

// refused forgets value, cached under key (serviceKey for the client
// credentials token), which a backend refused: revoked or rotated at the
// provider, it would otherwise be sent until its expiry, hours of refused
// requests. A token cached since (a concurrent refresh) is kept.
func (t *tokenSource) refused(key [32]byte, value string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if key == serviceKey {
		if t.service != nil && t.service.value == value {
			t.service = nil
		}
		return
	}
	if e, ok := t.byKey[key]; ok && e.Value.(*cachedToken).value == value {
		t.forget(e)
	}
}

// cached is how many exchanged tokens are held.
func (t *tokenSource) cached() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.order.Len()
}

func (t *tokenSource) addScope(form url.Values) {
	if len(t.auth.Scopes) > 0 {
		form.Set("scope", strings.Join(t.auth.Scopes, " "))
	}
	if t.auth.Audience != "" && form.Get("audience") == "" {
		form.Set("audience", t.auth.Audience)
	}
}

// request POSTs one grant and returns "Bearer <token>" and when it stops
// being used (zero: unknown, not cached).
func (t *tokenSource) request(ctx context.Context, grant string, form url.Values) (string, time.Time, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.auth.TokenEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return "", time.Time{}, &TokenError{Grant: grant, Code: "unreachable"}
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	// RFC 6749 §2.3.1: the id and secret are form-encoded inside Basic.
	req.SetBasicAuth(url.QueryEscape(t.auth.ClientID), url.QueryEscape(t.auth.ClientSecret))
	resp, err := t.client.Do(req)
	if err == nil {
		defer resp.Body.Close()
	}
	var body []byte
	if err == nil {
		body, err = io.ReadAll(io.LimitReader(resp.Body, maxTokenResponse))
	}
	if err != nil {
		if ctx.Err() != nil {
			return "", time.Time{}, ctx.Err()
		}
		// The transport's error names the endpoint and the cause (a
		// name that does not resolve, a certificate not trusted), never
		// the form it sent.
		return "", time.Time{}, t.failed(grant, "unreachable", err.Error())
	}
	var answer struct {
		AccessToken string          `json:"access_token"`
		TokenType   string          `json:"token_type"`
		ExpiresIn   json.RawMessage `json:"expires_in"`
		Error       string          `json:"error"`
	}
	_ = json.Unmarshal(body, &answer)
	if resp.StatusCode != http.StatusOK {
		return "", time.Time{}, &TokenError{Grant: grant, Code: errorCode(answer.Error, resp.StatusCode)}
	}
	switch {
	case answer.AccessToken == "":
		return "", time.Time{}, t.failed(grant, "invalid_response", "no access_token in the answer")
	case !strings.EqualFold(answer.TokenType, "bearer"):
		return "", time.Time{}, t.failed(grant, "invalid_response", fmt.Sprintf("token_type %q, not Bearer", bound(answer.TokenType, 32)))
	case !headerSafe(answer.AccessToken):
		return "", time.Time{}, t.failed(grant, "invalid_response", "the access_token holds characters a header cannot carry")
	}
	var expiry time.Time
	if life := lifetime(answer.ExpiresIn); life > 0 {
		// A token shorter-lived than RefreshBefore is still used for half
		// its life, rather than fetched again for every request.
		expiry = t.now().Add(life - min(t.auth.RefreshBefore, life/2))
	}
	return "Bearer " + answer.AccessToken, expiry, nil
}

// failed is the TokenError of a grant the endpoint could not be asked, or
// answered without a usable token, logged with why: the client and
// Status.LastError get only the code.
func (t *tokenSource) failed(grant, code, why string) error {
	t.log.Warn("the token endpoint issued no token", "grant", grant, "error", code, "why", why)
	return &TokenError{Grant: grant, Code: code}
}

// maxTokenLife bounds how long a token is kept, whatever it says.
const maxTokenLife = 30 * 24 * time.Hour

// lifetime is a token response's expires_in: a number of seconds, or one
// written as a string as some providers do ("3599"); 0 when absent or
// not a positive number.
func lifetime(raw json.RawMessage) time.Duration {
	var n json.Number
	if json.Unmarshal(raw, &n) != nil {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return 0
		}
		n = json.Number(s)
	}
	secs, err := n.Float64()
	if err != nil || !(secs > 0) {
		return 0
	}
	return time.Duration(min(secs, maxTokenLife.Seconds()) * float64(time.Second))
}

// errorCode is the server's OAuth error code if it is a plain token
// (RFC 6749 §5.2 restricts it to printable ASCII), else the HTTP status.
func errorCode(code string, status int) string {
	if code == "" || len(code) > 64 {
		return fmt.Sprintf("HTTP %d", status)
	}
	for _, r := range code {
		if r < 0x21 || r > 0x7e || r == '"' || r == '\\' {
			return fmt.Sprintf("HTTP %d", status)
		}
	}
	return code
}

// headerSafe reports whether a token can go in an Authorization header as
// it is: visible ASCII only. Any other token would fail every request it
// went with, before it left, as if the backend were down.
func headerSafe(token string) bool {
	for i := range len(token) {
		if c := token[i]; c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}
