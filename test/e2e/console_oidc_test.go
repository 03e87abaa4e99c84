package e2e

import (
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/oidcop"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// TestConsoleOIDCLogin: the real gateway with the console's login through
// the pinned OpenID Provider (authorization code, PKCE, state, nonce). The
// provider issues no groups claim, so gateway.auth.oidc.groupsClaim names
// the subject here: the operator group is one user, and another user of
// the same provider is refused.
func TestConsoleOIDCLogin(t *testing.T) {
	var provider *oidcop.Provider
	c := harness.Start(t, harness.Options{
		Backends:  []harness.Backend{{Name: "notes"}},
		NoIndexer: true,
		Configure: func(cfg *config.Config) {
			cfg.ServiceAuth.Credentials = append(cfg.ServiceAuth.Credentials,
				config.ServiceCredential{Name: "console", Token: consoleToken, Operator: true, AssertPrincipals: true, Allow: config.ConsoleMethods})
			cfg.Gateway.OpsListen = harness.FreeAddr(t)
			callback := "http://" + cfg.Gateway.OpsListen + "/console/oidc/callback"
			provider = oidcop.StartWithRedirects(t, []string{callback},
				oidcop.User{ID: "ops-lead", Username: "lead@ops.example", Password: "lead-password"},
				oidcop.User{ID: "visitor", Username: "visitor@ops.example", Password: "visitor-password"})
			cfg.Gateway.Auth.OIDC = config.OIDC{Issuer: provider.Issuer, JWKSURL: provider.JWKSURL, GroupsClaim: "sub"}
			cfg.Gateway.Console = config.Console{Enabled: true, ServiceToken: consoleToken, OIDC: config.ConsoleOIDC{
				ClientID: oidcop.WebClient, ClientSecret: oidcop.WebSecret, RedirectURL: callback, OperatorGroup: "ops-lead"}}
		},
	})
	base := "http://" + c.Config.Gateway.OpsListen
	login := func(username, password string) (*consoleBrowser, int, string) {
		jar, err := cookiejar.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		hc := &http.Client{Jar: jar, Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		b := &consoleBrowser{t: t, base: base, http: hc}
		follow := func(method, u string, form url.Values) string {
			var resp *http.Response
			if method == http.MethodPost {
				resp, err = hc.PostForm(u, form)
			} else {
				resp, err = hc.Get(u)
			}
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			next, err := resp.Request.URL.Parse(resp.Header.Get("Location"))
			if err != nil || resp.Header.Get("Location") == "" {
				t.Fatalf("%s %s: %s without a redirect", method, u, resp.Status)
			}
			return next.String()
		}
		authorize := follow(http.MethodGet, base+"/console/oidc/start", nil)
		loginForm, _ := url.Parse(follow(http.MethodGet, authorize, nil))
		done := follow(http.MethodPost, loginForm.ResolveReference(&url.URL{Path: "/login/username"}).String(),
			url.Values{"username": {username}, "password": {password}, "id": {loginForm.Query().Get("authRequestID")}})
		callback := follow(http.MethodGet, done, nil)
		if !strings.HasPrefix(callback, base+"/console/oidc/callback?") {
			t.Fatalf("the provider sent the browser to %q", callback)
		}
		code, body, _ := b.do(http.MethodGet, strings.TrimPrefix(callback, base), nil)
		return b, code, body
	}

	b, code, body := login("lead@ops.example", "lead-password")
	if code != http.StatusOK || !strings.Contains(body, "url=/console/backends") {
		t.Fatalf("the operator's callback: %d\n%s", code, body)
	}
	if page := b.page("/console/backends"); !strings.Contains(page, `data-backend="notes"`) || !strings.Contains(page, "oidc:ops-lead") {
		t.Fatalf("backends after the OIDC login:\n%s", page)
	}
	v, code, body := login("visitor@ops.example", "visitor-password")
	if code != http.StatusForbidden || !strings.Contains(body, "not in the operator group") {
		t.Fatalf("a user outside the operator group: %d\n%s", code, body)
	}
	if code, _, _ := v.do(http.MethodGet, "/console/backends", nil); code != http.StatusSeeOther {
		t.Fatalf("the refused user has a session: %d", code)
	}
}
