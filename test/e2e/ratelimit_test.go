package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// rawCall is one Modern tools/call of alpha_echo as the holder of key,
// with the answer's status, Retry-After and JSON-RPC error code.
func rawCall(t *testing.T, url, key string) (status int, retryAfter string, code int) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"alpha_echo","arguments":{"n":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"e2e","version":"0"}}}}`
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "alpha_echo", "Authorization": "Bearer " + key} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var msg struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") == "application/json" {
		_ = json.Unmarshal(raw, &msg)
	}
	if msg.Error != nil {
		code = msg.Error.Code
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), code
}

// TestRateLimitsLive: rate limits written into the configuration file of
// running processes take effect without a restart (and without a
// "needs a restart" warning); with the indexer down, a request whose
// tokens cannot be taken is admitted (onUnavailable: open) and counted.
func TestRateLimitsLive(t *testing.T) {
	aggregatorToken := "aggregator-e2e-token-0123456789"
	var aggOps string
	c := harness.Start(t, harness.Options{Backends: []harness.Backend{{Name: "alpha"}}, Configure: func(cfg *config.Config) {
		cfg.Reload.Interval = config.Duration(200 * time.Millisecond)
		aggOps = harness.FreeAddr(t)
		cfg.Aggregator.HTTPListen = aggOps
		cfg.ServiceAuth.Credentials = append(cfg.ServiceAuth.Credentials,
			config.ServiceCredential{Name: "aggregator", Token: aggregatorToken, AssertPrincipals: true, Allow: config.AggregatorMethods})
		cfg.Aggregator.Indexer = config.Endpoint{Address: cfg.Indexer.Listen, Token: aggregatorToken}
		cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: aliceKey, Subject: "alice"}, {Key: bobKey, Subject: "bob"}}}
	}})
	for i := range 5 {
		testkit.Eventually(t, "alpha_echo is served", 30*time.Second, func() error {
			if status, _, _ := rawCall(t, c.MCPURL, aliceKey); status != http.StatusOK {
				return fmt.Errorf("call %d: %d", i, status)
			}
			return nil
		})
	}

	file := *c.Config
	file.RateLimits = config.RateLimits{Limits: []config.RateLimit{{Name: "live", Per: config.RatePerPrincipal, Rate: "1/h", Burst: 2}}}
	raw, err := yaml.Marshal(&file)
	if err != nil {
		t.Fatal(err)
	}
	writeAtomically(t, c.ConfigPath, raw)
	testkit.Eventually(t, "the aggregator reloads", 10*time.Second, func() error {
		if got := metric(t, aggOps, `switchboard_config_reloads_total{result="ok"}`); got != "1" {
			return fmt.Errorf("ok reloads %q", got)
		}
		return nil
	})
	var statuses []int
	for range 3 {
		status, retryAfter, code := rawCall(t, c.MCPURL, aliceKey)
		statuses = append(statuses, status)
		if status == http.StatusTooManyRequests {
			if n, err := strconv.Atoi(retryAfter); err != nil || n < 1 || code != 429 {
				t.Fatalf("refusal: Retry-After %q, code %d", retryAfter, code)
			}
		}
	}
	if fmt.Sprint(statuses) != "[200 200 429]" {
		t.Fatalf("after the reload: %v, want the burst of 2 then 429", statuses)
	}
	if log := c.Aggregator.Log(1 << 20); strings.Contains(log, "needs a restart") {
		t.Fatalf("the aggregator wants a restart for rateLimits:\n%s", log)
	}

	// The indexer goes: bob, whose bucket this aggregator never asked
	// for, is admitted (fail open), and the metric says so.
	c.Indexer.Stop()
	if status, _, _ := rawCall(t, c.MCPURL, bobKey); status != http.StatusOK {
		t.Fatalf("bob with the indexer down: %d, want admitted (onUnavailable: open)", status)
	}
	if got := metric(t, aggOps, `switchboard_aggregator_ratelimit_unavailable_total{decision="open"}`); got != "1" {
		t.Fatalf("unavailable_total{open} = %q, want 1", got)
	}
	// alice's bucket is known empty for the hour: still refused.
	if status, _, _ := rawCall(t, c.MCPURL, aliceKey); status != http.StatusTooManyRequests {
		t.Fatalf("alice with the indexer down: %d, want 429 (her bucket is known empty)", status)
	}
}
