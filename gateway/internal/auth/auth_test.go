package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/switchboard-mcp/switchboard/services/config"
)

func request(token string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

func TestAPIKeys(t *testing.T) {
	a, err := New(config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: "k1", Subject: "alice", Groups: []string{"g"}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Authenticate(request("k1"), "")
	if err != nil || p.GetSubject() != "alice" || !slices.Equal(p.GetGroups(), []string{"g"}) {
		t.Fatalf("valid key: %v %v", p, err)
	}
	for _, tok := range []string{"", "k2", "k1 "} {
		r := request(tok)
		if tok == "k1 " {
			r.Header.Set("Authorization", "Basic k1")
		}
		if _, err := a.Authenticate(r, ""); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("token %q: %v", tok, err)
		}
	}
	for _, bad := range []config.GatewayAuth{
		{Mode: "apiKeys"},
		{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: "k", Subject: ""}}},
		{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: "k", Subject: "a"}, {Key: "k", Subject: "b"}}},
		{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: "k", Subject: "alice\x00admins"}}},
		// Keys no Authorization header can carry: BearerToken trims the
		// ends, and a header holds no line break (a secret file's last
		// newline, taken in through ${ENV}).
		{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: "k\n", Subject: "alice"}}},
		{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: " k", Subject: "alice"}}},
		{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: "k\r\nX-Other: 1", Subject: "alice"}}},
		{Mode: "ldap"},
		{Mode: "oidc"},
	} {
		if _, err := New(bad, nil); err == nil {
			t.Errorf("config %+v accepted", bad)
		}
	}
}

// issuer is a test OIDC issuer whose JWKS can rotate.
type issuer struct {
	mu      sync.Mutex
	keys    map[string]*ecdsa.PrivateKey
	current string
	fetches atomic.Int64
	srv     *httptest.Server
}

func newIssuer(t *testing.T) *issuer {
	is := &issuer{keys: map[string]*ecdsa.PrivateKey{}}
	is.rotate(t, "k1")
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		is.fetches.Add(1)
		is.mu.Lock()
		defer is.mu.Unlock()
		// Only the current key is published, as after a rotation.
		set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &is.keys[is.current].PublicKey, KeyID: is.current, Algorithm: "ES256", Use: "sig"}}}
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(is.srv.Close)
	return is
}

func (is *issuer) rotate(t *testing.T, kid string) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	is.keys[kid] = k
	is.current = kid
}

func (is *issuer) token(t *testing.T, kid string, claims jwt.Claims, extra map[string]any) string {
	is.mu.Lock()
	key := is.keys[kid]
	is.mu.Unlock()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(sig).Claims(claims).Claims(extra).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestOIDC(t *testing.T) {
	is := newIssuer(t)
	o, err := NewOIDC(config.OIDC{Issuer: "https://issuer.test", Audience: "switchboard", JWKSURL: is.srv.URL,
		JWKSRefresh: config.JWKSRefresh{MinInterval: config.Duration(time.Nanosecond)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	good := jwt.Claims{Issuer: "https://issuer.test", Audience: jwt.Audience{"switchboard"}, Subject: "carol",
		Expiry: jwt.NewNumericDate(now.Add(time.Hour)), IssuedAt: jwt.NewNumericDate(now)}
	p, err := o.Authenticate(request(is.token(t, "k1", good, map[string]any{"groups": []string{"ops", "dev"}})), "")
	if err != nil || p.GetSubject() != "carol" || !slices.Equal(p.GetGroups(), []string{"ops", "dev"}) {
		t.Fatalf("valid token: %v %v", p, err)
	}
	// Cached: a second token with the same kid fetches nothing.
	if _, err := o.Authenticate(request(is.token(t, "k1", good, nil)), ""); err != nil || is.fetches.Load() != 1 {
		t.Fatalf("cached key: %v, fetches %d", err, is.fetches.Load())
	}
	// Rotation: a token with a new kid triggers a refetch and works.
	is.rotate(t, "k2")
	if _, err := o.Authenticate(request(is.token(t, "k2", good, nil)), ""); err != nil || is.fetches.Load() != 2 {
		t.Fatalf("rotated key: %v, fetches %d", err, is.fetches.Load())
	}

	bad := map[string]jwt.Claims{}
	c := good
	c.Audience = jwt.Audience{"other"}
	bad["audience"] = c
	c = good
	c.Issuer = "https://evil.test"
	bad["issuer"] = c
	c = good
	c.Expiry = jwt.NewNumericDate(now.Add(-time.Hour))
	bad["expired"] = c
	c = good
	c.Subject = ""
	bad["no subject"] = c
	c = good
	c.Subject = "alice\x00admins"
	bad["a subject with a NUL"] = c
	for name, claims := range bad {
		if _, err := o.Authenticate(request(is.token(t, "k2", claims, nil)), ""); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A principal the services would refuse, or a token too large to bind
	// to it, is refused here rather than failing every request after it.
	many := make([]string, 2000)
	for i := range many {
		many[i] = fmt.Sprintf("group-%d", i)
	}
	for name, extra := range map[string]map[string]any{
		"2,000 groups":       {"groups": many},
		"a group with a NUL": {"groups": []string{"ops\x00admins"}},
		"a 20 KiB token":     {"pad": strings.Repeat("x", 20<<10)},
	} {
		if _, err := o.Authenticate(request(is.token(t, "k2", good, extra)), ""); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A symmetric (HS256) token is refused whatever its claims.
	hs, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("0123456789abcdef0123456789abcdef")}, nil)
	forged, _ := jwt.Signed(hs).Claims(good).Serialize()
	if _, err := o.Authenticate(request(forged), ""); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("HS256 token: %v", err)
	}
	if _, err := o.Authenticate(request(""), ""); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("no token: %v", err)
	}
}

// TestOIDCAudienceOfAResource: the audience a token must carry is the
// resource's: "" is gateway.auth.oidc.audience, another value (a server's
// own) replaces it, so a token for the shared audience alone is refused
// there and a token for a server's alone is refused at the shared one.
// API keys carry no audience and are accepted whatever the resource's.
func TestOIDCAudienceOfAResource(t *testing.T) {
	is := newIssuer(t)
	o, err := NewOIDC(config.OIDC{Issuer: "https://issuer.test", Audience: "switchboard", JWKSURL: is.srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	token := func(aud ...string) string {
		return is.token(t, "k1", jwt.Claims{Issuer: "https://issuer.test", Audience: aud, Subject: "carol",
			Expiry: jwt.NewNumericDate(now.Add(time.Hour)), IssuedAt: jwt.NewNumericDate(now)}, nil)
	}
	for _, tc := range []struct {
		name     string
		token    string
		audience string
		ok       bool
	}{
		{"the shared audience at the shared resource", token("switchboard"), "", true},
		{"a server's audience at that server", token("srv-a"), "srv-a", true},
		{"a token for both at the server", token("switchboard", "srv-a"), "srv-a", true},
		{"a token for both at the shared resource", token("srv-a", "switchboard"), "", true},
		{"the shared audience at a server of its own", token("switchboard"), "srv-a", false},
		{"a server's audience at the shared resource", token("srv-a"), "", false},
		{"a server's audience at another server", token("srv-a"), "srv-b", false},
	} {
		_, err := o.Authenticate(request(tc.token), tc.audience)
		if tc.ok && err != nil {
			t.Errorf("%s: refused: %v", tc.name, err)
		}
		if !tc.ok && !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("%s: %v, want ErrUnauthenticated", tc.name, err)
		}
	}
	// Verify (the console's ID tokens) checks the configured audience.
	if _, _, err := o.Verify(t.Context(), token("srv-a")); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("Verify accepted a token for another audience: %v", err)
	}
	keys, err := New(config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: "k1", Subject: "alice"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := keys.Authenticate(request("k1"), "srv-a"); err != nil || p.GetSubject() != "alice" {
		t.Errorf("an API key at a resource with an audience: %v %v", p, err)
	}
}
