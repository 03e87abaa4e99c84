package lb

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/demobackend"
	"github.com/switchboard-mcp/switchboard/services/devstack"
	"github.com/switchboard-mcp/switchboard/services/rpc/dnstest"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

const (
	indexersName = "indexers.switchboard.test"
	search       = "/switchboard.indexer.v1.IndexerService/Search"
)

// answersHealth is a readiness probe that wants the gRPC health service
// to answer, SERVING or not: for an indexer that is up but cannot reach
// its database.
func answersHealth(address string) devstack.Probe {
	return func(ctx context.Context) error {
		_, err := devstack.GRPCHealth(ctx, address, config.TLS{})
		return err
	}
}

// TestGatewaySkipsIndexerNotServing: the gateway's indexer address is a
// dns:// name of two indexer processes (127.0.0.1 and 127.0.0.2, one
// port), and the indexers' aggregator address one of two aggregators. One
// indexer cannot reach its database, so it is up and NOT_SERVING: it gets
// none of the gateway's calls (find_tool's searches, the revocation
// watch), and every find_tool succeeds on the other. Given its database
// and restarted, it turns SERVING and gets its share.
func TestGatewaySkipsIndexerNotServing(t *testing.T) {
	dns, err := dnstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dns.Close() })
	loopbacks := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")}
	dns.Set(aggregatorsName, loopbacks...)
	dns.Set(indexersName, loopbacks...)
	pg := harness.StartPostgres(t)
	database := harness.CreateDatabase(t, pg)

	backendAddr := harness.FreeAddr(t)
	harness.StartProc(t, "backend:alpha", devstack.DemoBackendBin, []string{"--listen", backendAddr, "--name", "alpha"}, nil,
		devstack.HTTPOK("http://"+backendAddr+"/healthz"))

	const gatewayToken, indexerToken = "lb-gateway-token", "lb-indexer-token"
	aggPort, idxPort := freePortOnBoth(t), freePortOnBoth(t)
	base := config.Config{
		ServiceAuth: config.ServiceAuth{Credentials: []config.ServiceCredential{
			{Name: "gateway", Token: gatewayToken, AssertPrincipals: true, Allow: config.GatewayMethods},
			{Name: "indexer", Token: indexerToken, AssertPrincipals: true, Allow: config.IndexerMethods},
		}},
		Logging: config.Logging{Level: "debug", Format: "text"},
	}
	base.Aggregator.ConflictResolution = config.ConflictResolution{Strategy: "prefix", PrefixFormat: "{backend}_"}
	base.Aggregator.Backends = []config.Backend{{Name: "alpha", URL: "http://" + backendAddr + demobackend.MCPPath}}
	base.Indexer.Aggregator = config.Endpoint{Address: fmt.Sprintf("dns://%s/%s:%d", dns.Addr(), aggregatorsName, aggPort), Token: indexerToken}
	base.Gateway.Listen = harness.FreeAddr(t)
	base.Gateway.Auth.Mode = "anonymous"
	base.Gateway.Aggregator = config.Endpoint{Address: fmt.Sprintf("dns://%s/%s:%d", dns.Addr(), aggregatorsName, aggPort), Token: gatewayToken}
	base.Gateway.Indexer = config.Endpoint{Address: fmt.Sprintf("dns://%s/%s:%d", dns.Addr(), indexersName, idxPort), Token: gatewayToken}

	for i, host := range []string{"127.0.0.1", "127.0.0.2"} {
		cfg := base
		cfg.Aggregator.Listen = fmt.Sprintf("%s:%d", host, aggPort)
		path := harness.WriteConfig(t, t.TempDir(), &cfg)
		harness.StartProc(t, fmt.Sprintf("aggregator-%d", i+1), devstack.AggregatorBin, []string{"--config", path}, nil,
			devstack.GRPCServing(cfg.Aggregator.Listen, config.TLS{}))
	}
	// The indexers: the first with its database; the second with the
	// address of a port nothing listens on, until it is fixed below.
	type indexer struct {
		proc    *harness.Proc
		metrics string
		cfg     config.Config
		dir     string
	}
	var idx []*indexer
	for i, host := range []string{"127.0.0.1", "127.0.0.2"} {
		x := &indexer{cfg: base, dir: t.TempDir()}
		x.cfg.Indexer.Listen = fmt.Sprintf("%s:%d", host, idxPort)
		x.cfg.Indexer.HTTPListen = harness.FreeAddr(t)
		x.cfg.Indexer.Database = database
		if i == 1 {
			x.cfg.Indexer.Database = "postgres://switchboard@" + harness.FreeAddr(t) + "/nowhere?connect_timeout=2"
		}
		path := harness.WriteConfig(t, x.dir, &x.cfg)
		x.proc = harness.StartProc(t, fmt.Sprintf("indexer-%d", i+1), devstack.IndexerBin, []string{"--config", path}, nil,
			answersHealth(x.cfg.Indexer.Listen))
		x.metrics = "http://" + x.cfg.Indexer.HTTPListen + "/metrics"
		idx = append(idx, x)
	}
	health := func(x *indexer) healthpb.HealthCheckResponse_ServingStatus {
		st, err := devstack.GRPCHealth(t.Context(), x.cfg.Indexer.Listen, config.TLS{})
		if err != nil {
			t.Fatalf("%s health: %v", x.proc.Name, err)
		}
		return st
	}
	testkit.Eventually(t, "the first indexer is SERVING", 60*time.Second, func() error {
		if st := health(idx[0]); st != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("health %s", st)
		}
		return nil
	})
	if st := health(idx[1]); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("the indexer without a database reports %s, want NOT_SERVING", st)
	}

	path := harness.WriteConfig(t, t.TempDir(), &base)
	harness.StartProc(t, "gateway", devstack.GatewayBin, []string{"--config", path}, nil,
		devstack.HTTPOK("http://"+base.Gateway.Listen+"/readyz"))
	optimized := harness.Connect(t, "http://"+base.Gateway.Listen+"/mcp/optimized", harness.Modern)

	fromGateway := func(x *indexer, method string) int {
		return (&aggregator{name: x.proc.Name, metricsURL: x.metrics}).handledAny(t, method, "gateway")
	}
	testkit.Eventually(t, "find_tool finds alpha_echo", 60*time.Second, func() error { return findsEcho(t, optimized, "echo the arguments back") })
	for i := range 20 {
		if err := findsEcho(t, optimized, fmt.Sprintf("echo the arguments back, attempt %d", i)); err != nil {
			t.Fatalf("find_tool %d with one indexer NOT_SERVING: %v", i, err)
		}
	}
	t.Logf("21 find_tool with the second indexer NOT_SERVING: searches handled by the first %d, calls of any kind by the second %d",
		fromGateway(idx[0], search), fromGateway(idx[1], ""))
	if n := fromGateway(idx[0], search); n == 0 {
		t.Error("the SERVING indexer handled no search")
	}
	if n := fromGateway(idx[1], ""); n != 0 {
		t.Errorf("the NOT_SERVING indexer handled %d calls of the gateway; want none", n)
	}

	// Given its database and restarted, the second indexer turns SERVING
	// and gets searches too, with no restart of the gateway.
	idx[1].proc.Stop()
	idx[1].cfg.Indexer.Database = database
	if got := harness.WriteConfig(t, idx[1].dir, &idx[1].cfg); filepath.Dir(got) != idx[1].dir {
		t.Fatalf("config written to %s", got)
	}
	idx[1].proc.Restart()
	testkit.Eventually(t, "the second indexer is SERVING", 60*time.Second, func() error {
		if st := health(idx[1]); st != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("health %s", st)
		}
		return nil
	})
	testkit.Eventually(t, "the second indexer handles searches", 60*time.Second, func() error {
		for i := range 10 {
			if err := findsEcho(t, optimized, fmt.Sprintf("echo back what I send, try %d at %d", i, time.Now().UnixNano())); err != nil {
				return err
			}
		}
		if n := fromGateway(idx[1], search); n == 0 {
			return fmt.Errorf("no search yet (first indexer: %d)", fromGateway(idx[0], search))
		}
		return nil
	})
}

// findsEcho calls find_tool with query and wants alpha_echo among the
// hits.
func findsEcho(t *testing.T, cs *mcp.ClientSession, query string) error {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "find_tool", Arguments: map[string]any{"tool_description": query}})
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("isError: %v", res.Content)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(raw), `"alpha_echo"`) {
		return fmt.Errorf("alpha_echo not found: %s", raw)
	}
	return nil
}
