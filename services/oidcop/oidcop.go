// Package oidcop runs a real OAuth 2.0 / OpenID Connect authorization
// server for tests: the example OpenID Provider of github.com/zitadel/oidc
// (pinned in tools/oidc-op, built by `make tools`), which implements the
// authorization code, client credentials and token exchange (RFC 8693)
// grants, token introspection and userinfo. Tests configure its users;
// its clients are the example's own: "web" and "api" (secret "secret",
// code and token exchange grants) and the service client "sid1" (secret
// "verysecret", client credentials grant).
package oidcop

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The example's clients.
const (
	WebClient, WebSecret         = "web", "secret"
	APIClient, APISecret         = "api", "secret"
	ServiceClient, ServiceSecret = "sid1", "verysecret"
)

// redirectURI is where the code flow's answer is addressed; it is never
// followed (the code is read from the redirect).
const redirectURI = "http://localhost:9999/auth/callback"

// User is one account of the provider. Admin users may exchange their own
// tokens (the example refuses token exchange without an actor otherwise).
type User struct {
	ID, Username, Password string
}

// Provider is a running authorization server.
type Provider struct {
	// Issuer is its issuer URL (with the trailing slash), JWKSURL its keys
	// and TokenEndpoint its token endpoint.
	Issuer, JWKSURL, TokenEndpoint string
	client                         *http.Client
}

// Binary is the provider's executable: $OIDC_OP (make sets it), else built
// once per test process from tools/oidc-op.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("OIDC_OP"); p != "" {
		return p
	}
	buildOnce.Do(func() {
		root, err := repoRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "oidcop-bin-")
		if err != nil {
			buildErr = err
			return
		}
		out := filepath.Join(dir, "oidc-op")
		cmd := exec.Command("go", "build", "-o", out, "github.com/zitadel/oidc/v3/example/server")
		cmd.Dir = filepath.Join(root, "tools", "oidc-op")
		cmd.Env = append(os.Environ(), "GOWORK=off")
		if b, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build the pinned OpenID Provider (tools/oidc-op): %v\n%s", err, b)
			return
		}
		built = out
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "tools", "oidc-op", "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("tools/oidc-op not found above the working directory; set OIDC_OP")
		}
		dir = parent
	}
}

// Start runs a provider with users on a free port of this machine until
// the test ends, and waits until it serves its discovery document.
func Start(t testing.TB, users ...User) *Provider {
	t.Helper()
	return StartWithRedirects(t, nil, users...)
}

// StartWithRedirects is Start with more redirect URIs registered for the
// example's clients (web, api, native) besides the one Login uses: a
// test's own code-flow client (the operator console) redirects there.
func StartWithRedirects(t testing.TB, redirects []string, users ...User) *Provider {
	t.Helper()
	dir := t.TempDir()
	table := map[string]any{}
	for _, u := range users {
		table[u.ID] = map[string]any{"ID": u.ID, "Username": u.Username, "Password": u.Password, "EmailVerified": true, "PreferredLanguage": "en", "IsAdmin": true}
	}
	data, _ := json.Marshal(table)
	usersFile := filepath.Join(dir, "users.json")
	if err := os.WriteFile(usersFile, data, 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	cmd := exec.Command(Binary(t))
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port), "USERS_FILE="+usersFile, "REDIRECT_URI="+strings.Join(append([]string{redirectURI}, redirects...), ","))
	logFile, err := os.Create(filepath.Join(dir, "oidc-op.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logFile.Close()
	})
	issuer := fmt.Sprintf("http://localhost:%d/", port)
	p := &Provider{Issuer: issuer, JWKSURL: issuer + "keys", TokenEndpoint: issuer + "oauth/token",
		client: &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := p.client.Get(issuer + ".well-known/openid-configuration")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logFile.Name())
			t.Fatalf("the OpenID Provider did not come up: %v\n%s", err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Login signs username in through the provider's login form (the
// authorization code flow of client web) and returns the access token the
// code is redeemed for (opaque).
func (p *Provider) Login(t testing.TB, username, password string) string {
	t.Helper()
	q := url.Values{"client_id": {WebClient}, "redirect_uri": {redirectURI}, "response_type": {"code"}, "scope": {"openid"}, "state": {"s"}}
	loc := p.redirect(t, http.MethodGet, p.Issuer+"auth?"+q.Encode(), nil)
	u, err := url.Parse(loc)
	if err != nil || u.Query().Get("authRequestID") == "" {
		t.Fatalf("authorize redirected to %q", loc)
	}
	loc = p.redirect(t, http.MethodPost, p.Issuer+"login/username", url.Values{"username": {username}, "password": {password}, "id": {u.Query().Get("authRequestID")}})
	loc = p.redirect(t, http.MethodGet, loc, nil)
	u, err = url.Parse(loc)
	if err != nil || u.Query().Get("code") == "" {
		t.Fatalf("the login redirected to %q", loc)
	}
	tok := p.Token(t, WebClient, WebSecret, url.Values{"grant_type": {"authorization_code"}, "code": {u.Query().Get("code")}, "redirect_uri": {redirectURI}})
	return tok["access_token"].(string)
}

// CallerToken signs username in and returns a JWT for it whose aud names
// audiences (and the client web): what an MCP client presents to a
// gateway whose auth.oidc.audience is one of them. It is an ID token from
// a token exchange, the example provider's only JWT for a user.
func (p *Provider) CallerToken(t testing.TB, username, password string, audiences ...string) string {
	t.Helper()
	access := p.Login(t, username, password)
	form := url.Values{
		"grant_type":           {"urn:ietf:params:oauth:grant-type:token-exchange"},
		"subject_token":        {access},
		"subject_token_type":   {"urn:ietf:params:oauth:token-type:access_token"},
		"requested_token_type": {"urn:ietf:params:oauth:token-type:id_token"},
		"audience":             audiences,
		"scope":                {"openid"},
	}
	return p.Token(t, WebClient, WebSecret, form)["access_token"].(string)
}

// Token POSTs a token request with the client's Basic credentials and
// returns the answer; any status but 200 fails the test.
func (p *Provider) Token(t testing.TB, clientID, secret string, form url.Values) map[string]any {
	t.Helper()
	status, body := p.post(t, p.TokenEndpoint, clientID, secret, form)
	if status != http.StatusOK {
		t.Fatalf("token request: HTTP %d: %s", status, body)
	}
	var out map[string]any
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("token answer %s: %v", body, err)
	}
	return out
}

// Introspect asks the provider about token as the resource server
// clientID (which the token's audience must name for it to be active).
func (p *Provider) Introspect(t testing.TB, clientID, secret, token string) map[string]any {
	t.Helper()
	status, body := p.post(t, p.Issuer+"oauth/introspect", clientID, secret, url.Values{"token": {token}})
	if status != http.StatusOK {
		t.Fatalf("introspection: HTTP %d: %s", status, body)
	}
	var out map[string]any
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("introspection answer %s: %v", body, err)
	}
	return out
}

func (p *Provider) post(t testing.TB, endpoint, clientID, secret string, form url.Values) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(clientID, secret)
	resp, err := p.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, body
}

// redirect sends one request and returns where the provider redirects.
func (p *Provider) redirect(t testing.TB, method, target string, form url.Values) string {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, target, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := p.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode/100 != 3 || loc == "" {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		t.Fatalf("%s %s: HTTP %d, no redirect: %s", method, target, resp.StatusCode, b)
	}
	if strings.HasPrefix(loc, "/") {
		loc = strings.TrimSuffix(p.Issuer, "/") + loc
	}
	return loc
}
