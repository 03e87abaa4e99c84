package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/demobackend"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
	"github.com/switchboard-mcp/switchboard/test/mcpraw"
)

// Virtual servers, tool overrides and backends change live: the gateway
// and the aggregator read the same rewritten file; clients of the whole
// catalog hear list_changed, a new server is served, a removed one is
// 404, and a file naming an unknown backend is refused with the running
// configuration kept.
func TestLiveServersOverridesAndBackends(t *testing.T) {
	c := harness.Start(t, harness.Options{
		Backends:  []harness.Backend{{Name: "alpha"}, {Name: "beta"}},
		NoIndexer: true,
		Configure: func(cfg *config.Config) {
			cfg.Reload.Interval = config.Duration(200 * time.Millisecond)
			cfg.Gateway.Cache.TTL = config.Duration(time.Millisecond)
			cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: aliceKey, Subject: "alice"}}}
		},
	})
	rewrite := configRewriter(t, c)
	status := func(url string) int {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+aliceKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	whole := connectLive(t, c.MCPURL, harness.Legacy, aliceKey, "whole catalog")
	if got := status(c.MCPURL + "/team"); got != http.StatusNotFound {
		t.Fatalf("/mcp/team before it is configured: %d", got)
	}

	// A server and an override, live.
	since := time.Now()
	rewrite(func(cfg *config.Config) {
		cfg.Servers = []config.Server{{Name: "team", Backends: []string{"beta"}, Tools: config.ItemFilter{Exclude: []string{"*_sleep"}}}}
		cfg.Aggregator.ToolOverrides = []config.ToolOverride{{Backend: "alpha", Tool: "echo", Name: "repeat", Description: "Say it again."}}
	})
	// The gateway and the aggregator each take the file on their own
	// watch: the server is served once both have.
	testkit.Eventually(t, "/mcp/team served", 20*time.Second, func() error {
		if got := status(c.MCPURL + "/team"); got != http.StatusOK {
			return errStatus(got)
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "probe", Version: "0"}, nil).Connect(t.Context(),
			&mcp.StreamableClientTransport{Endpoint: c.MCPURL + "/team", HTTPClient: &http.Client{Transport: bearerTransport{aliceKey}}, MaxRetries: -1}, nil)
		if err != nil {
			return err
		}
		return cs.Close()
	})
	team := connectLive(t, c.MCPURL+"/team", harness.Modern, aliceKey, "team")
	if got, want := harness.ToolNames(t, team.cs), []string{"beta_add", "beta_echo", "beta_fail", "beta_hello"}; !slices.Equal(got, want) {
		t.Errorf("/mcp/team lists %v, want %v", got, want)
	}
	awaitNotified(t, []*liveClient{whole}, since, "alpha_repeat")
	if got := harness.ToolNames(t, whole.cs); slices.Contains(got, "alpha_echo") {
		t.Errorf("the whole catalog still lists alpha_echo after the override: %v", got)
	}

	// A bad file changes nothing.
	rewrite(func(cfg *config.Config) {
		cfg.Servers = append(cfg.Servers, config.Server{Name: "broken", Backends: []string{"nope"}})
	})
	testkit.Eventually(t, "the bad file rejected by both services", 20*time.Second, func() error {
		for _, p := range []*harness.Proc{c.Gateway, c.Aggregator} {
			if !strings.Contains(p.Log(1<<20), "configuration reload rejected") {
				return errStatus(0)
			}
		}
		return nil
	})
	if got := status(c.MCPURL + "/team"); got != http.StatusOK {
		t.Errorf("/mcp/team after a rejected file: %d", got)
	}
	if got := status(c.MCPURL + "/broken"); got != http.StatusNotFound {
		t.Errorf("/mcp/broken from a rejected file: %d", got)
	}

	// A backend and its server removed, live.
	since = time.Now()
	rewrite(func(cfg *config.Config) {
		cfg.Servers = nil
		cfg.Aggregator.Backends = slices.DeleteFunc(cfg.Aggregator.Backends, func(b config.Backend) bool { return b.Name == "beta" })
	})
	testkit.Eventually(t, "/mcp/team gone", 20*time.Second, func() error {
		if got := status(c.MCPURL + "/team"); got != http.StatusNotFound {
			return errStatus(got)
		}
		return nil
	})
	awaitNotified(t, []*liveClient{whole}, since, "alpha_repeat")
	if got := harness.ToolNames(t, whole.cs); slices.ContainsFunc(got, func(n string) bool { return strings.HasPrefix(n, "beta_") }) {
		t.Errorf("the whole catalog still lists beta's tools after beta was removed: %v", got)
	}
}

type errStatus int

func (e errStatus) Error() string { return "status " + http.StatusText(int(e)) }

// liveTeam starts a cluster (the indexer left out) that reloads its
// configuration every 200 ms and serves server, named team, over backend
// alpha, and connects a client of each era to /mcp/team, each of which
// must list the tools want.
func liveTeam(t *testing.T, server config.Server, want []string) (*harness.Cluster, func(func(*config.Config)), []*liveClient) {
	t.Helper()
	server.Name, server.Backends = "team", []string{"alpha"}
	c := harness.Start(t, harness.Options{
		Backends:  []harness.Backend{{Name: "alpha"}},
		NoIndexer: true,
		Configure: func(cfg *config.Config) {
			cfg.Reload.Interval = config.Duration(200 * time.Millisecond)
			cfg.Gateway.Cache.TTL = config.Duration(time.Millisecond)
			cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: aliceKey, Subject: "alice"}}}
			cfg.Servers = []config.Server{server}
		},
	})
	var clients []*liveClient
	for era, pin := range map[string]string{"modern": harness.Modern, "legacy": harness.Legacy} {
		lc := connectLive(t, c.MCPURL+"/team", pin, aliceKey, era)
		if got := harness.ToolNames(t, lc.cs); !slices.Equal(got, want) {
			t.Fatalf("%s: the server lists %v, want %v", era, got, want)
		}
		clients = append(clients, lc)
	}
	return c, configRewriter(t, c), clients
}

// A reload that changes a server's optimizer setting changes the tools
// its open sessions list: their notification streams (a Modern listen, a
// Legacy session's GET stream) say so, and then follow the view their
// endpoint serves now, the raw view's changes included.
func TestLiveOptimizerSettingReachesOpenStreams(t *testing.T) {
	optimized, raw := true, false
	c, rewrite, clients := liveTeam(t, config.Server{Optimizer: &optimized}, []string{"find_tool", "call_tool"})

	since := time.Now()
	rewrite(func(cfg *config.Config) { cfg.Servers[0].Optimizer = &raw })
	awaitNotified(t, clients, since, "alpha_echo")
	// The streams now tell of the raw view's changes.
	since = time.Now()
	c.AddTool(t, "alpha", demobackend.ToolSpec{Name: "marker", Description: "Marks a point in the test.", Behaviour: demobackend.BehaviourEcho})
	awaitNotified(t, clients, since, "alpha_marker")

	since = time.Now()
	rewrite(func(cfg *config.Config) { cfg.Servers[0].Optimizer = &optimized })
	awaitNotified(t, clients, since, "find_tool")
}

// TestLiveCodeModeSettingReachesOpenStreams: a reload that turns code mode
// on or off for a server changes its optimizer view's tools (run_code
// comes or goes), and the streams open on it are told, in both eras, as
// for any other change of what they list.
func TestLiveCodeModeSettingReachesOpenStreams(t *testing.T) {
	optimized, on, off := true, true, false
	_, rewrite, clients := liveTeam(t, config.Server{Optimizer: &optimized, CodeMode: &off}, []string{"find_tool", "call_tool"})

	since := time.Now()
	rewrite(func(cfg *config.Config) { cfg.Servers[0].CodeMode = &on })
	awaitNotified(t, clients, since, "run_code")

	since = time.Now()
	rewrite(func(cfg *config.Config) { cfg.Servers[0].CodeMode = &off })
	awaitNotified(t, clients, since, "")
	for _, lc := range clients {
		if got := harness.ToolNames(t, lc.cs); slices.Contains(got, "run_code") {
			t.Errorf("%s: code mode off, the server lists %v", lc.name, got)
		}
	}
}

// TestRemovedServerEndsItsListens: a reload that removes a virtual server
// ends the subscriptions/listen streams open on it gracefully, with the
// listen's final result carrying its subscriptionId, as a listen whose
// subscriptions cannot be restored ends: the spec says a server SHOULD
// send it on a graceful end, and takes a close without it for an abrupt
// drop, after which a client MAY listen again.
func TestRemovedServerEndsItsListens(t *testing.T) {
	gwOps := harness.FreeAddr(t)
	c := harness.Start(t, harness.Options{
		Backends:  []harness.Backend{{Name: "alpha"}},
		NoIndexer: true,
		Configure: func(cfg *config.Config) {
			cfg.Reload.Interval = config.Duration(200 * time.Millisecond)
			cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: aliceKey, Subject: "alice"}}}
			cfg.Gateway.OpsListen = gwOps
			cfg.Servers = []config.Server{{Name: "team", Backends: []string{"alpha"}}}
		},
	})
	rewrite := configRewriter(t, c)
	type ending struct {
		answer mcpraw.Answer
		err    error
	}
	ended := make(chan ending, 1)
	listener := &mcpraw.Client{URL: c.MCPURL + "/team", Authorization: "Bearer " + aliceKey}
	go func() {
		// Send reads the stream to its end and returns its last message.
		a, err := listener.Send(t.Context(), "subscriptions/listen", "", map[string]any{"notifications": map[string]any{"toolsListChanged": true}})
		ended <- ending{a, err}
	}()
	testkit.Eventually(t, "the listen open", 20*time.Second, func() error {
		if got := metric(t, gwOps, `switchboard_gateway_open_streams{kind="listen"}`); got != "1" {
			return fmt.Errorf("open listen streams %q", got)
		}
		return nil
	})
	rewrite(func(cfg *config.Config) { cfg.Servers = nil })
	select {
	case e := <-ended:
		var result struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		}
		if e.err != nil || e.answer.Error != nil || json.Unmarshal(e.answer.Result, &result) != nil || string(result.Meta[mcpspec.MetaSubscriptionID]) != "1" {
			t.Fatalf("the listen ended with %s (error %v, %v); want its final result with subscriptionId 1", e.answer.Result, e.answer.Error, e.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the listen is still open 30s after its server was removed")
	}
}
