// Package load drives a real Switchboard cluster (separate processes: demo
// backends, aggregator, indexer over a throwaway PostgreSQL, gateway, all on
// loopback) with go-sdk clients in both protocol eras, and runs every
// workload the same way directly against a demo backend, so each figure has
// a "through Switchboard / direct" ratio beside it. switchboard-load is its
// command; docs/load-results.md holds what it measured.
package load

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/devstack"
	"github.com/switchboard-mcp/switchboard/services/pgcluster"
)

// startTimeout bounds how long any one process may take to become ready.
const startTimeout = 90 * time.Second

// stopGrace is how long a process gets to exit after SIGTERM.
const stopGrace = 10 * time.Second

// Topology is what one cluster serves.
type Topology struct {
	// Backends demo backends with ToolsPerBackend synthetic echo tools each
	// sit behind the aggregator, named b00, b01, ...
	Backends        int
	ToolsPerBackend int
	// DirectTools, when positive, starts one more demo backend outside
	// Switchboard with that many tools, the "direct" side of a comparison.
	// Zero makes the first backend behind Switchboard the direct target.
	DirectTools int
}

// Tools is the number of tools the gateway lists.
func (t Topology) Tools() int { return t.Backends * t.ToolsPerBackend }

// Env is what every cluster of one run shares: the binaries, one
// PostgreSQL server (a fresh database per cluster) and a private directory
// for configurations and logs.
type Env struct {
	BinDir string
	// Logs receives every child's output, prefixed with its name.
	Logs io.Writer

	dir string
	pg  *pgcluster.Cluster
	mu  sync.Mutex
	n   int
}

// NewEnv starts PostgreSQL and makes the private directory.
func NewEnv(ctx context.Context, binDir string, logs io.Writer) (*Env, error) {
	for _, bin := range []string{devstack.GatewayBin, devstack.AggregatorBin, devstack.IndexerBin, devstack.DemoBackendBin} {
		if _, err := os.Stat(filepath.Join(binDir, bin)); err != nil {
			return nil, fmt.Errorf("%s not found in %s (run make build)", bin, binDir)
		}
	}
	dir, err := os.MkdirTemp("", "switchboard-load-")
	if err != nil {
		return nil, err
	}
	// The postmaster lives as long as the Env, not the start-up context.
	pg, err := pgcluster.Start(context.WithoutCancel(ctx), pgcluster.Options{})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &Env{BinDir: binDir, Logs: &devstack.SyncWriter{W: logs}, dir: dir, pg: pg}, nil
}

// Close stops PostgreSQL and removes the private directory.
func (e *Env) Close() error {
	return errors.Join(e.pg.Stop(), os.RemoveAll(e.dir))
}

// Proc is one running service process of a cluster.
type Proc struct {
	// Name is "gateway", "aggregator", "indexer", "b00", ... or "direct".
	Name string
	// Role groups processes in reports: gateway, aggregator, indexer,
	// backend, direct.
	Role string
	p    *devstack.Process
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.p.Pid() }

// Cluster is one running Switchboard and its backends.
type Cluster struct {
	Topology Topology
	// GatewayURL is the MCP endpoint (raw view); OptimizedURL serves
	// find_tool and call_tool.
	GatewayURL   string
	OptimizedURL string
	// DirectURL is the MCP endpoint of the direct backend: its own when
	// the topology asks for one, else the first backend's behind
	// Switchboard.
	DirectURL string
	// GatewayMetrics, AggregatorMetrics and IndexerMetrics are Prometheus
	// endpoints.
	GatewayMetrics    string
	AggregatorMetrics string
	IndexerMetrics    string
	Procs             []*Proc
	// Started is when the gateway became ready.
	Started time.Time
}

// Services are the processes of the cluster with role r.
func (c *Cluster) Services(role string) []*Proc {
	var out []*Proc
	for _, p := range c.Procs {
		if p.Role == role {
			out = append(out, p)
		}
	}
	return out
}

// Stop stops every process in reverse order of start.
func (c *Cluster) Stop() error {
	var errs []error
	for _, p := range slices.Backward(c.Procs) {
		if err := p.p.Stop(stopGrace); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Exited names a process of the cluster that is no longer running, or "".
func (c *Cluster) Exited() string {
	for _, p := range c.Procs {
		select {
		case <-p.p.Done():
			return fmt.Sprintf("%s (%v)", p.Name, p.p.Err())
		default:
		}
	}
	return ""
}

// configTemplate is the deployment's one configuration file. Tokens stay
// ${VAR} references, filled from the children's environment.
var configTemplate = template.Must(template.New("config").Parse(`serviceAuth:
  credentials:
    - name: gateway
      token: ${SWITCHBOARD_GATEWAY_TOKEN}
      assertPrincipals: true
    - name: indexer
      token: ${SWITCHBOARD_INDEXER_TOKEN}
      assertPrincipals: true
logging:
  level: warn
  format: text
gateway:
  listen: {{.Gateway}}
  auth:
    mode: anonymous
  sessions:
    key: ${SWITCHBOARD_SESSION_KEY}
  aggregator:
    address: {{.Aggregator}}
    token: ${SWITCHBOARD_GATEWAY_TOKEN}
  indexer:
    address: {{.Indexer}}
    token: ${SWITCHBOARD_GATEWAY_TOKEN}
aggregator:
  listen: {{.Aggregator}}
  httpListen: {{.AggregatorHTTP}}
  conflictResolution:
    strategy: prefix
    prefixFormat: "{backend}_"
  backends:
{{- range .Backends}}
    - name: {{.Name}}
      url: http://{{.Listen}}/mcp
{{- end}}
indexer:
  listen: {{.Indexer}}
  httpListen: {{.IndexerHTTP}}
  database: "{{.Database}}"
  aggregator:
    address: {{.Aggregator}}
    token: ${SWITCHBOARD_INDEXER_TOKEN}
`))

type backendAddr struct{ Name, Listen string }

// Start starts a cluster of topology t: backends, aggregator, indexer (on a
// fresh database), gateway, and the direct backend when t asks for one.
func (e *Env) Start(ctx context.Context, t Topology) (c *Cluster, err error) {
	e.mu.Lock()
	e.n++
	n := e.n
	e.mu.Unlock()

	// Ports: gateway, aggregator gRPC and HTTP, indexer gRPC and HTTP,
	// direct backend, then the backends.
	const firstBackendPort = 6
	ports, err := freePorts(firstBackendPort + t.Backends)
	if err != nil {
		return nil, err
	}
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	data := struct {
		Gateway, Aggregator, AggregatorHTTP, Indexer, IndexerHTTP, Database string
		Backends                                                            []backendAddr
	}{Gateway: addr(0), Aggregator: addr(1), AggregatorHTTP: addr(2), Indexer: addr(3), IndexerHTTP: addr(4)}
	directListen := addr(5)
	for i := range t.Backends {
		data.Backends = append(data.Backends, backendAddr{Name: fmt.Sprintf("b%02d", i), Listen: addr(firstBackendPort + i)})
	}
	db := fmt.Sprintf("load%d", n)
	if err := e.pg.CreateDatabase(ctx, db); err != nil {
		return nil, err
	}
	data.Database = e.pg.URL(db)
	var cfg bytes.Buffer
	if err := configTemplate.Execute(&cfg, data); err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(e.dir, fmt.Sprintf("cluster%d.yaml", n))
	if err := os.WriteFile(cfgPath, cfg.Bytes(), 0o600); err != nil {
		return nil, err
	}
	env, err := secretEnv()
	if err != nil {
		return nil, err
	}
	// The configuration must parse the way the services will parse it.
	if _, err := config.Parse(cfg.Bytes(), func(k string) (string, bool) { return lookupEnv(env, k) }); err != nil {
		return nil, fmt.Errorf("generated configuration: %w", err)
	}

	c = &Cluster{
		Topology:          t,
		GatewayURL:        "http://" + data.Gateway + "/mcp",
		OptimizedURL:      "http://" + data.Gateway + "/mcp/optimized",
		GatewayMetrics:    "http://" + data.Gateway + "/metrics",
		AggregatorMetrics: "http://" + data.AggregatorHTTP + "/metrics",
		IndexerMetrics:    "http://" + data.IndexerHTTP + "/metrics",
	}
	defer func() {
		if err != nil {
			c.Stop()
			c = nil
		}
	}()
	start := func(name, role, bin string, args []string, probe devstack.Probe) error {
		p, err := devstack.StartProcess(devstack.ProcessSpec{
			Name: name, Path: filepath.Join(e.BinDir, bin), Args: args, Env: env, Output: e.Logs,
		})
		if err != nil {
			return err
		}
		c.Procs = append(c.Procs, &Proc{Name: name, Role: role, p: p})
		readyCtx, cancel := context.WithTimeout(ctx, startTimeout)
		defer cancel()
		return devstack.WaitReady(readyCtx, p, probe)
	}
	backendArgs := func(name, listen string, tools int) []string {
		return []string{"--listen", listen, "--name", name, "--synthetic", strconv.Itoa(tools)}
	}
	if t.DirectTools > 0 {
		c.DirectURL = "http://" + directListen + "/mcp"
		if err := start("direct", "direct", devstack.DemoBackendBin, backendArgs("direct", directListen, t.DirectTools),
			devstack.HTTPOK("http://"+directListen+"/healthz")); err != nil {
			return nil, err
		}
	} else {
		c.DirectURL = "http://" + data.Backends[0].Listen + "/mcp"
	}
	for _, b := range data.Backends {
		if err := start(b.Name, "backend", devstack.DemoBackendBin, backendArgs(b.Name, b.Listen, t.ToolsPerBackend),
			devstack.HTTPOK("http://"+b.Listen+"/healthz")); err != nil {
			return nil, err
		}
	}
	services := []struct {
		name, bin string
		probe     devstack.Probe
	}{
		{"aggregator", devstack.AggregatorBin, devstack.GRPCServing(data.Aggregator, config.TLS{})},
		{"indexer", devstack.IndexerBin, devstack.GRPCServing(data.Indexer, config.TLS{})},
		{"gateway", devstack.GatewayBin, devstack.HTTPOK("http://" + data.Gateway + "/readyz")},
	}
	for _, s := range services {
		if err := start(s.name, s.name, s.bin, []string{"--config", cfgPath}, s.probe); err != nil {
			return nil, err
		}
	}
	c.Started = time.Now()
	return c, nil
}

// secretEnv makes fresh random service tokens and a session sealing key for
// one cluster; they reach the children through their environment only.
func secretEnv() ([]string, error) {
	var env []string
	for _, name := range []string{"SWITCHBOARD_GATEWAY_TOKEN", "SWITCHBOARD_INDEXER_TOKEN", "SWITCHBOARD_SESSION_KEY"} {
		secret := make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, err
		}
		env = append(env, name+"="+base64.StdEncoding.EncodeToString(secret))
	}
	return env, nil
}

func lookupEnv(env []string, key string) (string, bool) {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// freePorts reserves n distinct loopback ports by listening on port 0, then
// releases them for the children to bind. Holding all listeners until every
// port is known keeps the n ports distinct.
func freePorts(n int) ([]int, error) {
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
