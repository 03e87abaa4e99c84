package edge

import (
	"net/http"
	"testing"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// postDiscover sends a Modern server/discover with key and returns the HTTP status.
func postDiscover(t *testing.T, url, key string) int {
	t.Helper()
	return send(t, http.MethodPost, url+"/mcp", modernHeaders("server/discover", "Authorization", "Bearer "+key),
		`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+modernMeta+`}}`).status
}

// TestReloadSwapsTheAuthenticator replaces the API keys: a removed key is
// refused and an added one accepted at once; a refused reload changes
// nothing; the metadata follows the mode.
func TestReloadSwapsTheAuthenticator(t *testing.T) {
	b := startBackends(t)
	cfg := testGatewayConfig(b)
	gw, srv := startGateway(t, b, cfg)
	if got := postDiscover(t, srv.URL, "alice-key"); got != http.StatusOK {
		t.Fatalf("alice before the reload: HTTP %d", got)
	}

	next := &config.Config{Gateway: cfg}
	next.Gateway.Auth.APIKeys = []config.APIKey{{Key: "carol-key", Subject: "carol"}, {Key: "bob-key", Subject: "bob"}}
	if err := Validate(next); err != nil {
		t.Fatal(err)
	}
	if err := gw.Reload(next); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]int{"alice-key": http.StatusUnauthorized, "carol-key": http.StatusOK, "bob-key": http.StatusOK} {
		if got := postDiscover(t, srv.URL, key); got != want {
			t.Errorf("%s after the reload: HTTP %d, want %d", key, got, want)
		}
	}

	// A duplicate key is refused by Validate and by Reload alike, and
	// the keys in force stay.
	bad := &config.Config{Gateway: cfg}
	bad.Gateway.Auth.APIKeys = []config.APIKey{{Key: "dup", Subject: "a"}, {Key: "dup", Subject: "b"}}
	if Validate(bad) == nil {
		t.Fatal("Validate accepted a duplicate API key")
	}
	if gw.Reload(bad) == nil {
		t.Fatal("Reload accepted a duplicate API key")
	}
	if got := postDiscover(t, srv.URL, "carol-key"); got != http.StatusOK {
		t.Fatalf("carol after a refused reload: HTTP %d", got)
	}
}
