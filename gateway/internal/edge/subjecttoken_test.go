package edge

import (
	"net/http/httptest"
	"testing"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// Only an OIDC caller's token is forwarded: an API key is the gateway's
// own secret.
func TestSubjectTokenOnlyForOIDC(t *testing.T) {
	r := httptest.NewRequest("POST", "/mcp", nil)
	r.Header.Set("Authorization", "Bearer tok-123")
	for mode, want := range map[string]string{"oidc": "tok-123", "apiKeys": "", "anonymous": "", "": ""} {
		if got := subjectToken(&authState{cfg: config.GatewayAuth{Mode: mode}}, r); got != want {
			t.Errorf("mode %q: %q, want %q", mode, got, want)
		}
	}
}
