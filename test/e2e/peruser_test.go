package e2e

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/oidcop"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

const whoamiSpec = `
tools:
  - {name: whoami, behaviour: whoami}
prompts:
  - name: greet
    text: Hello {who}.
    arguments:
      - {name: who, values: [alice, bob]}
`

// lockedChallenge is what the locked backend answers every call with.
const lockedChallenge = `Bearer realm="locked", error="invalid_token", resource_metadata="https://locked.example/.well-known/oauth-protected-resource"`

// callerBearer presents one caller's OIDC token on every request.
type callerBearer struct{ token string }

func (b callerBearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(req)
}

// TestPerUserCredentials: through the real processes and a real OpenID
// Provider (the pinned zitadel example, which implements RFC 8693), with
// the gateway authenticating callers by OIDC: two users calling the same
// tool of a tokenExchange backend reach it each with a token the provider
// exchanged for their own (for the backend's audience, their subject);
// a passthrough backend gets each caller's own token, and one the token's
// audience does not name gets nothing and the caller a clear error; a
// failed exchange is an error result for that call, not an outage; a
// backend's 401 challenge reaches the client in the error's data; a Legacy
// session carries the token on each POST as a Modern client does; no
// token appears in any service's log.
func TestPerUserCredentials(t *testing.T) {
	alice := oidcop.User{ID: "alice", Username: "alice", Password: "pw-alice"}
	bob := oidcop.User{ID: "bob", Username: "bob", Password: "pw-bob"}
	idp := oidcop.Start(t, alice, bob)
	exchange := config.BackendAuth{Mode: config.BackendAuthTokenExchange, Audience: oidcop.WebClient, TokenEndpoint: idp.TokenEndpoint,
		ClientID: oidcop.APIClient, ClientSecret: oidcop.APISecret, Scopes: []string{"openid", "tools"}}
	broken := exchange
	broken.ClientSecret = "not-the-secret"
	auth := map[string]config.BackendAuth{
		"tx":     exchange,
		"gh":     {Mode: config.BackendAuthPassthrough, Audience: "gh"},
		"slack":  {Mode: config.BackendAuthPassthrough, Audience: "slack"},
		"broken": broken,
	}
	c := harness.Start(t, harness.Options{
		Backends: []harness.Backend{
			{Name: "tx", Spec: whoamiSpec}, {Name: "gh", Spec: whoamiSpec}, {Name: "slack", Spec: whoamiSpec}, {Name: "broken", Spec: whoamiSpec},
			{Name: "locked", Spec: "tools:\n  - {name: deny, behaviour: challenge, text: '" + lockedChallenge + "'}\n"},
		},
		Configure: func(cfg *config.Config) {
			cfg.Gateway.Auth = config.GatewayAuth{Mode: "oidc", OIDC: config.OIDC{Issuer: idp.Issuer, Audience: "switchboard", JWKSURL: idp.JWKSURL}}
			for i, b := range cfg.Aggregator.Backends {
				cfg.Aggregator.Backends[i].Auth = auth[b.Name]
			}
		},
	})
	tokens := map[string]string{
		"alice": idp.CallerToken(t, alice.Username, alice.Password, "switchboard", "gh"),
		"bob":   idp.CallerToken(t, bob.Username, bob.Password, "switchboard", "gh"),
	}
	sessions := map[string]*mcp.ClientSession{}
	for user, tok := range tokens {
		client := mcp.NewClient(&mcp.Implementation{Name: "peruser-" + user, Version: "0"}, nil)
		cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: c.MCPURL, MaxRetries: -1, HTTPClient: &http.Client{Transport: callerBearer{tok}}},
			&mcp.ClientSessionOptions{ProtocolVersion: harness.Modern})
		if err != nil {
			t.Fatalf("connect as %s: %v", user, err)
		}
		t.Cleanup(func() { cs.Close() })
		sessions[user] = cs
	}
	// whoami answers the Authorization the backend received.
	whoami := func(user, tool string) (string, error) {
		t.Helper()
		res, err := sessions[user].CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
		if err != nil {
			return "", err
		}
		var answer struct {
			Authorization string `json:"authorization"`
		}
		if res.IsError || len(res.Content) != 1 || json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &answer) != nil {
			t.Fatalf("%s as %s: %+v", tool, user, res)
		}
		return answer.Authorization, nil
	}
	var seen []string // every token a backend got, to look for in the logs

	// tokenExchange: each user's own exchanged token, reused while valid.
	exchanged := map[string]string{}
	for _, user := range []string{"alice", "bob", "alice", "bob"} {
		got, err := whoami(user, "tx_whoami")
		if err != nil {
			t.Fatalf("tx_whoami as %s: %v", user, err)
		}
		tok, ok := strings.CutPrefix(got, "Bearer ")
		if !ok || tok == tokens[user] {
			t.Fatalf("the tokenExchange backend got %q for %s, not an exchanged token", got, user)
		}
		if prev, ok := exchanged[user]; ok && prev != tok {
			t.Errorf("%s's exchanged token was not reused from the cache", user)
		}
		exchanged[user] = tok
		info := idp.Introspect(t, oidcop.WebClient, oidcop.WebSecret, tok)
		if info["active"] != true || info["sub"] != user || !strings.Contains(info["scope"].(string), "tools") {
			t.Fatalf("%s reached the backend with a token the provider describes as %v", user, info)
		}
		seen = append(seen, tok)
	}
	if exchanged["alice"] == exchanged["bob"] {
		t.Fatal("alice and bob reached the backend with the same token")
	}

	// passthrough: the caller's own token, to the backend its aud names.
	for user, tok := range tokens {
		if got, err := whoami(user, "gh_whoami"); err != nil || got != "Bearer "+tok {
			t.Fatalf("gh_whoami as %s: the backend got %q (%v), want the caller's token", user, got, err)
		}
		seen = append(seen, tok)
	}
	// The same through a Legacy session: each POST carries the token.
	legacy, err := mcp.NewClient(&mcp.Implementation{Name: "peruser-legacy", Version: "0"}, nil).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: c.MCPURL, MaxRetries: -1, HTTPClient: &http.Client{Transport: callerBearer{tokens["bob"]}}},
		&mcp.ClientSessionOptions{ProtocolVersion: harness.Legacy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { legacy.Close() })
	sessions["bob-legacy"] = legacy
	if got, err := whoami("bob-legacy", "gh_whoami"); err != nil || got != "Bearer "+tokens["bob"] {
		t.Fatalf("gh_whoami in bob's Legacy session: the backend got %q (%v)", got, err)
	}
	if got, err := whoami("bob-legacy", "tx_whoami"); err != nil || got != "Bearer "+exchanged["bob"] {
		t.Fatalf("tx_whoami in bob's Legacy session: the backend got %q (%v), want bob's cached exchanged token", got, err)
	}
	// ... and nothing to one it does not name.
	_, err = whoami("alice", "slack_whoami")
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(rpcErr.Message, "acts as the calling user") {
		t.Fatalf("slack_whoami with a token for other audiences: %v", err)
	}
	if n := c.Calls(t, "slack")["tools/call whoami"]; n != 0 {
		t.Errorf("the backend outside the token's audience was called %d times", n)
	}
	// completion/complete carries the caller's token too: completed by the
	// backend the token names, refused by the one it does not.
	complete := func(prompt string) (*mcp.CompleteResult, error) {
		return sessions["alice"].Complete(t.Context(), &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: prompt},
			Argument: mcp.CompleteParamsArgument{Name: "who", Value: "a"}})
	}
	if res, err := complete("gh_greet"); err != nil || len(res.Completion.Values) != 1 || res.Completion.Values[0] != "alice" {
		t.Fatalf("completion at the passthrough backend the token names: %+v, %v", res, err)
	}
	if _, err := complete("slack_greet"); !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("completion at a passthrough backend the token does not name: %v; want -32602", err)
	}

	// A failed exchange: this call's error, with the OAuth error; the
	// backend is not contacted and stays listed.
	_, err = whoami("bob", "broken_whoami")
	if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInternalError || !strings.Contains(rpcErr.Message, "issued no token") {
		t.Fatalf("broken_whoami: %v", err)
	}
	var data map[string]any
	if json.Unmarshal(rpcErr.Data, &data) != nil || data["reason"] != "token_exchange_failed" || data["grant"] != "token-exchange" || data["error"] == "" {
		t.Errorf("a failed exchange's data: %s", rpcErr.Data)
	}
	if n := c.Calls(t, "broken")["tools/call whoami"]; n != 0 {
		t.Errorf("the backend whose exchange failed was called %d times", n)
	}
	if names := harness.ToolNames(t, sessions["bob"]); !contains(names, "broken_whoami") {
		t.Errorf("after a failed exchange the backend's tools are gone: %v", names)
	}

	// A backend's 401: the challenge in the error's data.
	_, err = sessions["alice"].CallTool(t.Context(), &mcp.CallToolParams{Name: "locked_deny", Arguments: map[string]any{}})
	if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInternalError {
		t.Fatalf("locked_deny: %v", err)
	}
	data = nil
	if json.Unmarshal(rpcErr.Data, &data) != nil || data["reason"] != "unauthorized" || data["httpStatus"] != float64(401) || data["wwwAuthenticate"] != lockedChallenge {
		t.Errorf("a backend's 401: data %s", rpcErr.Data)
	}

	// No token in any log (the services log at debug level here).
	for name, proc := range map[string]*harness.Proc{"gateway": c.Gateway, "aggregator": c.Aggregator, "indexer": c.Indexer} {
		log := proc.Log(64 << 20)
		for _, tok := range seen {
			if strings.Contains(log, tok) {
				t.Errorf("the %s's log holds a caller's or exchanged token", name)
			}
		}
		if strings.Contains(log, "not-the-secret") {
			t.Errorf("the %s's log holds a client secret", name)
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
