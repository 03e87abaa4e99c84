package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// TestOneCallersRejectionLeavesOthersCalls: a backend sits behind a proxy
// that refuses bodies over 64 KiB with 413 (nginx's client_max_body_size).
// One caller's oversized call fails alone, as its own fault; another
// principal's call in flight on the session every caller shares carries
// on to its result.
func TestOneCallersRejectionLeavesOthersCalls(t *testing.T) {
	for _, stateful := range []bool{false, true} {
		t.Run(map[bool]string{false: "dual-era", true: "legacy-only"}[stateful], func(t *testing.T) {
			c := harness.Start(t, harness.Options{
				Backends:  []harness.Backend{{Name: "b", Spec: "tools:\n  - {name: echo, behaviour: echo}\n  - {name: sleep, behaviour: sleep}\n", Stateful: stateful}},
				NoIndexer: true,
				Configure: func(cfg *config.Config) {
					target, err := url.Parse(cfg.Aggregator.Backends[0].URL)
					if err != nil {
						t.Fatal(err)
					}
					proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
					proxy.FlushInterval = -1
					srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						if r.ContentLength > 64<<10 {
							http.Error(w, "413 Request Entity Too Large", http.StatusRequestEntityTooLarge)
							return
						}
						proxy.ServeHTTP(w, r)
					}))
					t.Cleanup(srv.Close)
					cfg.Aggregator.Backends[0].URL = srv.URL + target.Path
					cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{
						{Key: aliceKey, Subject: "alice"}, {Key: bobKey, Subject: "bob"}}}
				},
			})
			alice := connectLive(t, c.MCPURL, harness.Modern, aliceKey, "alice").cs
			bob := connectLive(t, c.MCPURL, harness.Modern, bobKey, "bob").cs
			// Plain calls first, so that the shared plain session is up.
			testkit.Eventually(t, "bob's calls served", 20*time.Second, func() error {
				_, err := bob.CallTool(t.Context(), &mcp.CallToolParams{Name: "b_echo", Arguments: map[string]any{}})
				return err
			})
			type outcome struct {
				res *mcp.CallToolResult
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				res, err := bob.CallTool(t.Context(), &mcp.CallToolParams{Name: "b_sleep", Arguments: map[string]any{"duration": "2s"}})
				done <- outcome{res, err}
			}()
			testkit.Eventually(t, "bob's call running at the backend", 10*time.Second, func() error {
				if n := c.Sleeps(t, "b").Running; n != 1 {
					return fmt.Errorf("%d running", n)
				}
				return nil
			})
			_, err := alice.CallTool(t.Context(), &mcp.CallToolParams{Name: "b_echo", Arguments: map[string]any{"blob": strings.Repeat("x", 100<<10)}})
			if err == nil || !strings.Contains(err.Error(), "invalid params: the backend rejected the request") {
				t.Fatalf("alice's 100 KiB call: %v, want the backend's refusal of her request (-32602)", err)
			}
			if got := <-done; got.err != nil || got.res.IsError {
				t.Fatalf("bob's call in flight: %v %+v, want its result: alice's refusal is hers alone", got.err, got.res)
			}
		})
	}
}
