package config

import (
	"strings"
	"testing"
)

// TestValidateServerAudiences: a server's own audience binds OIDC tokens
// only, so it needs gateway.auth.mode oidc; it must differ from the shared
// audience and from every other server's, so that a token issued for one
// resource alone is accepted at no other; the errors name keys, never an
// audience.
func TestValidateServerAudiences(t *testing.T) {
	base := func() *Config {
		c := &Config{}
		c.Gateway.Aggregator = Endpoint{Address: "127.0.0.1:1", Token: "t"}
		c.Gateway.Auth = GatewayAuth{Mode: "oidc", OIDC: OIDC{Issuer: "https://issuer.example", Audience: "shared-aud", JWKSURL: "https://issuer.example/keys"}}
		c.Aggregator.Backends = []Backend{{Name: "docs", URL: "http://docs"}}
		c.Servers = []Server{
			{Name: "a", Backends: []string{"docs"}, Audience: "aud-a"},
			{Name: "b", Backends: []string{"docs"}, Audience: "https://mcp.example.com/mcp/b"},
			{Name: "c", Backends: []string{"docs"}},
		}
		return c
	}
	if err := base().ValidateGateway(); err != nil {
		t.Fatalf("distinct audiences in oidc mode refused: %v", err)
	}
	// The aggregator reads servers too, but not gateway.auth: an audience
	// is none of its business.
	agg := base()
	agg.Gateway.Auth = GatewayAuth{}
	if err := agg.ValidateServers(); err != nil {
		t.Fatalf("ValidateServers looks at audiences: %v", err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"apiKeys mode", func(c *Config) {
			c.Gateway.Auth = GatewayAuth{Mode: "apiKeys", APIKeys: []APIKey{{Key: "k", Subject: "s"}}}
		}, "servers[0] (a).audience needs gateway.auth.mode oidc"},
		{"anonymous mode", func(c *Config) { c.Gateway.Auth = GatewayAuth{} }, "servers[1] (b).audience needs gateway.auth.mode oidc"},
		{"the shared audience", func(c *Config) { c.Servers[1].Audience = "shared-aud" }, "servers[1] (b).audience is gateway.auth.oidc.audience"},
		{"another server's", func(c *Config) { c.Servers[2].Audience = "aud-a" }, "servers[2] (c).audience is also servers[0] (a)'s"},
		{"blank", func(c *Config) { c.Servers[0].Audience = "  " }, "servers[0] (a).audience is blank"},
		{"surrounding spaces", func(c *Config) { c.Servers[0].Audience = " aud-a" }, "servers[0] (a).audience has surrounding spaces"},
	} {
		c := base()
		tc.mutate(c)
		err := c.ValidateGateway()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "aud-a") || strings.Contains(msg, "shared-aud") || strings.Contains(msg, "mcp.example.com") {
			t.Errorf("%s: the error shows an audience: %s", tc.name, msg)
		}
	}
}
