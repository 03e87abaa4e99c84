package config

import (
	"strings"
	"testing"
)

func TestBackendAuthValidate(t *testing.T) {
	for _, c := range []struct {
		auth    BackendAuth
		headers map[string]string
		want    string // "" = valid
	}{
		{BackendAuth{}, nil, ""},
		{BackendAuth{Mode: "static"}, map[string]string{"Authorization": "Bearer x"}, ""},
		// passthrough handed backends a token the gateway accepts: refused,
		// whatever else is set, with the way to migrate.
		{BackendAuth{Mode: "passthrough", Audience: "github-mcp"}, map[string]string{"X-Api-Key": "k"}, "mode passthrough was removed"},
		{BackendAuth{Mode: "passthrough"}, nil, "use mode tokenExchange"},
		{BackendAuth{Audience: "a"}, nil, "not for mode static"},
		{BackendAuth{Mode: "bogus"}, nil, `want static, tokenExchange or clientCredentials`},
		{BackendAuth{Mode: "tokenExchange", Audience: "gh", TokenEndpoint: "https://idp.example/token", ClientID: "agg", ClientSecret: "s", Scopes: []string{"repo"}}, nil, ""},
		{BackendAuth{Mode: "tokenExchange", TokenEndpoint: "https://idp.example/token", ClientID: "agg", ClientSecret: "s"}, nil, "audience is required"},
		{BackendAuth{Mode: "tokenExchange", Audience: "gh", TokenEndpoint: "http://idp.example/token", ClientID: "agg", ClientSecret: "s"}, nil, "http only to a loopback"},
		{BackendAuth{Mode: "tokenExchange", Audience: "gh", TokenEndpoint: "http://127.0.0.1:9/token", ClientID: "agg", ClientSecret: "s"}, nil, ""},
		{BackendAuth{Mode: "tokenExchange", Audience: "gh", TokenEndpoint: "https://idp/token", ClientID: "agg"}, nil, "clientID and clientSecret"},
		{BackendAuth{Mode: "tokenExchange", Audience: "gh", TokenEndpoint: "https://idp/token", ClientID: "agg", ClientSecret: "s", Scopes: []string{"a b"}}, nil, "not a scope token"},
		{BackendAuth{Mode: "tokenExchange", Audience: "gh", TokenEndpoint: "https://idp/token", ClientID: "agg", ClientSecret: "s", CacheEntries: -1}, nil, "must not be negative"},
		{BackendAuth{Mode: "clientCredentials", TokenEndpoint: "https://idp/token", ClientID: "gw", ClientSecret: "s"}, nil, ""},
		{BackendAuth{Mode: "clientCredentials", TokenEndpoint: "https://idp/token", ClientID: "gw", ClientSecret: "s"}, map[string]string{"Authorization": "x"}, "must not set one too"},
		{BackendAuth{Mode: "clientCredentials", TokenEndpoint: "https://idp/token", ClientID: "gw", ClientSecret: "s", CacheEntries: 5}, nil, "cacheEntries is for mode tokenExchange"},
		{BackendAuth{Mode: "clientCredentials", TokenEndpoint: "ftp://idp/token", ClientID: "gw", ClientSecret: "s"}, nil, "absolute https URL"},
	} {
		err := c.auth.Validate("aggregator.backends[0].auth", c.headers)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.auth, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: got %v, want %q", c.auth, err, c.want)
		}
	}
	if (BackendAuth{}).NeedsCaller() || (BackendAuth{Mode: "passthrough"}).NeedsCaller() || !(BackendAuth{Mode: "tokenExchange"}).NeedsCaller() || (BackendAuth{Mode: "clientCredentials"}).NeedsCaller() {
		t.Error("NeedsCaller")
	}
}

func TestValidateAggregatorChecksBackendAuth(t *testing.T) {
	c := &Config{Aggregator: Aggregator{Listen: ":1", Backends: []Backend{{Name: "gh", URL: "http://x", Auth: BackendAuth{Mode: "tokenExchange"}}}}}
	if err := c.ValidateAggregator(); err == nil || !strings.Contains(err.Error(), "aggregator.backends[0].auth.audience") {
		t.Fatalf("got %v", err)
	}
}
