package edge

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// testIssuer signs OIDC tokens for the edge's tests with one ES256 key it
// publishes at its JWKS URL.
type testIssuer struct {
	key *ecdsa.PrivateKey
	srv *httptest.Server
}

const testIssuerName = "https://issuer.example"

func newTestIssuer(t *testing.T) *testIssuer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is := &testIssuer{key: k}
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	}))
	t.Cleanup(is.srv.Close)
	return is
}

// token is a valid token of subject for the audiences given.
func (is *testIssuer) token(t *testing.T, subject string, audiences ...string) string {
	t.Helper()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: is.key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := jwt.Signed(sig).Claims(jwt.Claims{Issuer: testIssuerName, Subject: subject, Audience: audiences,
		Expiry: jwt.NewNumericDate(now.Add(time.Hour)), IssuedAt: jwt.NewNumericDate(now)}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestServerAudiences: a virtual server with its own audience is a
// protected resource of its own. At its endpoints a token is accepted only
// when its aud names that audience (the shared gateway.auth.oidc.audience
// alone is refused); everywhere else (/mcp, its variants, a server without
// an audience of its own, a name no server has) the shared audience
// applies and a token for a server's audience alone is refused. Each
// refusal's challenge points at the metadata of the endpoint called, and
// each endpoint's metadata names that endpoint's URL as the resource.
func TestServerAudiences(t *testing.T) {
	is := newTestIssuer(t)
	b := startBackends(t)
	cfg := testGatewayConfig(b)
	cfg.PublicURL = "https://mcp.example.com"
	cfg.HTTP.AllowedHosts = []string{"127.0.0.1"}
	cfg.Auth = config.GatewayAuth{Mode: "oidc", OIDC: config.OIDC{Issuer: testIssuerName, Audience: "switchboard", JWKSURL: is.srv.URL}}
	servers := []config.Server{
		{Name: "alpha", Backends: []string{"alpha"}, Audience: "aud-alpha"},
		{Name: "beta", Backends: []string{"alpha"}, Audience: "aud-beta"},
		{Name: "gamma", Backends: []string{"alpha"}},
	}
	gw, srv := startGatewayWith(t, b, cfg, func(d *Deps) { d.Servers = servers })

	const public = "https://mcp.example.com"
	const metadata = public + "/.well-known/oauth-protected-resource"
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + modernMeta + `}}`
	call := func(path, token string) wireResponse {
		t.Helper()
		return send(t, http.MethodPost, srv.URL+path, modernHeaders("tools/list", "Authorization", "Bearer "+token), list)
	}
	forAlpha := is.token(t, "alice", "aud-alpha")
	shared := is.token(t, "alice", "switchboard")
	both := is.token(t, "alice", "aud-alpha", "aud-beta")
	for _, tc := range []struct {
		name, path, token string
		status            int
	}{
		{"alpha's token at alpha", "/mcp/alpha", forAlpha, http.StatusOK},
		{"alpha's token at alpha's raw view", "/mcp/alpha/raw", forAlpha, http.StatusOK},
		{"alpha's token at alpha's optimizer view", "/mcp/alpha/optimized", forAlpha, http.StatusOK},
		{"alpha's token at beta", "/mcp/beta", forAlpha, http.StatusUnauthorized},
		{"alpha's token at a server without its own audience", "/mcp/gamma", forAlpha, http.StatusUnauthorized},
		{"alpha's token at /mcp", "/mcp", forAlpha, http.StatusUnauthorized},
		{"alpha's token at /mcp/raw", "/mcp/raw", forAlpha, http.StatusUnauthorized},
		{"alpha's token at a server no one declared", "/mcp/nosuch", forAlpha, http.StatusUnauthorized},
		{"the shared token at /mcp", "/mcp", shared, http.StatusOK},
		{"the shared token at a server without its own audience", "/mcp/gamma", shared, http.StatusOK},
		{"the shared token at alpha", "/mcp/alpha", shared, http.StatusUnauthorized},
		{"the shared token at alpha's optimizer view", "/mcp/alpha/optimized", shared, http.StatusUnauthorized},
		{"the shared token at beta", "/mcp/beta", shared, http.StatusUnauthorized},
		{"the shared token at a server no one declared", "/mcp/nosuch", shared, http.StatusNotFound},
		{"a token for alpha and beta at alpha", "/mcp/alpha", both, http.StatusOK},
		{"a token for alpha and beta at beta", "/mcp/beta", both, http.StatusOK},
	} {
		resp := call(tc.path, tc.token)
		if resp.status != tc.status {
			t.Errorf("%s: %d, want %d: %s", tc.name, resp.status, tc.status, resp.body)
			continue
		}
		if tc.status != http.StatusUnauthorized {
			continue
		}
		want := `Bearer error="invalid_token", resource_metadata="` + metadata + tc.path + `"`
		if got := resp.header.Get("WWW-Authenticate"); got != want {
			t.Errorf("%s: WWW-Authenticate %q, want %q", tc.name, got, want)
		}
	}

	// A path that names no endpoint (no server can be called so) is
	// challenged with /mcp's metadata: the challenge never quotes what the
	// client sent, so a quote in the path cannot end the parameter and add
	// a resource_metadata of an attacker's.
	for _, path := range []string{`/mcp/x%22,resource_metadata=%22https:evil.example%22,x=%22`, "/mcp/x%5C", "/mcp/Nope/raw"} {
		resp := call(path, forAlpha)
		want := `Bearer error="invalid_token", resource_metadata="` + metadata + `/mcp"`
		if got := resp.header.Get("WWW-Authenticate"); resp.status != http.StatusUnauthorized || got != want {
			t.Errorf("%s: %d, WWW-Authenticate %q, want %q", path, resp.status, got, want)
		}
	}

	// Each server's metadata names its own URL, the issuer, and nothing
	// that tells a server declared with an audience (or at all) from a
	// name no server has.
	for _, path := range []string{"/mcp/alpha", "/mcp/alpha/raw", "/mcp/beta", "/mcp/gamma", "/mcp/nosuch"} {
		resp := send(t, http.MethodGet, srv.URL+"/.well-known/oauth-protected-resource"+path, nil, "")
		var meta map[string]any
		if resp.status != http.StatusOK || json.Unmarshal(resp.body, &meta) != nil {
			t.Fatalf("metadata of %s: %d %s", path, resp.status, resp.body)
		}
		servers, _ := meta["authorization_servers"].([]any)
		if meta["resource"] != public+path || len(servers) != 1 || servers[0] != testIssuerName || len(meta) != 4 {
			t.Errorf("metadata of %s: %s", path, resp.body)
		}
	}

	// A reload that gives gamma an audience and takes alpha's away moves
	// the boundary from the next request on.
	gw.SetServers([]config.Server{
		{Name: "alpha", Backends: []string{"alpha"}},
		{Name: "beta", Backends: []string{"alpha"}, Audience: "aud-beta"},
		{Name: "gamma", Backends: []string{"alpha"}, Audience: "aud-gamma"},
	})
	for _, tc := range []struct {
		path, token string
		status      int
	}{
		{"/mcp/alpha", shared, http.StatusOK},
		{"/mcp/alpha", forAlpha, http.StatusUnauthorized},
		{"/mcp/gamma", shared, http.StatusUnauthorized},
		{"/mcp/gamma", is.token(t, "alice", "aud-gamma"), http.StatusOK},
	} {
		if resp := call(tc.path, tc.token); resp.status != tc.status {
			t.Errorf("after the reload, %s: %d, want %d", tc.path, resp.status, tc.status)
		}
	}
}

// TestAudiencesDoNotBindAPIKeys: API keys carry no audience; a server's
// audience (which the configuration allows in oidc mode only) leaves them
// as they are at every endpoint.
func TestAudiencesDoNotBindAPIKeys(t *testing.T) {
	b := startBackends(t)
	_, srv := startGatewayWith(t, b, testGatewayConfig(b), func(d *Deps) {
		d.Servers = []config.Server{{Name: "alpha", Backends: []string{"alpha"}, Audience: "aud-alpha"}}
	})
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + modernMeta + `}}`
	for _, path := range []string{"/mcp", "/mcp/alpha"} {
		if resp := send(t, http.MethodPost, srv.URL+path, modernHeaders("tools/list"), list); resp.status != http.StatusOK {
			t.Errorf("an API key at %s: %d %s", path, resp.status, resp.body)
		}
	}
}
