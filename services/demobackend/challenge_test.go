package demobackend

import (
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type withAuth struct{ value string }

func (a withAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", a.value)
	return http.DefaultTransport.RoundTrip(r)
}

// whoami answers the Authorization the call carried; a challenge tool's
// calls get HTTP 401 with its text as WWW-Authenticate, in both eras.
func TestWhoAmIAndChallenge(t *testing.T) {
	b, srv := startBackend(t, false)
	if err := b.AddTool(ToolSpec{Name: "me", Behaviour: BehaviourWhoAmI}); err != nil {
		t.Fatal(err)
	}
	const challenge = `Bearer realm="demo", error="invalid_token"`
	if err := b.AddTool(ToolSpec{Name: "locked", Behaviour: BehaviourChallenge, Text: challenge}); err != nil {
		t.Fatal(err)
	}
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil)
		cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL + MCPPath, MaxRetries: -1,
			HTTPClient: &http.Client{Transport: withAuth{"Bearer user-" + version}}}, &mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatal(err)
		}
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "me"})
		if err != nil {
			t.Fatal(err)
		}
		if m := structured(t, res); m["authorization"] != "Bearer user-"+version {
			t.Errorf("%s: whoami = %v", version, m)
		}
		_ = cs.Close()
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"locked","arguments":{}}}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL+MCPPath, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != challenge {
		t.Errorf("a challenge tool's call: HTTP %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	if !b.RemoveTool("locked") || b.hasChallenges() {
		t.Error("removing the challenge tool left its challenge")
	}
}
