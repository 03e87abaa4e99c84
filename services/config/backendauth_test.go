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
		{BackendAuth{Mode: "passthrough", Audience: "github-mcp"}, map[string]string{"X-Api-Key": "k"}, ""},
		{BackendAuth{Mode: "passthrough"}, nil, "audience is required"},
		{BackendAuth{Mode: "passthrough", Audience: "a"}, map[string]string{"authorization": "Bearer x"}, "must not set one too"},
		{BackendAuth{Audience: "a"}, nil, "only for mode passthrough"},
		{BackendAuth{Mode: "tokenExchange"}, nil, `mode "tokenExchange": want static or passthrough`},
	} {
		err := c.auth.Validate("b", c.headers)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.auth, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: got %v, want %q", c.auth, err, c.want)
		}
	}
	if (BackendAuth{}).NeedsCaller() || !(BackendAuth{Mode: "passthrough"}).NeedsCaller() {
		t.Error("NeedsCaller")
	}
}

func TestValidateAggregatorChecksBackendAuth(t *testing.T) {
	c := &Config{Aggregator: Aggregator{Listen: ":1", Backends: []Backend{{Name: "gh", URL: "http://x", Auth: BackendAuth{Mode: "passthrough"}}}}}
	if err := c.ValidateAggregator(); err == nil || !strings.Contains(err.Error(), "aggregator.backends[gh].auth.audience") {
		t.Fatalf("got %v", err)
	}
}
