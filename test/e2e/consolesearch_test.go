package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/config"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

const (
	lookKey        = "look-operator-" + "8d9e8d9e8d9e"
	lookConsoleTok = "look-console-" + "2a3b2a3b2a3b2a3b"
	// lookAggregatorTok: the aggregator ships its events to the indexer.
	lookAggregatorTok = "look-aggregator-" + "6e7f6e7f6e7f6e7f"
	lookPrincipalAK   = "erin-key-" + "4c5d4c5d4c5d4c5d"
	lookBurst         = 2
)

// bearer is an MCP client's HTTP with its API key.
type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// TestConsoleSearchAuditedAndNotRateLimited: through the real processes,
// the console's search playground run as erin more times than her
// find_tool burst leaves her burst whole (her own find_tool calls then
// get exactly the burst, and the next is 429), and the trail records the
// console's searches with caller "console", hers without.
func TestConsoleSearchAuditedAndNotRateLimited(t *testing.T) {
	c := harness.Start(t, harness.Options{
		Backends: []harness.Backend{{Name: "shop", Spec: pinnedSpec}},
		Configure: func(cfg *config.Config) {
			cfg.ServiceAuth.Credentials = append(cfg.ServiceAuth.Credentials,
				config.ServiceCredential{Name: "aggregator", Token: lookAggregatorTok, AssertPrincipals: true, Allow: config.AggregatorMethods},
				config.ServiceCredential{Name: "console", Token: lookConsoleTok, Operator: true, AssertPrincipals: true, Allow: config.ConsoleMethods})
			cfg.Aggregator.Pinning.Indexer = config.Endpoint{Address: cfg.Indexer.Listen, Token: lookAggregatorTok}
			cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: lookPrincipalAK, Subject: "erin"}}}
			cfg.Audit = config.Audit{Database: config.AuditDatabase{Enabled: true}}
			cfg.RateLimits = config.RateLimits{Limits: []config.RateLimit{{Name: "searches", Per: "principal", Rate: "1/h",
				Burst: lookBurst, Methods: []string{config.RateMethodFindTool}}}}
			cfg.Gateway.OpsListen = harness.FreeAddr(t)
			cfg.Gateway.Console = config.Console{Enabled: true, OperatorKeys: []string{lookKey}, ServiceToken: lookConsoleTok}
		},
	})
	b := newConsoleBrowser(t, "http://"+c.Config.Gateway.OpsListen)
	if code, loc := b.login(lookKey); code != http.StatusSeeOther {
		t.Fatalf("the operator key: %d to %q", code, loc)
	}

	// The console searches as erin until the index has the tools, then
	// more than her burst.
	const search = "/console/search?q=look+up+an+order&subject=erin"
	testkit.Eventually(t, "the search playground finds shop_lookup for erin", 60*time.Second, func() error {
		if !strings.Contains(b.page(search), `data-tool="shop_lookup"`) {
			return fmt.Errorf("no shop_lookup hit")
		}
		return nil
	})
	for i := range lookBurst + 1 {
		if body := b.page(search); !strings.Contains(body, `data-tool="shop_lookup"`) {
			t.Fatalf("console search %d as erin:\n%s", i, body)
		}
	}

	// Erin's own find_tool: her whole burst, then 429.
	client := mcp.NewClient(&mcp.Implementation{Name: "switchboard-look-test", Version: "0"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: strings.TrimSuffix(c.MCPURL, "/mcp") + "/mcp/optimized",
		MaxRetries: -1, HTTPClient: &http.Client{Transport: bearer(lookPrincipalAK)}}, &mcp.ClientSessionOptions{ProtocolVersion: harness.Modern})
	if err != nil {
		t.Fatal(err)
	}
	for i := range lookBurst {
		if hits := findTool(t, cs, "look up an order"); len(hits) == 0 {
			t.Fatalf("erin's find_tool %d found nothing", i)
		}
	}
	_, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "find_tool", Arguments: map[string]any{"tool_description": "look up an order"}})
	if err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
		t.Fatalf("erin's find_tool past her burst: %v; want 429 Too Many Requests", err)
	}

	// The trail: the console's searches name it; erin's do not.
	op := indexerClient(t, c.Config.Indexer.Listen, c.OperatorToken)
	testkit.Eventually(t, "erin's find_tool events in the trail", 30*time.Second, func() error {
		resp, err := op.QueryAuditEvents(t.Context(), &indexerv1.QueryAuditEventsRequest{Subject: "erin", Kind: "find_tool"})
		if err != nil {
			return err
		}
		byCaller := map[string]int{}
		for _, e := range resp.GetEvents() {
			byCaller[e.GetCaller()+" "+e.GetOutcome()]++
		}
		if byCaller["console ok"] < lookBurst+2 || byCaller[" ok"] != lookBurst || byCaller[" rate_limited"] != 1 ||
			len(byCaller) != 3 {
			return fmt.Errorf("erin's find_tool events by caller and outcome: %v", byCaller)
		}
		return nil
	})
}
