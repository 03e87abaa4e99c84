package e2e

import (
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
	"github.com/switchboard-mcp/switchboard/test/mcpraw"
)

const expiredStateSpec = `
tools:
  - {name: echo, description: Echo., behaviour: echo}
resources:
  - {uri: "docs://alpha/a", name: a, text: "alpha a"}
`

// TestExpiredSessionStateFreesThePrincipalsBound: "Session state is
// dropped when its session expires or is deleted" (operations.md,
// "Bounded client-held state"), with an indexer as without one. A
// principal that may have one Legacy session with state subscribes in
// one; once that session expired, a new session of the principal
// subscribes and sets its log level at once. The indexer once kept the
// state five minutes past the session's expiry (the clock skew margin
// meant for revocations), and the gateway held that later expiry too,
// so both refused the new session -32603 for five minutes.
func TestExpiredSessionStateFreesThePrincipalsBound(t *testing.T) {
	const ttl = 3 * time.Second
	c := harness.Start(t, harness.Options{
		Backends: []harness.Backend{{Name: "alpha", Spec: expiredStateSpec}},
		Configure: func(cfg *config.Config) {
			cfg.Gateway.Sessions.MaxPerPrincipal = 1
			cfg.Gateway.Sessions.TTL = config.Duration(ttl)
		},
	})
	open := func() *mcpraw.Client {
		cl := &mcpraw.Client{URL: c.MCPURL}
		if err := cl.OpenSession(t.Context()); err != nil {
			t.Fatal(err)
		}
		return cl
	}
	send := func(cl *mcpraw.Client, method string, params map[string]any) *mcpraw.Error {
		a, err := cl.Send(t.Context(), method, "", params)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		return a.Error
	}
	subscribe := map[string]any{"uri": "docs://alpha/a"}
	first := open()
	if err := send(first, "resources/subscribe", subscribe); err != nil {
		t.Fatalf("first session's subscribe: %v", err)
	}
	testkit.Eventually(t, "the first session to expire (its id refused)", 10*ttl, func() bool {
		a, err := first.Send(t.Context(), "ping", "", nil)
		return err != nil || a.Error != nil || a.HTTPStatus != 200
	})
	next := open()
	if err := send(next, "resources/subscribe", subscribe); err != nil {
		t.Fatalf("a new session's subscribe once the principal's only session with state expired: %v; want {} (expired state no longer counts)", err)
	}
	if err := send(next, "logging/setLevel", map[string]any{"level": "info"}); err != nil {
		t.Fatalf("the new session's logging/setLevel: %v", err)
	}
}
