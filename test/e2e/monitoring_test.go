package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// monitoredMetric finds metric names in the monitoring files the way
// deploy/validate's TestMonitoring checks is right: Switchboard's metrics
// are the only words of the form switchboard_... in them.
var monitoredMetric = regexp.MustCompile(`\bswitchboard_[a-z0-9_]+`)

// scrape reads the metric families a /metrics endpoint exposes: each
// family's name, and for histograms and summaries the series names they
// expose (_bucket, _sum, _count).
func scrape(t *testing.T, url string) map[string]bool {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: HTTP %d", url, resp.StatusCode)
	}
	out := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			out[f[2]] = true
			if f[3] == "histogram" || f[3] == "summary" {
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					out[f[2]+suffix] = true
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMonitoringNamesLiveMetrics: every metric the shipped alerting rules
// and Grafana dashboard (deploy/monitoring) name is one the services
// expose, in a live scrape of a cluster that has served the traffic each
// metric counts (calls, a refusal by a rate limit, pinning, the audit
// database).
func TestMonitoringNamesLiveMetrics(t *testing.T) {
	aggregatorToken := "aggregator-" + strings.Repeat("d4", 16)
	var gatewayURL, aggregatorURL, indexerURL string
	c := harness.Start(t, harness.Options{
		Backends: []harness.Backend{{Name: "shop", Spec: pinnedSpec}},
		Configure: func(cfg *config.Config) {
			cfg.ServiceAuth.Credentials = append(cfg.ServiceAuth.Credentials,
				config.ServiceCredential{Name: "aggregator", Token: aggregatorToken, AssertPrincipals: true, Allow: config.AggregatorMethods})
			cfg.Aggregator.HTTPListen, cfg.Indexer.HTTPListen = harness.FreeAddr(t), harness.FreeAddr(t)
			cfg.Aggregator.Pinning = config.Pinning{Mode: config.PinningPin, Indexer: config.Endpoint{Address: cfg.Indexer.Listen, Token: aggregatorToken}}
			cfg.Audit = config.Audit{Sink: config.AuditFile, File: t.TempDir() + "/audit.jsonl", Database: config.AuditDatabase{Enabled: true}}
			cfg.RateLimits = config.RateLimits{Limits: []config.RateLimit{{Name: "lookups", Per: "principal",
				Match: config.RateLimitMatch{Tools: []string{"shop_lookup"}}, Rate: "1/h", Burst: 1, Methods: []string{"tools/call"}}}}
			gatewayURL = "http://" + cfg.Gateway.Listen + "/metrics"
			aggregatorURL = "http://" + cfg.Aggregator.HTTPListen + "/metrics"
			indexerURL = "http://" + cfg.Indexer.HTTPListen + "/metrics"
		},
	})
	// Pinning lists a tool once its definition was checked with the
	// indexer (a fresh session each time: go-sdk caches a Modern list).
	testkit.Eventually(t, "shop_lookup is listed", 30*time.Second, func() error {
		if !slices.Contains(harness.ToolNames(t, harness.Connect(t, c.MCPURL, harness.Modern)), "shop_lookup") {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	cs := harness.Connect(t, c.MCPURL, harness.Modern)
	for i := range 2 { // the second is refused by the limit
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "shop_lookup", Arguments: map[string]any{"order": fmt.Sprint(i)}})
		if (err == nil && !res.IsError) != (i == 0) {
			t.Fatalf("call %d: %v %v", i, res, err)
		}
	}

	var files []string
	for _, name := range []string{"alerts.yaml", "grafana-dashboard.json"} {
		files = append(files, readRepoFile(t, "deploy/monitoring/"+name))
	}
	var named []string
	for _, f := range files {
		named = append(named, monitoredMetric.FindAllString(f, -1)...)
	}
	named = slices.Compact(slices.Sorted(slices.Values(named)))
	if len(named) < 10 {
		t.Fatalf("the monitoring names only %d metrics: %v", len(named), named)
	}
	// The pinning gauge and the rate limit's refusal appear once the
	// catalog was checked and the refusal counted: poll for them.
	testkit.Eventually(t, "every named metric is exposed", 30*time.Second, func() error {
		exposed := map[string]bool{}
		for _, url := range []string{gatewayURL, aggregatorURL, indexerURL} {
			for name := range scrape(t, url) {
				exposed[name] = true
			}
		}
		var missing []string
		for _, name := range named {
			if !exposed[name] {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("not exposed by any service: %v", missing)
		}
		return nil
	})
}
