package config

import (
	"strings"
	"testing"
)

// TestOIDCProviderURLs: gateway.auth.oidc.issuer and jwksURL are https,
// or http to a loopback address only (the signing keys and the console's
// discovery come from there), whatever the mode: the console's OIDC login
// uses them too. The error names the key, never the value.
func TestOIDCProviderURLs(t *testing.T) {
	base := func(mode, issuer, jwks string) *Config {
		return &Config{Gateway: Gateway{Aggregator: Endpoint{Address: "127.0.0.1:1", Token: "t"},
			Auth: GatewayAuth{Mode: mode, OIDC: OIDC{Issuer: issuer, Audience: "switchboard", JWKSURL: jwks}}}}
	}
	for _, c := range []struct {
		name, mode, issuer, jwks, key string
	}{
		{"http jwksURL", "oidc", "https://idp.example", "http://idp.example/keys", "gateway.auth.oidc.jwksURL"},
		{"http issuer", "oidc", "http://idp.example", "https://idp.example/keys", "gateway.auth.oidc.issuer"},
		{"http issuer in another mode", "apiKeys", "http://idp.example", "https://idp.example/keys", "gateway.auth.oidc.issuer"},
		{"relative jwksURL", "oidc", "https://idp.example", "/keys", "gateway.auth.oidc.jwksURL"},
		{"ftp jwksURL", "oidc", "https://idp.example", "ftp://idp.example/keys", "gateway.auth.oidc.jwksURL"},
		{"http to a name that resolves anywhere", "oidc", "http://localhost.idp.example", "https://idp.example/keys", "gateway.auth.oidc.issuer"},
		{"no issuer in oidc mode", "oidc", "", "https://idp.example/keys", "gateway.auth.oidc.issuer"},
		{"no jwksURL in oidc mode", "oidc", "https://idp.example", "", "gateway.auth.oidc.jwksURL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := base(c.mode, c.issuer, c.jwks)
			if c.mode == "apiKeys" {
				cfg.Gateway.Auth.APIKeys = []APIKey{{Key: "k", Subject: "s"}}
			}
			err := cfg.ValidateGateway()
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), c.key) || strings.Contains(err.Error(), "idp.example") {
				t.Fatalf("error %q: want it to name %s, not the value", err, c.key)
			}
		})
	}
	for _, ok := range [][2]string{
		{"https://idp.example", "https://idp.example/keys"},
		{"http://127.0.0.1:5556/", "http://127.0.0.1:5556/keys"},
		{"http://localhost:5556", "http://[::1]:5556/keys"},
	} {
		if err := base("oidc", ok[0], ok[1]).ValidateGateway(); err != nil {
			t.Errorf("issuer %s, jwksURL %s refused: %v", ok[0], ok[1], err)
		}
	}
	// The value expanded from a variable is named by the variable.
	cfg, err := Parse([]byte(gatewayBase+"  auth:\n    mode: oidc\n    oidc: {issuer: \"http://${V}.example\", audience: a, jwksURL: \"https://idp.example/keys\"}\n"),
		func(string) (string, bool) { return secretValue, true })
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.ValidateGateway()
	if err == nil || !strings.Contains(err.Error(), "gateway.auth.oidc.issuer") || !strings.Contains(err.Error(), "${V}") || strings.Contains(err.Error(), secretValue) {
		t.Fatalf("got %v", err)
	}
}

// TestSecureURL is the rule of every URL a credential or signing keys
// travel over.
func TestSecureURL(t *testing.T) {
	for raw, ok := range map[string]bool{
		"https://idp.example/token": true,
		"http://127.0.0.1:8080/x":   true,
		"http://127.8.9.10/x":       true,
		"http://[::1]:1/x":          true,
		"http://localhost/x":        true,
		"http://LOCALHOST/x":        true,
		"http://idp.example/token":  false,
		"http://10.0.0.1/token":     false,
		"http://[::ffff:10.0.0.1]/": false,
		"//idp.example/token":       false,
		"https:///token":            false,
		"file:///etc/passwd":        false,
		"":                          false,
	} {
		if err := SecureURL(raw); (err == nil) != ok {
			t.Errorf("%q: %v, want ok=%v", raw, err, ok)
		}
	}
}
