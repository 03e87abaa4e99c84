package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/oidcop"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
	"github.com/switchboard-mcp/switchboard/test/mcpraw"
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

// TestPerUserCredentials: through the real processes and a real OpenID
// Provider (the pinned zitadel example, which implements RFC 8693), with
// the gateway authenticating callers by OIDC: two users calling the same
// tool of a tokenExchange backend reach it each with a token the provider
// exchanged for their own (for the backend's audience, their subject),
// never the token the gateway accepted; a service credential presenting
// one user's token beside another principal gets nothing exchanged and
// reaches no backend; a failed exchange is an error result for that call,
// not an outage; a tokenExchange backend's 401 challenge (to the caller's
// own credential) reaches the client in the error's data, a static
// backend's (to the aggregator's own) only the aggregator's log; a Legacy
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
		"broken": broken,
		"locked": exchange,
	}
	c := harness.Start(t, harness.Options{
		Backends: []harness.Backend{
			{Name: "tx", Spec: whoamiSpec}, {Name: "broken", Spec: whoamiSpec},
			{Name: "locked", Spec: "tools:\n  - {name: deny, behaviour: challenge, text: '" + lockedChallenge + "'}\n"},
			{Name: "sealed", Spec: "tools:\n  - {name: deny, behaviour: challenge, text: '" + lockedChallenge + "'}\n"},
		},
		Configure: func(cfg *config.Config) {
			cfg.Gateway.Auth = config.GatewayAuth{Mode: "oidc", OIDC: config.OIDC{Issuer: idp.Issuer, Audience: "switchboard", JWKSURL: idp.JWKSURL}}
			for i, b := range cfg.Aggregator.Backends {
				cfg.Aggregator.Backends[i].Auth = auth[b.Name]
			}
			// whoami may run as a task, for a client that asks for one.
			withAggregatorIndexer(t, cfg)
			cfg.Aggregator.ToolOverrides = []config.ToolOverride{{Backend: "tx", Tool: "whoami", TaskSupport: config.TaskSupportOptional}}
		},
	})
	tokens := map[string]string{
		"alice": idp.CallerToken(t, alice.Username, alice.Password, "switchboard"),
		"bob":   idp.CallerToken(t, bob.Username, bob.Password, "switchboard"),
	}
	sessions := map[string]*mcp.ClientSession{}
	for user, tok := range tokens {
		client := mcp.NewClient(&mcp.Implementation{Name: "peruser-" + user, Version: "0"}, nil)
		cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: c.MCPURL, MaxRetries: -1, HTTPClient: &http.Client{Transport: bearerTransport{tok}}},
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

	// The same through a Legacy session: each POST carries the token.
	legacy, err := mcp.NewClient(&mcp.Implementation{Name: "peruser-legacy", Version: "0"}, nil).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: c.MCPURL, MaxRetries: -1, HTTPClient: &http.Client{Transport: bearerTransport{tokens["bob"]}}},
		&mcp.ClientSessionOptions{ProtocolVersion: harness.Legacy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { legacy.Close() })
	sessions["bob-legacy"] = legacy
	if got, err := whoami("bob-legacy", "tx_whoami"); err != nil || got != "Bearer "+exchanged["bob"] {
		t.Fatalf("tx_whoami in bob's Legacy session: the backend got %q (%v), want bob's cached exchanged token", got, err)
	}
	// completion/complete carries the caller's token too.
	res, err := sessions["alice"].Complete(t.Context(), &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "tx_greet"},
		Argument: mcp.CompleteParamsArgument{Name: "who", Value: "a"}})
	if err != nil || len(res.Completion.Values) != 1 || res.Completion.Values[0] != "alice" {
		t.Fatalf("completion at the tokenExchange backend: %+v, %v", res, err)
	}

	// A task's outcome is kept in the cluster's database and shown to
	// operators: the caller's exchanged token, which the plain call's
	// result holds for her, is not in it.
	tasks := &mcpraw.Client{URL: c.MCPURL, Authorization: "Bearer " + tokens["alice"], Capabilities: mcpraw.TasksCapabilities}
	task := createTask(t, tasks, "tx_whoami", map[string]any{})
	var kept map[string]any
	testkit.Eventually(t, "the task completed", 10*time.Second, func() error {
		kept = taskResult(t)(tasks.Send(t.Context(), "tasks/get", task, map[string]any{"taskId": task}))
		if kept["status"] != "completed" {
			return fmt.Errorf("status %v", kept["status"])
		}
		return nil
	})
	if text, _ := json.Marshal(kept); strings.Contains(string(text), exchanged["alice"]) || !strings.Contains(string(text), "Bearer [redacted]") {
		t.Errorf("the task's kept result: %s", text)
	}

	// A token is bound to the principal asserted with it: the gateway's
	// own credential, used directly, cannot present alice's token as bob
	// (or with groups her token does not hold). Nothing is exchanged and
	// no backend is called; as alice herself the same call goes through.
	conn, err := rpc.Dial(config.Endpoint{Address: c.Config.Aggregator.Listen, Token: c.GatewayToken}, config.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	agg := aggregatorv1.NewAggregatorServiceClient(conn)
	before := c.Calls(t, "tx")["tools/call whoami"]
	for _, p := range []*commonv1.Principal{{Subject: "bob"}, {Subject: "alice", Groups: []string{"admins"}}, {}} {
		_, err := agg.CallTool(t.Context(), &aggregatorv1.CallToolRequest{Principal: p, Name: "tx_whoami", ArgumentsJson: "{}",
			Context: &aggregatorv1.RequestContext{SubjectToken: tokens["alice"]}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "acts as the calling user") {
			t.Errorf("alice's token as principal %v: %v; want InvalidArgument", p, err)
		}
	}
	if n := c.Calls(t, "tx")["tools/call whoami"]; n != before {
		t.Errorf("a token presented beside another principal reached the backend (%d calls)", n-before)
	}
	out, err := agg.CallTool(t.Context(), &aggregatorv1.CallToolRequest{Principal: &commonv1.Principal{Subject: "alice"}, Name: "tx_whoami", ArgumentsJson: "{}",
		Context: &aggregatorv1.RequestContext{SubjectToken: tokens["alice"]}})
	if err != nil || !strings.Contains(out.GetResultJson(), exchanged["alice"]) {
		t.Fatalf("alice's token as alice: %v, %v; want her exchanged token", out, err)
	}

	// A failed exchange: this call's error, with the OAuth error; the
	// backend is not contacted and stays listed.
	_, err = whoami("bob", "broken_whoami")
	var rpcErr *jsonrpc.Error
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

	// A tokenExchange backend's 401 refuses the caller's own credential:
	// the challenge in the error's data, for the client to act on.
	_, err = sessions["alice"].CallTool(t.Context(), &mcp.CallToolParams{Name: "locked_deny", Arguments: map[string]any{}})
	if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInternalError {
		t.Fatalf("locked_deny: %v", err)
	}
	data = nil
	if json.Unmarshal(rpcErr.Data, &data) != nil || data["reason"] != "unauthorized" || data["httpStatus"] != float64(401) || data["wwwAuthenticate"] != lockedChallenge {
		t.Errorf("a tokenExchange backend's 401: data %s", rpcErr.Data)
	}
	// A static backend's 401 refuses the aggregator's own credential: the
	// client gets the error without the challenge, the operator the
	// challenge in the aggregator's log.
	_, err = sessions["alice"].CallTool(t.Context(), &mcp.CallToolParams{Name: "sealed_deny", Arguments: map[string]any{}})
	if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInternalError {
		t.Fatalf("sealed_deny: %v", err)
	}
	data = nil
	if json.Unmarshal(rpcErr.Data, &data) != nil || data["reason"] != "unauthorized" || data["httpStatus"] != float64(401) || data["wwwAuthenticate"] != nil ||
		strings.Contains(rpcErr.Message+string(rpcErr.Data), "locked.example") {
		t.Errorf("a static backend's 401: %q, data %s", rpcErr.Message, rpcErr.Data)
	}
	// The line may reach the process's output just after the answer.
	testkit.Eventually(t, "the static backend's challenge in the aggregator's log", 10*time.Second, func() bool {
		return strings.Contains(c.Aggregator.Log(64<<20), "locked.example/.well-known/oauth-protected-resource")
	})

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

// TestBareUnauthorizedRefusesTheCredential: a backend's HTTP 401 without
// a WWW-Authenticate challenge (as many servers send) refuses the
// credential the call carried exactly as a 401 with one does: the caller
// of a tokenExchange backend is told its own credential was refused, the
// caller of a static backend that the operator must fix the aggregator's;
// neither is told the backend is unavailable and to retry later, nor
// does the aggregator log it as unreachable. The backend stays listed. A
// 403 (the credential does not allow the call) is told the same way, and
// the caller of a tokenExchange backend gets its insufficient_scope
// challenge, which names the scope to ask for.
func TestBareUnauthorizedRefusesTheCredential(t *testing.T) {
	alice := oidcop.User{ID: "alice", Username: "alice", Password: "pw-alice"}
	idp := oidcop.Start(t, alice)
	const scopeChallenge = `Bearer error="insufficient_scope", scope="tools:write"`
	refusing := "tools:\n  - {name: deny, behaviour: challenge, text: ''}\n  - {name: forbid, behaviour: forbidden, text: '" + scopeChallenge + "'}\n"
	c := harness.Start(t, harness.Options{
		Backends: []harness.Backend{{Name: "tx", Spec: refusing}, {Name: "sealed", Spec: refusing}},
		Configure: func(cfg *config.Config) {
			cfg.Gateway.Auth = config.GatewayAuth{Mode: "oidc", OIDC: config.OIDC{Issuer: idp.Issuer, Audience: "switchboard", JWKSURL: idp.JWKSURL}}
			for i, b := range cfg.Aggregator.Backends {
				if b.Name == "tx" {
					cfg.Aggregator.Backends[i].Auth = config.BackendAuth{Mode: config.BackendAuthTokenExchange, Audience: oidcop.WebClient,
						TokenEndpoint: idp.TokenEndpoint, ClientID: oidcop.APIClient, ClientSecret: oidcop.APISecret, Scopes: []string{"openid", "tools"}}
				}
			}
		},
	})
	token := idp.CallerToken(t, alice.Username, alice.Password, "switchboard")
	type refusal struct {
		message, reason, challenge string
		status                     float64
	}
	for era, version := range map[string]string{"Modern": harness.Modern, "Legacy": harness.Legacy} {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bare-401", Version: "0"}, nil).Connect(t.Context(),
			&mcp.StreamableClientTransport{Endpoint: c.MCPURL, MaxRetries: -1, HTTPClient: &http.Client{Transport: bearerTransport{token}}},
			&mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		for tool, want := range map[string]refusal{
			"tx_deny":       {"the tool's server refused the credentials of this call (HTTP 401)", "unauthorized", "", 401},
			"sealed_deny":   {"the tool's server refused the credentials Switchboard holds for it (HTTP 401); an operator must fix them", "unauthorized", "", 401},
			"tx_forbid":     {"the tool's server refused the credentials of this call (HTTP 403)", "forbidden", scopeChallenge, 403},
			"sealed_forbid": {"the tool's server refused the credentials Switchboard holds for it (HTTP 403); an operator must fix them", "forbidden", "", 403},
		} {
			_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
			var rpcErr *jsonrpc.Error
			if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInternalError || rpcErr.Message != want.message {
				t.Errorf("%s (%s): %v; want %q", tool, era, err, want.message)
				continue
			}
			var data map[string]any
			if json.Unmarshal(rpcErr.Data, &data) != nil || data["reason"] != want.reason || data["httpStatus"] != want.status {
				t.Errorf("%s (%s): data %s", tool, era, rpcErr.Data)
			}
			if challenge, _ := data["wwwAuthenticate"].(string); challenge != want.challenge {
				t.Errorf("%s (%s): challenge %q, want %q", tool, era, challenge, want.challenge)
			}
		}
		if names := harness.ToolNames(t, cs); !contains(names, "tx_deny") || !contains(names, "sealed_forbid") {
			t.Errorf("after the refusals (%s) the backends' tools are gone: %v", era, names)
		}
	}
	for _, b := range []string{"tx", "sealed"} {
		if calls := c.Calls(t, b); calls["tools/call deny"] == 0 || calls["tools/call forbid"] == 0 {
			t.Fatalf("the calls did not reach backend %s: %v", b, calls)
		}
	}
	if log := c.Aggregator.Log(64 << 20); strings.Contains(log, "backend unreachable") {
		t.Error("a refused credential was logged as a backend unreachable")
	}
}
