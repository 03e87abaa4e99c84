package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.yaml.in/yaml/v3"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/demobackend"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// Live configuration, through the real processes: a Cedar policy written
// while clients of both eras hold notification streams (a Modern listen, a
// Legacy session's GET stream) takes effect without a restart, for the
// principal it concerns and for no one else; a broken policy is rejected
// and the one in force stays; an API key added to the configuration file
// works without a restart.

const (
	permitAll   = "permit (principal, action, resource);\n"
	forbidAlice = permitAll + `forbid (principal == User::"alice", action, resource == Tool::"alpha_add");` + "\n"
	brokenCedar = "permit (principal, action, resource);\nforbid (principal ==\n"
	aliceKey    = "alice-key-0123456789"
	bobKey      = "bob-key-0123456789"
	carolKey    = "carol-key-0123456789"
)

// bearerTransport sends one bearer credential (an API key, an OIDC
// token) with every request.
type bearerTransport struct{ key string }

func (b bearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(req)
}

// liveClient is one principal's client in one era, with a notification
// stream (the SDK opens it: a Modern listen, a Legacy GET stream), and
// the times its tools/list_changed notifications arrived.
type liveClient struct {
	name string
	cs   *mcp.ClientSession
	mu   sync.Mutex
	seen []time.Time
}

func (c *liveClient) notified() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.seen)
}

func connectLive(t *testing.T, url, pin, key, name string) *liveClient {
	t.Helper()
	lc := &liveClient{name: name}
	client := mcp.NewClient(&mcp.Implementation{Name: "switchboard-live", Version: "0"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			lc.mu.Lock()
			lc.seen = append(lc.seen, time.Now())
			lc.mu.Unlock()
		},
	})
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{
		Endpoint: url, HTTPClient: &http.Client{Transport: bearerTransport{key}}, MaxRetries: -1,
	}, &mcp.ClientSessionOptions{ProtocolVersion: pin})
	if err != nil {
		t.Fatalf("%s: connect: %v", name, err)
	}
	t.Cleanup(func() { cs.Close() })
	lc.cs = cs
	return lc
}

// callSignature is how a call is answered: the backend's answer, or the
// error with the tool's name taken out, so that a denied tool can be
// compared with one that does not exist.
func callSignature(ctx context.Context, cs *mcp.ClientSession, name string) string {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"a": 1, "b": 2}})
	var we *jsonrpc.Error
	switch {
	case errors.As(err, &we):
		return fmt.Sprintf("error %d %s %s", we.Code, strings.ReplaceAll(we.Message, name, "<tool>"), strings.ReplaceAll(string(we.Data), name, "<tool>"))
	case err != nil:
		return "transport error: " + err.Error()
	case res.IsError:
		return "tool error"
	}
	return "ok"
}

// configRewriter returns a function that changes the cluster's
// configuration file as written last, and writes it whole.
func configRewriter(t *testing.T, c *harness.Cluster) func(change func(*config.Config)) {
	file := *c.Config
	return func(change func(*config.Config)) {
		t.Helper()
		change(&file)
		raw, err := yaml.Marshal(&file)
		if err != nil {
			t.Fatal(err)
		}
		writeAtomically(t, c.ConfigPath, raw)
	}
}

// writeAtomically replaces path's content in one rename, as a deployment
// tool does, so a watch never reads half a file.
func writeAtomically(t *testing.T, path string, content []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, content, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// metric is the value of the series name (its labels included) that the
// ops port at addr serves, "" when it serves none.
func metric(t *testing.T, addr, name string) string {
	t.Helper()
	for _, line := range strings.Split(metricsText(t, "http://"+addr+"/metrics"), "\n") {
		if strings.HasPrefix(line, name+" ") {
			return strings.TrimPrefix(line, name+" ")
		}
	}
	return ""
}

func TestLiveConfiguration(t *testing.T) {
	dir := t.TempDir()
	policyPath := filepath.Join(dir, "policy.cedar")
	writeAtomically(t, policyPath, []byte(permitAll))
	var aggOps, gwOps string
	c := harness.Start(t, harness.Options{Backends: []harness.Backend{{Name: "alpha"}}, Configure: func(cfg *config.Config) {
		cfg.Reload.Interval = config.Duration(200 * time.Millisecond)
		cfg.Indexer.ScopeTTL = config.Duration(10 * time.Minute)
		cfg.Aggregator.Authz.PolicyFile = policyPath
		aggOps, gwOps = harness.FreeAddr(t), harness.FreeAddr(t)
		cfg.Aggregator.HTTPListen, cfg.Gateway.OpsListen = aggOps, gwOps
		// Lists are never served from the client's cache: each listing
		// below shows what the gateway answers now.
		cfg.Gateway.Cache.TTL = config.Duration(time.Millisecond)
		cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{
			{Key: aliceKey, Subject: "alice"}, {Key: bobKey, Subject: "bob"},
		}}
	}})
	optimized := strings.TrimSuffix(c.MCPURL, "/mcp") + "/mcp/optimized"
	rewrite := configRewriter(t, c)

	var alice, bob []*liveClient
	for era, pin := range map[string]string{"modern": harness.Modern, "legacy": harness.Legacy} {
		alice = append(alice, connectLive(t, c.MCPURL, pin, aliceKey, "alice "+era))
		bob = append(bob, connectLive(t, c.MCPURL, pin, bobKey, "bob "+era))
	}
	everyone := append(slices.Clone(alice), bob...)
	for _, lc := range everyone {
		if names := harness.ToolNames(t, lc.cs); !slices.Contains(names, "alpha_add") {
			t.Fatalf("%s: tools %v lack alpha_add before any policy change", lc.name, names)
		}
	}
	// A change everyone sees shows that every notification stream is open
	// before the policy changes.
	c.AddTool(t, "alpha", demobackend.ToolSpec{Name: "marker1", Description: "Marks a point in the test.", Behaviour: demobackend.BehaviourEcho})
	awaitNotified(t, everyone, time.Time{}, "alpha_marker1")
	// find_tool finds alpha_add for both, so the indexer holds a scope for
	// each (for long: scopeTTL is 10m here) when the policy changes. A
	// change of the catalog drops every scope it holds: this comes after
	// the last one.
	var finders []finder
	for _, key := range []string{aliceKey, bobKey} {
		f := finder{key: key, lc: connectLive(t, optimized, harness.Modern, key, "optimized "+key[:3])}
		f.await(t, true)
		finders = append(finders, f)
	}

	t.Run("a new policy takes effect for the principal it concerns", func(t *testing.T) {
		written := time.Now()
		writeAtomically(t, policyPath, []byte(forbidAlice))
		awaitNotified(t, alice, written, "")
		for _, lc := range alice {
			testkit.Eventually(t, lc.name+": alpha_add gone from tools/list", 10*time.Second, func() error {
				if names := harness.ToolNames(t, lc.cs); slices.Contains(names, "alpha_add") {
					return fmt.Errorf("still listed: %v", names)
				}
				return nil
			})
			denied, unknown := callSignature(t.Context(), lc.cs, "alpha_add"), callSignature(t.Context(), lc.cs, "alpha_no_such_tool")
			if denied == "ok" || denied != unknown {
				t.Fatalf("%s: the forbidden tool answers %q, an unknown one %q", lc.name, denied, unknown)
			}
		}
		// find_tool searches the principal's view under the new policy:
		// the indexer dropped the scope it held for alice (before any
		// change of the catalog could have made it).
		for _, f := range finders {
			f.await(t, f.key == bobKey)
		}
		// Bob's view did not change: his streams carry nothing until the
		// next change he does see, and he lists and calls alpha_add.
		marked := time.Now()
		c.AddTool(t, "alpha", demobackend.ToolSpec{Name: "marker2", Description: "Marks another point.", Behaviour: demobackend.BehaviourEcho})
		awaitNotified(t, bob, marked, "alpha_marker2")
		for _, lc := range bob {
			for _, at := range lc.notified() {
				if !at.Before(written) && at.Before(marked) {
					t.Fatalf("%s: a tools/list_changed arrived at %v for the policy written at %v, which did not change his view", lc.name, at, written)
				}
			}
			if names := harness.ToolNames(t, lc.cs); !slices.Contains(names, "alpha_add") {
				t.Fatalf("%s: tools %v lack alpha_add", lc.name, names)
			}
			if got := callSignature(t.Context(), lc.cs, "alpha_add"); got != "ok" {
				t.Fatalf("%s: alpha_add answers %q", lc.name, got)
			}
		}
	})

	t.Run("a broken policy is rejected and the one in force stays", func(t *testing.T) {
		writeAtomically(t, policyPath, []byte(brokenCedar))
		testkit.Eventually(t, "the aggregator logs the rejection", 10*time.Second, func() error {
			for _, line := range strings.Split(c.Aggregator.Log(1<<20), "\n") {
				if strings.Contains(line, "configuration reload rejected") {
					if !strings.Contains(line, "parse policy file") {
						return fmt.Errorf("the rejection does not say the policy does not parse: %s", line)
					}
					// The line is written before the counter moves:
					// wait for both.
					if got := metric(t, aggOps, `switchboard_config_reloads_total{result="rejected"}`); got != "1" {
						return fmt.Errorf("aggregator rejected reloads = %q, want 1", got)
					}
					return nil
				}
			}
			return errors.New("not logged yet")
		})
		for _, lc := range alice {
			if got := callSignature(t.Context(), lc.cs, "alpha_add"); got == "ok" {
				t.Fatalf("%s: alpha_add is callable: the broken policy opened it", lc.name)
			}
		}
		for _, lc := range bob {
			if got := callSignature(t.Context(), lc.cs, "alpha_add"); got != "ok" {
				t.Fatalf("%s: alpha_add answers %q under the policy in force", lc.name, got)
			}
		}
		// Fixed again, it is taken.
		writeAtomically(t, policyPath, []byte(forbidAlice+"// fixed\n"))
		testkit.Eventually(t, "the aggregator takes the fixed policy", 10*time.Second, func() error {
			if got := metric(t, aggOps, `switchboard_config_reloads_total{result="ok"}`); got != "2" {
				return fmt.Errorf("ok reloads = %q, want 2", got)
			}
			return nil
		})
	})

	t.Run("an API key added to the file works without a restart", func(t *testing.T) {
		gatewayPid := c.Gateway.Pid()
		rewrite(func(cfg *config.Config) {
			cfg.Gateway.Auth.APIKeys = append(slices.Clone(cfg.Gateway.Auth.APIKeys), config.APIKey{Key: carolKey, Subject: "carol"})
		})
		for era, pin := range map[string]string{"modern": harness.Modern, "legacy": harness.Legacy} {
			testkit.Eventually(t, "carol connects ("+era+")", 10*time.Second, func() error {
				client := mcp.NewClient(&mcp.Implementation{Name: "carol", Version: "0"}, nil)
				cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{
					Endpoint: c.MCPURL, HTTPClient: &http.Client{Transport: bearerTransport{carolKey}}, MaxRetries: -1, DisableStandaloneSSE: true,
				}, &mcp.ClientSessionOptions{ProtocolVersion: pin})
				if err != nil {
					return err
				}
				defer cs.Close()
				if got := callSignature(t.Context(), cs, "alpha_add"); got != "ok" {
					return fmt.Errorf("carol's alpha_add answers %q", got)
				}
				return nil
			})
		}
		if c.Gateway.Pid() != gatewayPid || !c.Gateway.Running() {
			t.Fatal("the gateway restarted")
		}
		// The file is applied before the reload is counted.
		testkit.Eventually(t, "the gateway counts the reload", 10*time.Second, func() error {
			if got := metric(t, gwOps, `switchboard_config_reloads_total{result="ok"}`); got != "1" {
				return fmt.Errorf("gateway ok reloads = %q, want 1", got)
			}
			return nil
		})
		for _, p := range []*harness.Proc{c.Gateway, c.Aggregator, c.Indexer} {
			if log := p.Log(4 << 20); strings.Contains(log, "needs a restart") {
				t.Errorf("%s: a change it applies live is logged as needing a restart:\n%s", p.Name, log)
			}
		}
		// SIGHUP reloads at once, the file unchanged, and the process lives on.
		if err := syscall.Kill(c.Gateway.Pid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, "the gateway reloads on SIGHUP", 10*time.Second, func() error {
			if got := metric(t, gwOps, `switchboard_config_reloads_total{result="ok"}`); got != "2" {
				return fmt.Errorf("ok reloads = %q, want 2", got)
			}
			return nil
		})
		c.Gateway.AwaitLog(t, "forced=true")
		if !c.Gateway.Running() || c.Gateway.Pid() != gatewayPid {
			t.Fatal("the gateway did not reload on SIGHUP as a live process")
		}
		// Alice's key still works, her policy too.
		for _, lc := range alice {
			if got := callSignature(t.Context(), lc.cs, "alpha_hello"); got != "ok" {
				t.Fatalf("%s: alpha_hello answers %q after the key was added", lc.name, got)
			}
		}
	})

	t.Run("the service tokens rotate without a restart", func(t *testing.T) {
		next := "rotated-" + c.GatewayToken
		aggAddr, idxAddr := c.Config.Aggregator.Listen, c.Config.Indexer.Listen
		gatewayReloads := func() int {
			n, _ := strconv.Atoi(metric(t, gwOps, `switchboard_config_reloads_total{result="ok"}`))
			return n
		}
		awaitGatewayReloads := func(want int) {
			testkit.Eventually(t, fmt.Sprintf("the gateway's reload %d", want), 10*time.Second, func() error {
				if got := gatewayReloads(); got < want {
					return fmt.Errorf("%d ok reloads", got)
				}
				return nil
			})
		}
		before := gatewayReloads()
		// 1. The servers accept the new token besides the old one (the
		// gateway reloads the file too, and finds nothing of its own).
		rewrite(func(cfg *config.Config) {
			cfg.ServiceAuth.Credentials = append(slices.Clone(cfg.ServiceAuth.Credentials), config.ServiceCredential{
				Name: "gateway-next", Token: next, AssertPrincipals: true, Allow: config.GatewayMethods})
		})
		for _, addr := range []string{aggAddr, idxAddr} {
			testkit.Eventually(t, "the new token is accepted at "+addr, 10*time.Second, func() error {
				if err := serviceCall(t, addr, next); err != nil {
					return fmt.Errorf("the new token's call: %v", err)
				}
				return nil
			})
		}
		awaitGatewayReloads(before + 1)
		// 2. The gateway presents the new token.
		rewrite(func(cfg *config.Config) {
			cfg.Gateway.Aggregator.Token, cfg.Gateway.Indexer.Token = next, next
		})
		awaitGatewayReloads(before + 2)
		c.Gateway.AwaitLog(t, "gateway service tokens reloaded")
		// 3. The old token is withdrawn.
		rewrite(func(cfg *config.Config) {
			cfg.ServiceAuth.Credentials = slices.DeleteFunc(slices.Clone(cfg.ServiceAuth.Credentials), func(cr config.ServiceCredential) bool { return cr.Name == "gateway" })
		})
		for _, addr := range []string{aggAddr, idxAddr} {
			testkit.Eventually(t, "the old token is refused at "+addr, 10*time.Second, func() error {
				if err := serviceCall(t, addr, c.GatewayToken); status.Code(err) != codes.Unauthenticated {
					return fmt.Errorf("the old token's call: %v", err)
				}
				return nil
			})
		}
		// Through it all the gateway served, with the token in force: a new
		// session lists and calls, find_tool searches.
		for _, lc := range bob {
			if got := callSignature(t.Context(), lc.cs, "alpha_add"); got != "ok" {
				t.Fatalf("%s: alpha_add answers %q after the rotation", lc.name, got)
			}
		}
		fresh := connectLive(t, c.MCPURL, harness.Legacy, bobKey, "bob after the rotation")
		if names := harness.ToolNames(t, fresh.cs); !slices.Contains(names, "alpha_add") {
			t.Fatalf("bob's new session lists %v", names)
		}
		finders[1].await(t, true)
		for _, p := range []*harness.Proc{c.Gateway, c.Aggregator, c.Indexer} {
			if log := p.Log(4 << 20); strings.Contains(log, "needs a restart") {
				t.Errorf("%s: a change it applies live is logged as needing a restart:\n%s", p.Name, log)
			}
		}
	})
}

// serviceCall makes one call of the gateway's to the service at addr
// with token: Discover of the aggregator, RefreshScope of the indexer (its
// answer may be an error of the indexer's own; only authentication counts).
func serviceCall(t *testing.T, addr, token string) error {
	t.Helper()
	conn, err := rpc.Dial(config.Endpoint{Address: addr, Token: token}, config.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	p := &commonv1.Principal{Subject: "bob"}
	_, err = aggregatorv1.NewAggregatorServiceClient(conn).Discover(ctx, &aggregatorv1.DiscoverRequest{Principal: p})
	if status.Code(err) == codes.Unimplemented {
		_, err = indexerv1.NewIndexerServiceClient(conn).Search(ctx, &indexerv1.SearchRequest{Principal: p, Query: "add"})
	}
	return err
}

// finder runs find_tool for one principal.
type finder struct {
	key string
	lc  *liveClient
}

// await waits until find_tool for "add two numbers" finds alpha_add, or
// does not.
func (f finder) await(t *testing.T, wantAdd bool) {
	t.Helper()
	testkit.Eventually(t, fmt.Sprintf("%s: find_tool finds alpha_add: %v", f.lc.name, wantAdd), 20*time.Second, func() error {
		res, err := f.lc.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "find_tool",
			Arguments: map[string]any{"tool_description": "add two numbers", "tool_keywords": []string{"add"}}})
		if err != nil {
			return err
		}
		found := fmt.Sprint(res.StructuredContent)
		if res.IsError || strings.Contains(found, "alpha_add") != wantAdd {
			return fmt.Errorf("find_tool found %s (error %v)", found, res.IsError)
		}
		return nil
	})
}

// awaitNotified waits until each client got a tools/list_changed
// notification at or after since and, with tool set, lists tool.
func awaitNotified(t *testing.T, clients []*liveClient, since time.Time, tool string) {
	t.Helper()
	for _, lc := range clients {
		testkit.Eventually(t, lc.name+": tools/list_changed", 30*time.Second, func() error {
			n := lc.notified()
			if len(n) == 0 || n[len(n)-1].Before(since) {
				return fmt.Errorf("none since %v (%d before)", since, len(n))
			}
			if tool != "" {
				if names := harness.ToolNames(t, lc.cs); !slices.Contains(names, tool) {
					return fmt.Errorf("tools %v lack %s", names, tool)
				}
			}
			return nil
		})
	}
}
