// Package console tests the operator console in a real browser: the real
// processes (demo backends, aggregator, indexer with PostgreSQL, gateway
// with gateway.console on its ops port) and a headless Chromium
// (test/browser) that logs in with the keyboard, opens every page, checks
// what it shows against the running system through the gRPC APIs and MCP,
// checks it on a phone's screen and saves a screenshot of each page
// (SWITCHBOARD_ARTIFACTS, default test/artifacts/<test>).
package console

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

// policy gives two principals different views: support staff see two
// tools, through the support server only; engineers see everything.
const policy = `
permit (principal in Group::"support", action == Action::"call_tool", resource in Server::"support")
  when { resource == Tool::"tickets_echo" || resource == Tool::"docs_hello" };
permit (principal in Group::"eng", action, resource);
`

// The credentials of the test: the operator's console login key, the
// console's own service credential, the aggregators' credential (rate
// limits, audit events and tasks go to the indexer with it), and the API
// keys of two MCP users.
const (
	operatorKey    = "operator-key-of-the-console-test"
	consoleToken   = "console-token-of-the-console-test"
	aggregatorAuth = "aggregator-token-of-the-console-test"
	sueKey         = "sue-key-of-the-console-test"
	erinKey        = "erin-key-of-the-console-test"
)

// The rate limit the test consumes: per principal, on tools/call, so
// slow (1/h) that the tokens left do not change while the test reads
// them, with a burst of 10 (leases of one token).
const (
	limitName  = "each-user"
	limitBurst = 10
	// optimizerLimit is gateway.optimizer.limit: find_tool's hits.
	optimizerLimit = 3
)

// stack is the running system and clients of its APIs.
type stack struct {
	c *harness.Cluster
	// console is the console's base URL on the gateway's ops port.
	console string
	// offline is a configured backend nothing listens for.
	offline    string
	aggregator aggregatorv1.AggregatorServiceClient
	indexer    indexerv1.IndexerServiceClient
}

func startStack(t *testing.T) *stack {
	t.Helper()
	dir := t.TempDir()
	policyFile := filepath.Join(dir, "policy.cedar")
	if err := os.WriteFile(policyFile, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &stack{offline: "offline"}
	s.c = harness.Start(t, harness.Options{
		Backends: []harness.Backend{{Name: "tickets"}, {Name: "docs", Stateful: true}},
		Configure: func(cfg *config.Config) {
			// A backend that is down from the start: no process listens.
			cfg.Aggregator.Backends = append(cfg.Aggregator.Backends, config.Backend{Name: s.offline, URL: "http://" + harness.FreeAddr(t) + "/mcp"})
			// Probed every second, unhealthy at its first failure: the
			// offline backend is shown down within seconds.
			cfg.Aggregator.Health = config.HealthCheck{Interval: config.Duration(time.Second), UnhealthyThreshold: 1}
			cfg.Aggregator.Authz.PolicyFile = policyFile
			cfg.Gateway.Auth.Mode = "apiKeys"
			cfg.Gateway.Auth.APIKeys = []config.APIKey{
				{Key: sueKey, Subject: "sue", Groups: []string{"support"}},
				{Key: erinKey, Subject: "erin", Groups: []string{"eng"}},
			}
			cfg.Servers = []config.Server{
				{Name: "support", Backends: []string{"tickets", "docs"}, Tools: config.ItemFilter{Include: []string{"tickets_*", "docs_hello"}}},
			}
			// Tasks the tasks page lists: erin's sleep stays working while
			// the test reads it; her echo completes at once.
			cfg.Aggregator.ToolOverrides = []config.ToolOverride{
				{Backend: "tickets", Tool: "sleep", TaskSupport: config.TaskSupportOptional, Timeout: config.Duration(10 * time.Minute)},
				{Backend: "tickets", Tool: "echo", TaskSupport: config.TaskSupportOptional},
			}
			cfg.RateLimits.Limits = []config.RateLimit{{Name: limitName, Per: config.RatePerPrincipal, Rate: "1/h", Burst: limitBurst,
				Methods: []string{config.RateMethodToolsCall}}}
			cfg.ServiceAuth.Credentials = append(cfg.ServiceAuth.Credentials,
				config.ServiceCredential{Name: "aggregator", Token: aggregatorAuth, AssertPrincipals: true, Allow: config.AggregatorMethods},
				config.ServiceCredential{Name: "console", Token: consoleToken, AssertPrincipals: true, Operator: true, Allow: config.ConsoleMethods})
			cfg.Aggregator.Indexer = config.Endpoint{Address: cfg.Indexer.Listen, Token: aggregatorAuth}
			cfg.Audit.Database.Enabled = true
			cfg.Gateway.OpsListen = harness.FreeAddr(t)
			// Not find_tool's default, so the search page must read it.
			cfg.Gateway.Optimizer.Limit = optimizerLimit
			cfg.Gateway.Console = config.Console{Enabled: true, OperatorKeys: []string{operatorKey}, ServiceToken: consoleToken}
		},
	})
	s.console = "http://" + s.c.Config.Gateway.OpsListen + "/console"
	s.aggregator = aggregatorv1.NewAggregatorServiceClient(dial(t, s.c.Config.Aggregator.Listen, s.c.OperatorToken))
	s.indexer = indexerv1.NewIndexerServiceClient(dial(t, s.c.Config.Indexer.Listen, s.c.OperatorToken))
	return s
}

// dial connects to a service with a token (the operator's: the checks
// read what the console reads, as the console's credential may).
func dial(t *testing.T, addr, token string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(svcauth.TokenCredentials{Token: token}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// withKey authenticates every request with an API key.
type withKey struct{ key string }

func (k withKey) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+k.key)
	return http.DefaultTransport.RoundTrip(req)
}

// connectAs opens an MCP session (Modern) at url with an API key.
func connectAs(t *testing.T, url, key string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "switchboard-console-test", Version: "0"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{
		Endpoint: url, MaxRetries: -1, HTTPClient: &http.Client{Transport: withKey{key}, Timeout: time.Minute},
	}, &mcp.ClientSessionOptions{ProtocolVersion: harness.Modern})
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}
