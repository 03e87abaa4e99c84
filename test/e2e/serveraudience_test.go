package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/oidcop"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// TestServerAudiences: through the real processes and a real OpenID
// Provider, virtual servers with an audience of their own are protected
// resources of their own. A token the provider minted for server alpha's
// audience works at /mcp/alpha (a go-sdk client lists its tools) and is
// refused at /mcp/beta (another audience), at /mcp/gamma (no audience of
// its own: the shared one) and at /mcp, each 401 pointing at the metadata
// of the endpoint called; a token for the shared audience works at /mcp
// and /mcp/gamma but not at alpha. Each server's metadata names its own
// URL and the provider.
func TestServerAudiences(t *testing.T) {
	alice := oidcop.User{ID: "alice", Username: "alice", Password: "pw-alice"}
	idp := oidcop.Start(t, alice)
	c := harness.Start(t, harness.Options{
		Backends:  []harness.Backend{{Name: "notes"}},
		NoIndexer: true,
		Configure: func(cfg *config.Config) {
			cfg.Gateway.Auth = config.GatewayAuth{Mode: "oidc", OIDC: config.OIDC{Issuer: idp.Issuer, Audience: "switchboard", JWKSURL: idp.JWKSURL}}
			cfg.Servers = []config.Server{
				{Name: "alpha", Backends: []string{"notes"}, Audience: "srv-alpha"},
				{Name: "beta", Backends: []string{"notes"}, Audience: "srv-beta"},
				{Name: "gamma", Backends: []string{"notes"}},
			}
		},
	})
	base := strings.TrimSuffix(c.MCPURL, "/mcp")
	forAlpha := idp.CallerToken(t, alice.Username, alice.Password, "srv-alpha")
	shared := idp.CallerToken(t, alice.Username, alice.Password, "switchboard")

	// Accepted: a real client lists the server's tools.
	connect := func(path, token string) error {
		t.Helper()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "audience-test", Version: "0"}, nil).Connect(t.Context(),
			&mcp.StreamableClientTransport{Endpoint: base + path, MaxRetries: -1, HTTPClient: &http.Client{Transport: bearerTransport{token}}},
			&mcp.ClientSessionOptions{ProtocolVersion: harness.Modern})
		if err != nil {
			return err
		}
		defer cs.Close()
		_, err = cs.ListTools(t.Context(), nil)
		return err
	}
	for _, tc := range []struct{ path, token, name string }{
		{"/mcp/alpha", forAlpha, "alpha's token at alpha"},
		{"/mcp", shared, "the shared token at /mcp"},
		{"/mcp/gamma", shared, "the shared token at gamma"},
	} {
		if err := connect(tc.path, tc.token); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}

	// Refused: 401 with the challenge of the endpoint called.
	for _, tc := range []struct{ path, token, name string }{
		{"/mcp/beta", forAlpha, "alpha's token at beta"},
		{"/mcp/gamma", forAlpha, "alpha's token at gamma (the shared audience)"},
		{"/mcp", forAlpha, "alpha's token at /mcp"},
		{"/mcp/alpha", shared, "the shared token at alpha"},
		{"/mcp/alpha/raw", shared, "the shared token at alpha's raw view"},
	} {
		req, _ := http.NewRequest(http.MethodPost, base+tc.path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tc.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := `resource_metadata="` + base + "/.well-known/oauth-protected-resource" + tc.path + `"`
		if got := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(got, want) {
			t.Errorf("%s: %d %q, want 401 with %s", tc.name, resp.StatusCode, got, want)
		}
		if err := connect(tc.path, tc.token); err == nil {
			t.Errorf("%s: a client connected", tc.name)
		}
	}

	// The metadata of each server.
	for _, path := range []string{"/mcp/alpha", "/mcp/beta", "/mcp/gamma"} {
		resp, err := http.Get(base + "/.well-known/oauth-protected-resource" + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var meta struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &meta) != nil || meta.Resource != base+path ||
			len(meta.AuthorizationServers) != 1 || meta.AuthorizationServers[0] != idp.Issuer {
			t.Errorf("metadata of %s: %d %s", path, resp.StatusCode, body)
		}
	}
}
