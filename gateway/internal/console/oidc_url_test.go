package console

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/oidcop"
)

// fakeProvider serves an OpenID discovery document on loopback; doc
// fills in its endpoints given the provider's URL. The real provider
// (services/oidcop) serves only what a correct provider does: these
// tests need one that names, or redirects to, places it should not.
type fakeProvider struct {
	srv *httptest.Server
	// wellKnown, when set, answers the discovery request instead.
	wellKnown http.HandlerFunc
	// token answers the token request.
	token http.HandlerFunc
	doc   func(base string) map[string]any
}

func newFakeProvider(t *testing.T, doc func(base string) map[string]any) *fakeProvider {
	t.Helper()
	p := &fakeProvider{doc: doc}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/.well-known/openid-configuration" && p.wellKnown != nil:
			p.wellKnown(w, r)
		case r.URL.Path == "/.well-known/openid-configuration":
			_ = json.NewEncoder(w).Encode(p.doc(p.srv.URL))
		case r.URL.Path == "/token" && p.token != nil:
			p.token(w, r)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func standardDoc(base string) map[string]any {
	return map[string]any{"issuer": base, "authorization_endpoint": base + "/authorize", "token_endpoint": base + "/token", "jwks_uri": base + "/keys"}
}

func (p *fakeProvider) login(t *testing.T) *OIDCLogin {
	t.Helper()
	o, err := NewOIDCLogin(config.ConsoleOIDC{ClientID: "console", ClientSecret: "console-secret", RedirectURL: "https://ops.example/console/oidc/callback", OperatorGroup: "ops"},
		config.OIDC{Issuer: p.srv.URL, JWKSURL: p.srv.URL + "/keys"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// recorder is a server that must never be asked anything.
func recorder(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": r.Host, "id_token": "x"})
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// TestOIDCDiscoveryRefusesInsecureEndpoints: every endpoint the
// discovery document names is https, or http to a loopback address, or
// the document is refused: the client secret, the code and the PKCE
// verifier go to the token endpoint, the operator to the authorization
// endpoint.
func TestOIDCDiscoveryRefusesInsecureEndpoints(t *testing.T) {
	for _, c := range []struct {
		name, field, value string
	}{
		{"http token endpoint", "token_endpoint", "http://idp.example/token"},
		{"http authorization endpoint", "authorization_endpoint", "http://idp.example/authorize"},
		{"http jwks_uri", "jwks_uri", "http://idp.example/keys"},
		{"relative token endpoint", "token_endpoint", "/token"},
		{"javascript authorization endpoint", "authorization_endpoint", "javascript:alert(1)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newFakeProvider(t, func(base string) map[string]any {
				d := standardDoc(base)
				d[c.field] = c.value
				return d
			})
			_, err := p.login(t).discover(context.Background())
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), c.field) || strings.Contains(err.Error(), "idp.example") {
				t.Fatalf("error %q: want it to name %s, not the value", err, c.field)
			}
		})
	}
	// https anywhere, and http to loopback, are accepted.
	p := newFakeProvider(t, func(base string) map[string]any {
		d := standardDoc(base)
		d["authorization_endpoint"] = "https://login.idp.example/authorize?tenant=a"
		return d
	})
	if _, err := p.login(t).discover(context.Background()); err != nil {
		t.Fatalf("a valid document refused: %v", err)
	}
}

// TestOIDCDiscoveryRedirectNotFollowed: a discovery request answered
// with a redirect is not followed to another server's document.
func TestOIDCDiscoveryRedirectNotFollowed(t *testing.T) {
	other, hits := recorder(t)
	p := newFakeProvider(t, standardDoc)
	p.wellKnown = func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/.well-known/openid-configuration", http.StatusFound)
	}
	if _, err := p.login(t).discover(context.Background()); err == nil {
		t.Fatal("a redirected discovery was accepted")
	}
	if hits.Load() != 0 {
		t.Fatalf("the redirect was followed: %d requests", hits.Load())
	}
}

// TestOIDCTokenRequestRedirectNotFollowed: the token request (the client
// secret, the code, the PKCE verifier) goes to the token endpoint only; a
// redirect from there (307 keeps the method and the body) is not
// followed.
func TestOIDCTokenRequestRedirectNotFollowed(t *testing.T) {
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusFound} {
		other, hits := recorder(t)
		p := newFakeProvider(t, standardDoc)
		p.token = func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/steal", status)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, _, err := p.login(t).redeem(ctx, "the-code", "the-verifier")
		cancel()
		if err == nil {
			t.Fatalf("%d: the redeemed code was accepted", status)
		}
		if hits.Load() != 0 {
			t.Fatalf("%d: the token request was sent on to the redirect's target", status)
		}
	}
}

// TestOIDCSessionsFollowTheLogin: a reload replaces the OIDC login
// (SetOIDC). One built from the same provider, client, groups claim and
// operator group keeps the sessions it admitted open; one that would
// admit others (another operator group here), or no OIDC login at all,
// ends them at once, as a removed operator key ends its sessions, and
// for good: the login restored as it was does not open them again.
func TestOIDCSessionsFollowTheLogin(t *testing.T) {
	tc, provider := startOIDCConsole(t, oidcop.WebClient, oidcop.WebSecret)
	c := tc.client(t)
	if code, _, _ := oidcLogin(t, tc, c, "", "lead@ops.example", "lead-password"); code != http.StatusOK {
		t.Fatalf("login: %d", code)
	}
	rebuild := func(group string) *OIDCLogin {
		cfg := tc.deps.OIDC.cfg
		cfg.OperatorGroup = group
		o, err := NewOIDCLogin(cfg, config.OIDC{Issuer: provider.Issuer, JWKSURL: provider.JWKSURL, GroupsClaim: "sub"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	tc.SetOIDC(rebuild(oidcOperator))
	if code, _, _ := get(t, c, tc.srv.URL+"/console/backends"); code != http.StatusOK {
		t.Fatalf("the same login rebuilt ended the session: %d", code)
	}
	tc.SetOIDC(rebuild("another-group"))
	if code, _, _ := get(t, c, tc.srv.URL+"/console/backends"); code != http.StatusSeeOther {
		t.Fatalf("the session outlived a change of the operator group: %d", code)
	}
	tc.SetOIDC(rebuild(oidcOperator))
	if code, _, _ := get(t, c, tc.srv.URL+"/console/backends"); code != http.StatusSeeOther {
		t.Fatalf("the session its change ended opens again with the login back as it was: %d", code)
	}
	c = tc.client(t)
	if code, _, _ := oidcLogin(t, tc, c, "", "lead@ops.example", "lead-password"); code != http.StatusOK {
		t.Fatalf("a new login through the login back as it was: %d", code)
	}
	tc.SetOIDC(nil)
	if code, _, _ := get(t, c, tc.srv.URL+"/console/backends"); code != http.StatusSeeOther {
		t.Fatalf("the session outlived the OIDC login: %d", code)
	}
	if code, _, _ := get(t, c, tc.srv.URL+"/console/oidc/start"); code != http.StatusNotFound {
		t.Fatalf("without an OIDC login, its start: %d", code)
	}
}

// A failed discovery is answered from memory for discoveryRetry: the
// login page, which anyone on the ops network may load, sent the provider
// a request (and the log a warning) on every load while the provider was
// down. Once the provider answers again, a discovery after the wait
// works.
func TestFailedDiscoveryIsNotRetriedAtOnce(t *testing.T) {
	p := newFakeProvider(t, standardDoc)
	var asked atomic.Int64
	var up atomic.Bool
	p.wellKnown = func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		if !up.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		_ = json.NewEncoder(w).Encode(standardDoc(p.srv.URL))
	}
	o := p.login(t)
	for range 5 {
		if _, err := o.discover(t.Context()); err == nil {
			t.Fatal("a discovery of a provider that is down worked")
		}
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("5 discoveries within %v asked the provider %d times, want 1", discoveryRetry, n)
	}
	up.Store(true)
	o.mu.Lock()
	o.failedAt = o.failedAt.Add(-discoveryRetry)
	o.mu.Unlock()
	if _, err := o.discover(t.Context()); err != nil {
		t.Fatalf("a discovery after the wait, the provider back: %v", err)
	}
}

// A discovery that failed because its own caller went away (a login
// start whose client disconnected) says nothing of the provider: it is
// not remembered, or any client could keep every OIDC login failing by
// starting one and hanging up every ten seconds.
func TestCancelledDiscoveryIsNotRemembered(t *testing.T) {
	p := newFakeProvider(t, standardDoc)
	o := p.login(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := o.discover(ctx); err == nil {
		t.Fatal("a discovery with its context cancelled worked")
	}
	if _, err := o.discover(t.Context()); err != nil {
		t.Fatalf("the next operator's discovery, the provider up: %v", err)
	}
}
