package app

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// TestConsolePresentsOneTokenPerServer: the console presents
// gateway.console.aggregatorToken to the aggregator and indexerToken to
// the indexer (serviceToken to both when those are unset), and a reload
// replaces each.
func TestConsolePresentsOneTokenPerServer(t *testing.T) {
	cfg := &config.Config{}
	cfg.Gateway.Aggregator = config.Endpoint{Address: "127.0.0.1:1", Token: "gateway-to-aggregator"}
	cfg.Gateway.Indexer = config.Endpoint{Address: "127.0.0.1:2", Token: "gateway-to-indexer"}
	cfg.Gateway.OpsListen = "127.0.0.1:0"
	cfg.Gateway.Console = config.Console{Enabled: true, OperatorKeys: []string{"an-operator-key-of-some-length"},
		AggregatorToken: "console-to-aggregator", IndexerToken: "console-to-indexer"}
	oc, err := startConsole(cfg, rpc.ClientKeepalive(config.GRPC{}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(oc.close)
	sends := func(tok *svcauth.LiveToken) string {
		md, _ := tok.GetRequestMetadata(context.Background())
		return md["authorization"]
	}
	if got := sends(oc.token); got != "Bearer console-to-aggregator" {
		t.Errorf("to the aggregator: %q", got)
	}
	if got := sends(oc.indexerToken); got != "Bearer console-to-indexer" {
		t.Errorf("to the indexer: %q", got)
	}

	next := *cfg
	next.Gateway.Console.AggregatorToken, next.Gateway.Console.IndexerToken = "", ""
	next.Gateway.Console.ServiceToken = "console-shared"
	if err := oc.reload(&next); err != nil {
		t.Fatal(err)
	}
	if a, i := sends(oc.token), sends(oc.indexerToken); a != "Bearer console-shared" || i != "Bearer console-shared" {
		t.Errorf("after a reload to serviceToken: %q to the aggregator, %q to the indexer", a, i)
	}
}
