package app

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/rpc"
)

// discoveryServer is an OpenID provider as far as the console's start of
// a login goes: its discovery document.
func discoveryServer(t *testing.T) *httptest.Server {
	t.Helper()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/openid-configuration" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": srv.URL, "authorization_endpoint": srv.URL + "/authorize",
			"token_endpoint": srv.URL + "/token", "jwks_uri": srv.URL + "/keys"})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// consoleConfig is a gateway with the console enabled and its OIDC login
// through issuer as clientID (none without a clientID).
func consoleConfig(issuer, clientID string) *config.Config {
	cfg := &config.Config{}
	cfg.Gateway.Aggregator = config.Endpoint{Address: "127.0.0.1:1", Token: "gateway-token"}
	cfg.Gateway.OpsListen = "127.0.0.1:0"
	cfg.Gateway.Auth.OIDC = config.OIDC{Issuer: issuer, Audience: "switchboard", JWKSURL: issuer + "/keys"}
	cfg.Gateway.Console = config.Console{Enabled: true, ServiceToken: "console-token", OperatorKeys: []string{"an-operator-key-of-some-length"}}
	if clientID != "" {
		cfg.Gateway.Console.OIDC = config.ConsoleOIDC{ClientID: clientID, RedirectURL: "https://ops.example/console/oidc/callback", OperatorGroup: "ops"}
	}
	return cfg
}

// startLogin asks the console to start an OIDC login and returns where
// it sends the browser (nil when it offers no OIDC login).
func startLogin(t *testing.T, h http.Handler) *url.URL {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/console/oidc/start", nil))
	if rec.Code == http.StatusNotFound {
		return nil
	}
	if rec.Code != http.StatusSeeOther {
		body, _ := io.ReadAll(rec.Body)
		t.Fatalf("start: %d %s", rec.Code, body)
	}
	u, err := url.Parse(rec.Header().Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestConsoleOIDCFollowsReload: a reload that changes gateway.auth.oidc
// (the provider) or gateway.console.oidc (the console's client) reaches
// the console's login at once, as it reaches the gateway's bearer
// authentication; a reload that removes the console's client stops
// offering the OIDC login.
func TestConsoleOIDCFollowsReload(t *testing.T) {
	a, b := discoveryServer(t), discoveryServer(t)
	oc, err := startConsole(consoleConfig(a.URL, "console"), rpc.ClientKeepalive(config.GRPC{}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(oc.close)
	h := oc.Handler()
	if u := startLogin(t, h); u == nil || !strings.HasPrefix(u.String(), a.URL+"/authorize?") {
		t.Fatalf("before the reload the login goes to %v, want provider A", u)
	}

	if err := oc.reload(consoleConfig(b.URL, "console")); err != nil {
		t.Fatal(err)
	}
	if u := startLogin(t, h); u == nil || !strings.HasPrefix(u.String(), b.URL+"/authorize?") {
		t.Fatalf("after gateway.auth.oidc.issuer changed the login goes to %v, want provider B", u)
	}

	if err := oc.reload(consoleConfig(b.URL, "console-2")); err != nil {
		t.Fatal(err)
	}
	if u := startLogin(t, h); u == nil || u.Query().Get("client_id") != "console-2" {
		t.Fatalf("after gateway.console.oidc.clientID changed the login asks for %v", u)
	}

	if err := oc.reload(consoleConfig(b.URL, "")); err != nil {
		t.Fatal(err)
	}
	if u := startLogin(t, h); u != nil {
		t.Fatalf("with no console client the login still goes to %v", u)
	}
	if err := oc.reload(consoleConfig(a.URL, "console")); err != nil {
		t.Fatal(err)
	}
	if u := startLogin(t, h); u == nil || !strings.HasPrefix(u.String(), a.URL+"/authorize?") {
		t.Fatalf("with the client back the login goes to %v, want provider A", u)
	}
}

// TestConsoleReloadChecksItsKeysWhileItRuns: gateway.console.enabled
// takes a restart, so a console started enabled keeps running after a
// reload that sets enabled: false, and takes that file's operator keys.
// They are held to the rules a start holds them to: a key too short to
// start with is refused, and the reload with it; a good one is taken.
func TestConsoleReloadChecksItsKeysWhileItRuns(t *testing.T) {
	withKeys := func(enabled bool, keys ...string) *config.Config {
		cfg := consoleConfig("https://idp.example", "")
		cfg.Gateway.Console.Enabled = enabled
		cfg.Gateway.Console.OperatorKeys = keys
		return cfg
	}
	oc, err := startConsole(withKeys(true, "an-operator-key-of-some-length"), rpc.ClientKeepalive(config.GRPC{}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(oc.close)
	if err := oc.reload(withKeys(false, "pw")); err == nil || !strings.Contains(err.Error(), "gateway.console.operatorKeys[0]") {
		t.Fatalf("a reload to enabled: false with a 2-byte operator key: %v, want it refused by that key", err)
	}
	if err := oc.reload(withKeys(false, "another-operator-key-of-length")); err != nil {
		t.Fatalf("a reload to enabled: false with a good operator key: %v", err)
	}
	// A file that turns the console off may drop its keys and tokens, as
	// a start accepts: the running console then lets no one in, and keeps
	// the token it reads the services with (without one, under mTLS, its
	// connections would be the gateway's certificate's credential).
	for _, off := range []config.Console{{ServiceToken: "console-token"}, {}, {OperatorKeys: []string{"another-operator-key-of-length"}}} {
		cfg := consoleConfig("https://idp.example", "")
		cfg.Gateway.Console = off
		if err := oc.reload(cfg); err != nil {
			t.Fatalf("a reload turning the console off with %+v: %v", off, err)
		}
		if md, err := oc.token.GetRequestMetadata(context.Background()); err != nil || md["authorization"] != "Bearer console-token" {
			t.Fatalf("turned off with %+v, the console's token is %v (%v)", off, md, err)
		}
	}
}

// A console a reload turns off offers no OIDC login until the restart
// that ends it.
func TestConsoleTurnedOffOffersNoLogin(t *testing.T) {
	a := discoveryServer(t)
	oc, err := startConsole(consoleConfig(a.URL, "console"), rpc.ClientKeepalive(config.GRPC{}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(oc.close)
	h := oc.Handler()
	if startLogin(t, h) == nil {
		t.Fatal("no OIDC login before the reload")
	}
	off := consoleConfig(a.URL, "console")
	off.Gateway.Console.Enabled = false
	if err := oc.reload(off); err != nil {
		t.Fatal(err)
	}
	if u := startLogin(t, h); u != nil {
		t.Fatalf("turned off, the console still sends a login to %v", u)
	}
}

// TestConsoleTurnedOffAndOnKeepsItsSessionsEnded: a reload that turns
// the console off ends its sessions at once (it lets no one in), and a
// later reload that turns it on again with the same operator key must
// not open them again: the operator logs in anew.
func TestConsoleTurnedOffAndOnKeepsItsSessionsEnded(t *testing.T) {
	on := consoleConfig("https://idp.example", "")
	oc, err := startConsole(on, rpc.ClientKeepalive(config.GRPC{}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(oc.close)
	srv := httptest.NewServer(oc.Handler())
	t.Cleanup(srv.Close)
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	status := func(method, path string, form url.Values) (int, string) {
		t.Helper()
		var resp *http.Response
		if method == http.MethodPost {
			resp, err = c.PostForm(srv.URL+path, form)
		} else {
			resp, err = c.Get(srv.URL + path)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	_, page := status(http.MethodGet, "/console/login", nil)
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if csrf == nil {
		t.Fatalf("no CSRF field on the login page:\n%s", page)
	}
	if code, _ := status(http.MethodPost, "/console/login", url.Values{"csrf": {csrf[1]}, "key": {on.Gateway.Console.OperatorKeys[0]}}); code != http.StatusSeeOther {
		t.Fatalf("login: %d", code)
	}
	// The events page reads no service, so it answers 200 to a session.
	if code, _ := status(http.MethodGet, "/console/events", nil); code != http.StatusOK {
		t.Fatalf("logged in: %d", code)
	}
	off := consoleConfig("https://idp.example", "")
	off.Gateway.Console.Enabled = false
	if err := oc.reload(off); err != nil {
		t.Fatal(err)
	}
	if code, _ := status(http.MethodGet, "/console/events", nil); code != http.StatusSeeOther {
		t.Fatalf("turned off, the session still opens: %d", code)
	}
	if err := oc.reload(consoleConfig("https://idp.example", "")); err != nil {
		t.Fatal(err)
	}
	if code, _ := status(http.MethodGet, "/console/events", nil); code != http.StatusSeeOther {
		t.Fatalf("turned on again, the session its turning off ended opens again: %d", code)
	}
}
