package edge

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// TestStreamsEndWithTheirCredential: a reload that removes an API key ends
// the notification streams it opened (a listen, a Legacy session's GET
// stream) and a tasks/result waiting for its task, which otherwise went on
// delivering to, and acting for, a key now refused; the streams of keys
// still in force go on.
func TestStreamsEndWithTheirCredential(t *testing.T) {
	b := startBackends(t)
	cfg := testGatewayConfig(b)
	gw, srv := startGateway(t, b, cfg)
	url := srv.URL + "/mcp"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	listen := func(key string) *bufio.Scanner {
		_, lines := openStream(t, ctx, url, modernHeaders("subscriptions/listen", "Authorization", "Bearer "+key),
			`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{`+modernMeta+`,"notifications":{"toolsListChanged":true}}}`)
		if ack := nextData(t, lines); !strings.Contains(ack, "acknowledged") {
			t.Fatalf("ack %s", ack)
		}
		return lines
	}
	alice, bob := listen("alice-key"), listen("bob-key")
	_, aliceGet := openRequest(t, ctx, "GET", url, legacyHeaders("alice-key", initializeOn(t, url, "alice-key")), "")
	// A tasks/result waits for its task as long as it runs, acting for
	// alice meanwhile (its polls, the task's questions).
	session, _ := initializeEliciting(t, url)
	task := taskIDOf(t, createLegacyTask(t, url, session))
	_, aliceResult := openStream(t, ctx, url, legacyHeaders("alice-key", session),
		`{"jsonrpc":"2.0","id":"r1","method":"tasks/result","params":{"taskId":"`+task+`"}}`)
	testkit.Eventually(t, "tasks/result polls the task", 10*time.Second, func() bool {
		_, gets, _, _, _ := b.taskRequests()
		return len(gets) > 0
	})

	next := &config.Config{Gateway: cfg}
	next.Gateway.Auth.APIKeys = []config.APIKey{cfg.Auth.APIKeys[1]} // bob's alone
	if err := gw.Reload(next); err != nil {
		t.Fatal(err)
	}
	for name, lines := range map[string]*bufio.Scanner{"listen": alice, "GET stream": aliceGet, "tasks/result": aliceResult} {
		last := ""
		for lines.Scan() {
			// Keep-alives and priming events until it ends.
			if strings.Contains(lines.Text(), `"result"`) {
				t.Fatalf("alice's %s answered after her key was removed: %s", name, lines.Text())
			}
			if d, ok := strings.CutPrefix(lines.Text(), "data: "); ok {
				last = d
			}
		}
		// tasks/result says why it ended, as the client's to renew
		// (not the gateway's failure).
		if name == "tasks/result" && (!strings.Contains(last, `"code":-32600`) || !strings.Contains(last, "no longer authenticates")) {
			t.Errorf("alice's tasks/result ended with %s", last)
		}
		if ctx.Err() != nil {
			t.Fatalf("alice's %s outlived her removed key", name)
		}
	}
	// Bob's stream goes on: its keep-alives keep coming.
	for range 2 {
		if d := nextData(t, bob); !strings.HasPrefix(d, ":") {
			t.Fatalf("bob's stream: %q", d)
		}
	}
}

// TestOIDCStreamsOutliveAnIssuerOutage: a reload of gateway.auth while the
// issuer's keys cannot be fetched ends no stream whose token is valid (it
// once ended every one: the new authenticator, with no keys yet, refused
// them all); a token's stream ends when the token does.
func TestOIDCStreamsOutliveAnIssuerOutage(t *testing.T) {
	is, cfg, gw, srv := startOIDCGateway(t, config.JWKSRefresh{Timeout: config.Duration(time.Second)})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, lines := openStream(t, ctx, srv.URL+"/mcp", modernHeaders("subscriptions/listen", "Authorization", "Bearer "+is.token(t, "carol", "switchboard")),
		`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{`+modernMeta+`,"notifications":{"toolsListChanged":true}}}`)
	if ack := nextData(t, lines); !strings.Contains(ack, "acknowledged") {
		t.Fatalf("ack %s", ack)
	}
	is.srv.Close()
	next := &config.Config{Gateway: cfg}
	next.Gateway.Auth.OIDC.GroupsClaim = "roles"
	if err := gw.Reload(next); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if d := nextData(t, lines); !strings.HasPrefix(d, ":") {
			t.Fatalf("carol's stream after the reload: %q", d)
		}
	}
}

// TestReloadKeepsHeldSigningKeys: a reload of gateway.auth that keeps the
// issuer and its JWKS (here the keys' maximum age) keeps the signing keys
// the gateway holds, so tokens it verified are still verified during an
// outage of the issuer; the new authenticator once started with none,
// and refused every token until the issuer came back.
func TestReloadKeepsHeldSigningKeys(t *testing.T) {
	is, cfg, gw, srv := startOIDCGateway(t, config.JWKSRefresh{})
	tok := is.token(t, "alice", "switchboard")
	if got := postDiscover(t, srv.URL, tok); got != http.StatusOK {
		t.Fatalf("before the outage: HTTP %d", got)
	}
	is.srv.Close()
	next := &config.Config{Gateway: cfg}
	next.Gateway.Auth.OIDC.JWKSRefresh.MaxAge = config.Duration(20 * time.Minute)
	if err := gw.Reload(next); err != nil {
		t.Fatal(err)
	}
	if got := postDiscover(t, srv.URL, tok); got != http.StatusOK {
		t.Errorf("during the outage, after a reload of gateway.auth.oidc.jwksRefresh.maxAge: HTTP %d", got)
	}
}

// startOIDCGateway is a gateway authenticating callers with a test
// issuer's tokens (its keys fetched with refresh), and its configuration.
func startOIDCGateway(t *testing.T, refresh config.JWKSRefresh) (*testIssuer, config.Gateway, *Gateway, *httptest.Server) {
	t.Helper()
	is := newTestIssuer(t)
	b := startBackends(t)
	cfg := testGatewayConfig(b)
	cfg.Auth = config.GatewayAuth{Mode: "oidc", OIDC: config.OIDC{Issuer: testIssuerName, Audience: "switchboard", JWKSURL: is.srv.URL, JWKSRefresh: refresh}}
	gw, srv := startGateway(t, b, cfg)
	return is, cfg, gw, srv
}

// TestStreamsEndWithTheirServersAudience: a reload that gives a virtual
// server another audience ends the streams a token for the old one
// opened there, as the token is refused there from then on; a reload
// of the servers alone once rechecked no stream, and one of gateway.auth
// rechecked against the audience the stream opened with.
func TestStreamsEndWithTheirServersAudience(t *testing.T) {
	is := newTestIssuer(t)
	b := startBackends(t)
	cfg := testGatewayConfig(b)
	cfg.Auth = config.GatewayAuth{Mode: "oidc", OIDC: config.OIDC{Issuer: testIssuerName, Audience: "switchboard", JWKSURL: is.srv.URL}}
	servers := []config.Server{{Name: "alpha", Backends: []string{"alpha"}, Audience: "aud-alpha"}}
	gw, srv := startGatewayWith(t, b, cfg, func(d *Deps) { d.Servers = servers })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	listen := func(url, token string) *bufio.Scanner {
		_, lines := openStream(t, ctx, url, modernHeaders("subscriptions/listen", "Authorization", "Bearer "+token),
			`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{`+modernMeta+`,"notifications":{"toolsListChanged":true}}}`)
		if ack := nextData(t, lines); !strings.Contains(ack, "acknowledged") {
			t.Fatalf("ack %s", ack)
		}
		return lines
	}
	alpha := listen(srv.URL+"/mcp/alpha", is.token(t, "alice", "aud-alpha"))
	shared := listen(srv.URL+"/mcp", is.token(t, "bob", "switchboard"))
	if err := gw.Reload(&config.Config{Gateway: cfg, Servers: []config.Server{{Name: "alpha", Backends: []string{"alpha"}, Audience: "aud-alpha-v2"}}}); err != nil {
		t.Fatal(err)
	}
	for alpha.Scan() {
		if strings.Contains(alpha.Text(), `"method"`) {
			t.Fatalf("alice's stream delivered after alpha's audience changed: %s", alpha.Text())
		}
	}
	if ctx.Err() != nil {
		t.Fatal("alice's stream at alpha outlived alpha's audience change")
	}
	for range 2 {
		if d := nextData(t, shared); !strings.HasPrefix(d, ":") {
			t.Fatalf("bob's stream at /mcp: %q", d)
		}
	}
}
