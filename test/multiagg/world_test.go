package multiagg

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/demobackend"
	"github.com/switchboard-mcp/switchboard/services/devstack"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// world is the shared part of a test's processes: demo backends and the
// service credentials every aggregator and indexer of the test accepts.
type world struct {
	t testing.TB
	// gatewayToken asserts principals for the gateway's RPCs,
	// indexerToken for the indexer's, aggregatorToken is the aggregators'
	// own credential (config.AggregatorMethods on a peer).
	gatewayToken, indexerToken, aggregatorToken string
	backends                                    map[string]*harness.Proc
	backendURLs                                 map[string]string
	// database is the indexer's PostgreSQL URL, once started.
	database string
}

func newWorld(t testing.TB) *world {
	return &world{t: t, gatewayToken: token(t), indexerToken: token(t), aggregatorToken: token(t),
		backends: map[string]*harness.Proc{}, backendURLs: map[string]string{}}
}

func token(t testing.TB) string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// backend starts a demo backend named name with extra flags.
func (w *world) backend(name string, flags ...string) {
	w.t.Helper()
	addr := harness.FreeAddr(w.t)
	args := append([]string{"--listen", addr, "--name", name}, flags...)
	w.backends[name] = harness.StartProc(w.t, "backend:"+name, devstack.DemoBackendBin, args, nil, devstack.HTTPOK("http://"+addr+"/healthz"))
	w.backendURLs[name] = "http://" + addr + "/mcp"
}

// config is a configuration with the world's credentials and an
// aggregator over backends (prefix naming).
func (w *world) config(backends ...string) *config.Config {
	cfg := &config.Config{
		ServiceAuth: config.ServiceAuth{Credentials: []config.ServiceCredential{
			{Name: "gateway", Token: w.gatewayToken, AssertPrincipals: true, Allow: config.GatewayMethods},
			{Name: "indexer", Token: w.indexerToken, AssertPrincipals: true, Allow: config.IndexerMethods},
		}},
		Logging: config.Logging{Level: "debug", Format: "text"},
	}
	cfg.Aggregator.Listen = harness.FreeAddr(w.t)
	cfg.Aggregator.ConflictResolution = config.ConflictResolution{Strategy: "prefix", PrefixFormat: "{backend}_"}
	// Backends that stop are seen within a second or so.
	cfg.Aggregator.Health = config.HealthCheck{Interval: config.Duration(200 * time.Millisecond), Timeout: config.Duration(time.Second), UnhealthyThreshold: 2}
	for _, b := range backends {
		cfg.Aggregator.Backends = append(cfg.Aggregator.Backends, config.Backend{Name: b, URL: w.backendURLs[b]})
	}
	return cfg
}

// aggregator is one aggregator process.
type aggregator struct {
	addr string
	proc *harness.Proc
	// asGateway calls it with the gateway's credential.
	asGateway aggregatorv1.AggregatorServiceClient
}

// startAggregator starts an aggregator with cfg (its aggregator section).
func (w *world) startAggregator(name string, cfg *config.Config) *aggregator {
	w.t.Helper()
	path := harness.WriteConfig(w.t, w.t.TempDir(), cfg)
	proc := harness.StartProc(w.t, name, devstack.AggregatorBin, []string{"--config", path}, nil, devstack.GRPCServing(cfg.Aggregator.Listen, cfg.ServiceAuth.TLS))
	return &aggregator{addr: cfg.Aggregator.Listen, proc: proc,
		asGateway: aggregatorv1.NewAggregatorServiceClient(dial(w.t, cfg.Aggregator.Listen, w.gatewayToken))}
}

// startIndexer starts an indexer that reads views from aggregatorAddr.
func (w *world) startIndexer(aggregatorAddr string) indexerv1.IndexerServiceClient {
	w.t.Helper()
	pg := harness.StartPostgres(w.t)
	cfg := w.config()
	cfg.Indexer.Listen = harness.FreeAddr(w.t)
	cfg.Indexer.Database = harness.CreateDatabase(w.t, pg)
	cfg.Indexer.Aggregator = config.Endpoint{Address: aggregatorAddr, Token: w.indexerToken}
	path := harness.WriteConfig(w.t, w.t.TempDir(), cfg)
	harness.StartProc(w.t, "indexer", devstack.IndexerBin, []string{"--config", path}, nil, devstack.GRPCServing(cfg.Indexer.Listen, cfg.ServiceAuth.TLS))
	w.database = cfg.Indexer.Database
	return indexerv1.NewIndexerServiceClient(dial(w.t, cfg.Indexer.Listen, w.gatewayToken))
}

func dial(t testing.TB, addr, token string) *grpc.ClientConn {
	t.Helper()
	conn, err := rpc.Dial(config.Endpoint{Address: addr, Token: token}, config.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// addTool adds a tool to a running demo backend; removeTool removes one.
func (w *world) addTool(backend string, tool demobackend.ToolSpec) {
	w.t.Helper()
	body, err := json.Marshal(tool)
	if err != nil {
		w.t.Fatal(err)
	}
	w.admin(backend, http.MethodPost, "/admin/tools", body, http.StatusCreated)
}

func (w *world) removeTool(backend, tool string) {
	w.t.Helper()
	w.admin(backend, http.MethodDelete, "/admin/tools/"+tool, nil, http.StatusNoContent)
}

func (w *world) admin(backend, method, path string, body []byte, want int) {
	w.t.Helper()
	url := strings.TrimSuffix(w.backendURLs[backend], demobackend.MCPPath) + path
	req, err := http.NewRequestWithContext(w.t.Context(), method, url, bytes.NewReader(body))
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		w.t.Fatalf("%s %s: %s %s", method, url, resp.Status, msg)
	}
}
