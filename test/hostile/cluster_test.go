package hostile

import (
	"testing"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// startHarness starts a cluster with the test harness instead of
// switchboard-dev, for cases that need settings of their own or a process
// to look at (the gateway's pid): alice and bob authenticate with their
// keys as in the table's stack, without the notes backend, the policy or
// (unless withIndexer) the indexer.
func startHarness(t *testing.T, withIndexer bool, configure func(*config.Config), backends ...harness.Backend) (*harness.Cluster, *client) {
	t.Helper()
	if len(backends) == 0 {
		backends = []harness.Backend{{Name: "weather", Spec: weatherBackend}}
	}
	c := harness.Start(t, harness.Options{Backends: backends, NoIndexer: !withIndexer, Configure: func(cfg *config.Config) {
		cfg.Logging.Level = "info"
		cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{
			{Key: aliceKey, Subject: "alice", Groups: []string{"users"}},
			{Key: bobKey, Subject: "bob", Groups: []string{"admins"}},
		}}
		if configure != nil {
			configure(cfg)
		}
	}})
	base := "http://" + c.Config.Gateway.Listen
	return c, newClient(&stack{url: base + "/mcp", base: base})
}
