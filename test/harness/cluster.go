package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/devstack"
	"github.com/switchboard-mcp/switchboard/services/pgcluster"
)

// AllMethods allows every RPC of the aggregator and the indexer: for test
// credentials that are not the services' own.
var AllMethods = []string{"switchboard.aggregator.v1.AggregatorService/*", "switchboard.indexer.v1.IndexerService/*",
	"switchboard.indexer.v1.ClusterStateService/*"}

// Backend is a demo backend of a cluster.
type Backend struct {
	Name string
	// Spec is a demo backend definition (YAML, see services/demobackend);
	// empty with Synthetic 0 serves the demo backend's default tools.
	Spec      string
	Synthetic int
	// Stateful serves Legacy sessions only.
	Stateful bool
}

// Options describes a cluster.
type Options struct {
	Backends []Backend
	// NoIndexer leaves out PostgreSQL and the indexer.
	NoIndexer bool
	// Configure adjusts the configuration before it is written, e.g. to
	// turn the optimizer on or add API keys.
	Configure func(*config.Config)
}

// Cluster is a running Switchboard: demo backends, aggregator, indexer
// (with its own PostgreSQL) and gateway, each a separate process.
type Cluster struct {
	// Config is the configuration as written to ConfigPath.
	Config     *config.Config
	ConfigPath string
	// MCPURL is the gateway's MCP endpoint.
	MCPURL string
	// Backends by name, and their MCP URLs.
	Backends    map[string]*Proc
	BackendURLs map[string]string
	Aggregator  *Proc
	Indexer     *Proc // nil with NoIndexer
	Gateway     *Proc
	PG          *pgcluster.Cluster // nil with NoIndexer
	// GatewayToken and IndexerToken are the service credentials (both may
	// assert principals, each allowed the RPCs its service calls:
	// config.GatewayMethods, config.IndexerMethods), for tests that call
	// the gRPC APIs directly. OperatorToken is an operator's credential,
	// allowed every RPC of both services (ListBackends, Stats, ...).
	GatewayToken, IndexerToken, OperatorToken string
}

// Start brings up a cluster and registers its teardown with t.Cleanup.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	dir := t.TempDir()
	c := &Cluster{
		Backends:      map[string]*Proc{},
		BackendURLs:   map[string]string{},
		GatewayToken:  randomToken(t),
		IndexerToken:  randomToken(t),
		OperatorToken: randomToken(t),
	}
	cfg := &config.Config{
		ServiceAuth: config.ServiceAuth{Credentials: []config.ServiceCredential{
			{Name: "gateway", Token: c.GatewayToken, AssertPrincipals: true, Allow: config.GatewayMethods},
			{Name: "indexer", Token: c.IndexerToken, AssertPrincipals: true, Allow: config.IndexerMethods},
			{Name: "operator", Token: c.OperatorToken, AssertPrincipals: true, Operator: true, Allow: AllMethods},
		}},
		Logging: config.Logging{Level: "debug", Format: "text"},
	}
	cfg.Aggregator.Listen = FreeAddr(t)
	cfg.Aggregator.ConflictResolution = config.ConflictResolution{Strategy: "prefix", PrefixFormat: "{backend}_"}
	cfg.Gateway.Listen = FreeAddr(t)
	cfg.Gateway.Auth.Mode = "anonymous"
	cfg.Gateway.Aggregator = config.Endpoint{Address: cfg.Aggregator.Listen, Token: c.GatewayToken}

	for _, b := range opts.Backends {
		url := c.startBackend(t, dir, b)
		cfg.Aggregator.Backends = append(cfg.Aggregator.Backends, config.Backend{Name: b.Name, URL: url})
	}
	if !opts.NoIndexer {
		c.PG = StartPostgres(t)
		cfg.Indexer.Listen = FreeAddr(t)
		cfg.Indexer.Database = CreateDatabase(t, c.PG)
		cfg.Indexer.Aggregator = config.Endpoint{Address: cfg.Aggregator.Listen, Token: c.IndexerToken}
		cfg.Gateway.Indexer = config.Endpoint{Address: cfg.Indexer.Listen, Token: c.GatewayToken}
	}
	if opts.Configure != nil {
		opts.Configure(cfg)
	}
	c.Config = cfg
	c.ConfigPath = WriteConfig(t, dir, cfg)

	args := []string{"--config", c.ConfigPath}
	tls := cfg.ServiceAuth.TLS
	c.Aggregator = StartProc(t, "aggregator", devstack.AggregatorBin, args, nil, devstack.GRPCServing(cfg.Aggregator.Listen, tls))
	if !opts.NoIndexer {
		c.Indexer = StartProc(t, "indexer", devstack.IndexerBin, args, nil, devstack.GRPCServing(cfg.Indexer.Listen, tls))
	}
	c.Gateway = StartProc(t, "gateway", devstack.GatewayBin, args, nil, devstack.HTTPOK("http://"+cfg.Gateway.Listen+"/readyz"))
	c.MCPURL = "http://" + cfg.Gateway.Listen + "/mcp"
	return c
}

// startBackend starts one demo backend and returns its MCP URL.
func (c *Cluster) startBackend(t testing.TB, dir string, b Backend) string {
	t.Helper()
	addr := FreeAddr(t)
	args := []string{"--listen", addr, "--name", b.Name}
	if b.Spec != "" {
		path := filepath.Join(dir, "backend-"+b.Name+".yaml")
		if err := os.WriteFile(path, []byte(b.Spec), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", path)
	}
	if b.Synthetic > 0 {
		args = append(args, "--synthetic", strconv.Itoa(b.Synthetic))
	}
	if b.Stateful {
		args = append(args, "--stateful")
	}
	c.Backends[b.Name] = StartProc(t, "backend:"+b.Name, devstack.DemoBackendBin, args, nil, devstack.HTTPOK("http://"+addr+"/healthz"))
	c.BackendURLs[b.Name] = "http://" + addr + "/mcp"
	return c.BackendURLs[b.Name]
}

// WriteConfig writes cfg as YAML into dir and returns the file's path.
func WriteConfig(t testing.TB, dir string, cfg *config.Config) string {
	t.Helper()
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "switchboard.yaml")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// StartPostgres starts a throwaway PostgreSQL cluster for the test. A
// machine without the PostgreSQL binaries fails the test.
func StartPostgres(t testing.TB) *pgcluster.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), ReadyTimeout)
	defer cancel()
	pg, err := pgcluster.Start(ctx, pgcluster.Options{Logf: t.Logf})
	if err != nil {
		t.Fatalf("PostgreSQL is required for this test: %v", err)
	}
	t.Cleanup(func() {
		if err := pg.Stop(); err != nil {
			t.Errorf("stop PostgreSQL: %v", err)
		}
	})
	return pg
}

// CreateDatabase creates a fresh database in pg and returns its URL.
func CreateDatabase(t testing.TB, pg *pgcluster.Cluster) string {
	t.Helper()
	name := "switchboard_" + randomToken(t)[:12]
	if err := pg.CreateDatabase(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	return pg.URL(name)
}

func randomToken(t testing.TB) string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
