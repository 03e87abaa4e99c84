package console

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/gateway/internal/auth"
	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/oidcop"
)

// The pinned OpenID Provider (services/oidcop) issues no groups claim: its
// ID tokens carry the standard claims only. The test names the subject as
// the groups claim (gateway.auth.oidc.groupsClaim: sub, a single string
// the claim reader takes as one group), so the operator group is one user,
// and another user is refused: the rule checked is the console's, that the
// verified ID token's groups claim holds operatorGroup.
const (
	oidcOperator = "ops-lead"
	oidcVisitor  = "visitor"
)

func startOIDCConsole(t *testing.T, clientID, secret string) (*testConsole, *oidcop.Provider) {
	t.Helper()
	return startOIDCConsoleWith(t, config.ConsoleOIDC{ClientID: clientID, ClientSecret: secret, OperatorGroup: oidcOperator})
}

// startOIDCConsoleWith starts the provider (with the operator, the
// visitor and more users) and a console logging in through it as cfg
// says (its redirect URL filled in).
func startOIDCConsoleWith(t *testing.T, cfg config.ConsoleOIDC, more ...oidcop.User) (*testConsole, *oidcop.Provider) {
	t.Helper()
	var provider *oidcop.Provider
	tc := startConsoleOIDC(t, nil, nil, func(base string) *OIDCLogin {
		users := append([]oidcop.User{
			{ID: oidcOperator, Username: "lead@ops.example", Password: "lead-password"},
			{ID: oidcVisitor, Username: "visitor@ops.example", Password: "visitor-password"},
		}, more...)
		provider = oidcop.StartWithRedirects(t, []string{base + "/console/oidc/callback"}, users...)
		cfg.RedirectURL = base + "/console/oidc/callback"
		login, err := NewOIDCLogin(cfg, config.OIDC{Issuer: provider.Issuer, JWKSURL: provider.JWKSURL, GroupsClaim: "sub"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return login
	})
	return tc, provider
}

// oidcLogin goes through the provider's login form as a browser would and
// returns the console's answer to the callback.
func oidcLogin(t *testing.T, tc *testConsole, c *http.Client, next, username, password string) (int, string, http.Header) {
	t.Helper()
	return oidcLoginTampered(t, tc, c, next, username, password, nil)
}

// oidcLoginTampered is oidcLogin with the authorization request's
// parameters changed by tamper on their way to the provider (a browser
// in the middle), after checking what the console asked for.
func oidcLoginTampered(t *testing.T, tc *testConsole, c *http.Client, next, username, password string, tamper func(url.Values)) (int, string, http.Header) {
	t.Helper()
	start := tc.srv.URL + "/console/oidc/start"
	if next != "" {
		start += "?next=" + url.QueryEscape(next)
	}
	code, _, h := get(t, c, start)
	if code != http.StatusSeeOther {
		t.Fatalf("start: %d", code)
	}
	authorize, err := url.Parse(h.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	q := authorize.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("state") == "" || q.Get("nonce") == "" {
		t.Fatalf("the authorization request lacks PKCE, state or nonce: %s", authorize)
	}
	if want := strings.Join(tc.deps.OIDC.cfg.EffectiveScopes(), " "); q.Get("scope") != want {
		t.Fatalf("the authorization request asks for scope %q, want %q", q.Get("scope"), want)
	}
	if tamper != nil {
		tamper(q)
		authorize.RawQuery = q.Encode()
	}
	_, _, h = get(t, c, authorize.String())
	loginURL, err := authorize.Parse(h.Get("Location"))
	if err != nil || loginURL.Query().Get("authRequestID") == "" {
		t.Fatalf("authorize redirected to %q", h.Get("Location"))
	}
	_, _, h = post(t, c, loginURL.ResolveReference(&url.URL{Path: "/login/username"}).String(),
		url.Values{"username": {username}, "password": {password}, "id": {loginURL.Query().Get("authRequestID")}})
	done, err := authorize.Parse(h.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	_, _, h = get(t, c, done.String())
	callback := h.Get("Location")
	if !strings.HasPrefix(callback, tc.srv.URL+"/console/oidc/callback?") {
		t.Fatalf("the provider sent the browser to %q", callback)
	}
	return get(t, c, callback)
}

func TestOIDCLoginAdmitsTheOperatorGroupOnly(t *testing.T) {
	for name, client := range map[string][2]string{"confidential": {oidcop.WebClient, oidcop.WebSecret}, "public with PKCE": {"native", ""}} {
		t.Run(name, func(t *testing.T) {
			tc, _ := startOIDCConsole(t, client[0], client[1])
			c := tc.client(t)
			_, body, _ := get(t, c, tc.srv.URL+"/console/login")
			if !strings.Contains(body, `href="/console/oidc/start"`) {
				t.Fatalf("the login page offers no OIDC login:\n%s", body)
			}
			code, body, _ := oidcLogin(t, tc, c, "/console/events", "lead@ops.example", "lead-password")
			if code != http.StatusOK || !strings.Contains(body, `content="0; url=/console/events"`) {
				t.Fatalf("the operator's callback: %d\n%s", code, body)
			}
			code, body, _ = get(t, c, tc.srv.URL+"/console/events")
			if code != http.StatusOK || !strings.Contains(body, "oidc:"+oidcOperator) {
				t.Fatalf("events after the OIDC login: %d\n%s", code, body)
			}

			v := tc.client(t)
			code, body, _ = oidcLogin(t, tc, v, "", "visitor@ops.example", "visitor-password")
			if code != http.StatusForbidden || !strings.Contains(body, "not in the operator group") {
				t.Fatalf("a user outside the operator group: %d\n%s", code, body)
			}
			if code, _, _ := get(t, v, tc.srv.URL+"/console/backends"); code != http.StatusSeeOther {
				t.Fatalf("the refused user has a session: %d", code)
			}
		})
	}
}

func TestOIDCCallbackNeedsItsOwnLogin(t *testing.T) {
	tc, _ := startOIDCConsole(t, oidcop.WebClient, oidcop.WebSecret)
	c := tc.client(t)
	// No round trip started here: refused.
	if code, _, _ := get(t, c, tc.srv.URL+"/console/oidc/callback?code=x&state=y"); code != http.StatusBadRequest {
		t.Fatalf("a callback without a started login: %d", code)
	}
	// A started login, answered with another state: refused.
	get(t, c, tc.srv.URL+"/console/oidc/start")
	if code, _, _ := get(t, c, tc.srv.URL+"/console/oidc/callback?code=x&state=forged"); code != http.StatusBadRequest {
		t.Fatalf("a forged state: %d", code)
	}
	// The right state with a code the provider never issued: refused.
	c2 := tc.client(t)
	_, _, h := get(t, c2, tc.srv.URL+"/console/oidc/start")
	authorize, _ := url.Parse(h.Get("Location"))
	code, _, _ := get(t, c2, tc.srv.URL+"/console/oidc/callback?code=made-up&state="+url.QueryEscape(authorize.Query().Get("state")))
	if code != http.StatusUnauthorized {
		t.Fatalf("a made-up code: %d", code)
	}
	if code, _, _ := get(t, c2, tc.srv.URL+"/console/backends"); code != http.StatusSeeOther {
		t.Fatalf("a failed callback opened a session: %d", code)
	}
}

func TestOIDCLoginChecksNonceAndAudience(t *testing.T) {
	tc, provider := startOIDCConsole(t, oidcop.WebClient, oidcop.WebSecret)
	// The provider signs an ID token for another nonce than this login's
	// (the authorization request altered on its way): refused.
	c := tc.client(t)
	code, body, _ := oidcLoginTampered(t, tc, c, "", "lead@ops.example", "lead-password", func(q url.Values) { q.Set("nonce", randomToken()) })
	if code != http.StatusUnauthorized || !strings.Contains(body, "could not be verified") {
		t.Fatalf("an ID token of another nonce: %d\n%s", code, body)
	}
	if code, _, _ := get(t, c, tc.srv.URL+"/console/backends"); code != http.StatusSeeOther {
		t.Fatalf("a nonce mismatch opened a session: %d", code)
	}
	// An ID token whose audience is not the console's client id: refused.
	other, err := auth.NewOIDC(config.OIDC{Issuer: provider.Issuer, JWKSURL: provider.JWKSURL, GroupsClaim: "sub", Audience: "another-client"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tc.deps.OIDC.verifier = other
	c = tc.client(t)
	if code, body, _ := oidcLogin(t, tc, c, "", "lead@ops.example", "lead-password"); code != http.StatusUnauthorized || !strings.Contains(body, "could not be verified") {
		t.Fatalf("an ID token for another audience: %d\n%s", code, body)
	}
	if code, _, _ := get(t, c, tc.srv.URL+"/console/backends"); code != http.StatusSeeOther {
		t.Fatalf("a wrong audience opened a session: %d", code)
	}
}

func TestOIDCScopesAndLongSubjects(t *testing.T) {
	long := strings.Repeat("s", 3500)
	tc, _ := startOIDCConsoleWith(t, config.ConsoleOIDC{ClientID: oidcop.WebClient, ClientSecret: oidcop.WebSecret, OperatorGroup: long,
		Scopes: []string{"openid", "profile", "email"}},
		oidcop.User{ID: long, Username: "long@ops.example", Password: "long-password"})
	// The configured scopes are asked for (oidcLogin checks them); a
	// subject whose session cookie would pass 4096 bytes is refused with
	// a clear error, not sent round the login again.
	c := tc.client(t)
	code, body, _ := oidcLogin(t, tc, c, "", "long@ops.example", "long-password")
	if code != http.StatusBadRequest || !strings.Contains(body, "too long for a console session") {
		t.Fatalf("a 3,500-byte subject: %d\n%s", code, body)
	}
	if code, _, _ := get(t, c, tc.srv.URL+"/console/backends"); code != http.StatusSeeOther {
		t.Fatalf("the long subject has a session: %d", code)
	}
	if !strings.Contains(tc.log.String(), "subject too long for a session cookie") {
		t.Errorf("the refusal is not logged:\n%s", tc.log.String())
	}
}

// TestAuthorizedParty is OpenID Connect Core 3.1.3.7 for ID tokens with
// several audiences, which the pinned provider does not issue.
func TestAuthorizedParty(t *testing.T) {
	for _, c := range []struct {
		name   string
		claims map[string]any
		ok     bool
	}{
		{"one audience, no azp", map[string]any{"aud": "console"}, true},
		{"one audience in a list, no azp", map[string]any{"aud": []any{"console"}}, true},
		{"azp is this client", map[string]any{"aud": []any{"console", "other"}, "azp": "console"}, true},
		{"several audiences, no azp", map[string]any{"aud": []any{"console", "other"}}, false},
		{"azp names another client", map[string]any{"aud": []any{"console", "other"}, "azp": "other"}, false},
		{"azp names another client, one audience", map[string]any{"aud": "console", "azp": "other"}, false},
		{"azp not a string", map[string]any{"aud": "console", "azp": 7.0}, false},
	} {
		if err := authorizedParty(c.claims, "console"); (err == nil) != c.ok {
			t.Errorf("%s: got %v, want ok=%v", c.name, err, c.ok)
		}
	}
}

// TestOIDCRefusalIsCutOnACharacter: the provider's error, shown on the
// login page, is cut to 100 bytes on a character boundary. It was cut
// at the 100th byte, through a character, so the page was not UTF-8.
func TestOIDCRefusalIsCutOnACharacter(t *testing.T) {
	tc, _ := startOIDCConsole(t, oidcop.WebClient, oidcop.WebSecret)
	c := tc.client(t)
	_, _, h := get(t, c, tc.srv.URL+"/console/oidc/start")
	authorize, err := url.Parse(h.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	refusal := "x" + strings.Repeat("é", 60)
	code, body, _ := get(t, c, tc.srv.URL+"/console/oidc/callback?"+url.Values{"state": {authorize.Query().Get("state")}, "error": {refusal}}.Encode())
	if want := "refused the login: x" + strings.Repeat("é", 49) + "."; code != http.StatusUnauthorized || !utf8.ValidString(body) || !strings.Contains(body, want) {
		t.Fatalf("a refusal in two-byte characters: %d, UTF-8 %v, want %q\n%s", code, utf8.ValidString(body), want, body)
	}
}

// TestOIDCStateCookieFitsABrowser: the round trip's cookie stays within
// what a browser keeps (4,096 bytes) whatever next the login was asked
// to return to. A next of many "&" (a view-as link's repeated groups=),
// which the cookie's JSON writes as six bytes each, made it larger: a
// browser drops such a cookie, and the callback then refused the login
// as not started here, again and again.
func TestOIDCStateCookieFitsABrowser(t *testing.T) {
	tc, _ := startOIDCConsole(t, oidcop.WebClient, oidcop.WebSecret)
	next := "/console/tasks?subject=alice" + strings.Repeat("&groups=g", 220)
	if safeNext(next) != next {
		t.Fatalf("next %d bytes is not one the console returns to", len(next))
	}
	c := tc.client(t)
	_, _, h := get(t, c, tc.srv.URL+"/console/oidc/start?next="+url.QueryEscape(next))
	for _, ck := range (&http.Response{Header: h}).Cookies() {
		if ck.Name == oidcCookie && len(ck.Name)+1+len(ck.Value) > maxCookieBytes {
			t.Fatalf("the OIDC round trip's cookie is %d bytes", len(ck.Name)+1+len(ck.Value))
		}
	}
	if code, body, _ := oidcLogin(t, tc, c, next, "lead@ops.example", "lead-password"); code != http.StatusOK || !strings.Contains(body, "You are logged in") {
		t.Fatalf("the operator's callback: %d\n%s", code, body)
	}
}
