package auth

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// TestOIDCJWKSRedirectNotFollowed: a JWKS URL that answers with a
// redirect does not lead the gateway to another server's keys: a token
// signed by a key that only the redirect's target publishes is refused,
// and the target is never asked.
func TestOIDCJWKSRedirectNotFollowed(t *testing.T) {
	forger := newIssuer(t) // publishes the attacker's key
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, forger.srv.URL, http.StatusFound)
	}))
	t.Cleanup(jwks.Close)
	for name, client := range map[string]*http.Client{"default client": nil, "a client of the caller's": {}} {
		t.Run(name, func(t *testing.T) {
			before := forger.fetches.Load()
			o, err := NewOIDC(config.OIDC{Issuer: "https://issuer.test", Audience: "switchboard", JWKSURL: jwks.URL}, client)
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			tok := forger.token(t, "k1", jwt.Claims{Issuer: "https://issuer.test", Audience: jwt.Audience{"switchboard"}, Subject: "mallory",
				Expiry: jwt.NewNumericDate(now.Add(time.Hour)), IssuedAt: jwt.NewNumericDate(now)}, nil)
			if p, err := o.Authenticate(request(tok), ""); err == nil {
				t.Fatalf("a token signed by the redirect target's key was accepted: %v", p)
			}
			if n := forger.fetches.Load() - before; n != 0 {
				t.Fatalf("the redirect was followed: the target was asked %d times", n)
			}
		})
	}
}

// TestOIDCRefusesPlainHTTPProviders: the issuer and the JWKS URL are
// https, or http to a loopback address only; the error names the key,
// never the value.
func TestOIDCRefusesPlainHTTPProviders(t *testing.T) {
	for _, c := range []struct {
		name, issuer, jwks, key string
	}{
		{"http jwksURL", "https://issuer.test", "http://idp.example/keys", "jwksURL"},
		{"http issuer", "http://idp.example", "https://idp.example/keys", "issuer"},
		{"not a URL", "https://issuer.test", "idp.example/keys", "jwksURL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewOIDC(config.OIDC{Issuer: c.issuer, Audience: "switchboard", JWKSURL: c.jwks}, nil)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), "gateway.auth.oidc."+c.key) || strings.Contains(err.Error(), "idp.example") {
				t.Fatalf("error %q: want it to name gateway.auth.oidc.%s and not the value", err, c.key)
			}
		})
	}
	for _, ok := range []string{"http://127.0.0.1:9/keys", "http://localhost:9/keys", "http://[::1]:9/keys", "https://idp.example/keys"} {
		if _, err := NewOIDC(config.OIDC{Issuer: "http://127.0.0.1:9", Audience: "switchboard", JWKSURL: ok}, nil); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
}
