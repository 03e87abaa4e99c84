// Package load drives a real Switchboard cluster (separate processes: demo
// backends, aggregator, indexer over a throwaway PostgreSQL, gateway, all on
// loopback) with go-sdk clients in both protocol eras, and runs every
// workload the same way directly against a demo backend, so each figure has
// a "through Switchboard / direct" ratio beside it. switchboard-load is its
// command; docs/load-results.md holds what it measured.
package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/devstack"
	"github.com/switchboard-mcp/switchboard/services/pgcluster"
	"github.com/switchboard-mcp/switchboard/test/ports"
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
	// Principals, when positive, runs the gateway in apiKeys mode with
	// that many keys, each its own principal (Cluster.Keys); zero runs it
	// anonymous.
	Principals int
	// Proxy starts the reference proxy (httputil.ReverseProxy, a process
	// of its own) in front of the direct backend: the floor of one hop.
	Proxy bool
	// Tasks lets one tool of the first backend run as a task, at the
	// virtual server of the tasks measurement (Cluster.TasksURL); /mcp
	// and its catalog are as without it. Off, the configuration carries no
	// tasks keys, so it also suits binaries that predate them.
	Tasks bool
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
	// Profiling serves the runtime profiles on every service's ops port
	// (ops.pprof, and gateway.opsListen for the gateway) in the clusters
	// started after it is set. Off, the generated configuration carries
	// neither key, so it also suits binaries that predate them.
	Profiling bool

	dir string
	pg  *pgcluster.Cluster
	// postgres is the PostgreSQL server the indexers use, whose CPU time
	// find_tool's figures include.
	postgres *PostgresServer
	// self is the harness's own executable, which runs the reference
	// proxy when started with ProxyCommand.
	self string
	mu   sync.Mutex
	n    int
}

// NewEnv starts PostgreSQL and makes the private directory.
func NewEnv(ctx context.Context, binDir string, logs io.Writer) (*Env, error) {
	for _, bin := range []string{devstack.GatewayBin, devstack.AggregatorBin, devstack.IndexerBin, devstack.DemoBackendBin} {
		if _, err := os.Stat(filepath.Join(binDir, bin)); err != nil {
			return nil, fmt.Errorf("%s not found in %s (run make build)", bin, binDir)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("the harness's own executable (it runs the reference proxy): %w", err)
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
	postgres, err := FindPostgresServer(selfPid)
	if err != nil {
		pg.Stop()
		os.RemoveAll(dir)
		return nil, err
	}
	return &Env{BinDir: binDir, Logs: &devstack.SyncWriter{W: logs}, dir: dir, pg: pg, postgres: postgres, self: self}, nil
}

// Close stops PostgreSQL and removes the private directory.
func (e *Env) Close() error {
	return errors.Join(e.pg.Stop(), os.RemoveAll(e.dir))
}

// Proc is one running service process of a cluster.
type Proc struct {
	// Name is "gateway", "aggregator", "indexer", "b00", ..., "direct" or
	// "proxy".
	Name string
	// Role groups processes in reports: gateway, aggregator, indexer,
	// backend, direct, proxy.
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
	// BackendURLs are the MCP endpoints of the backends behind Switchboard,
	// b00 first.
	BackendURLs []string
	// ProxyURL is the MCP endpoint through the reference proxy, in front
	// of the direct backend; empty unless the topology asks for it.
	ProxyURL string
	// TasksURL is the MCP endpoint of the virtual server whose one tool,
	// TaskTool, may run as a task; empty unless the topology asks for it.
	TasksURL string
	// Keys are the gateway's API keys, one per principal; empty when the
	// gateway runs anonymous.
	Keys []string
	// GatewayMetrics, AggregatorMetrics and IndexerMetrics are Prometheus
	// endpoints.
	GatewayMetrics    string
	AggregatorMetrics string
	IndexerMetrics    string
	// Ops are the base URLs of the services' ops ports by role (gateway,
	// aggregator, indexer); the gateway has one only when the Env is
	// profiling.
	Ops      map[string]string
	Postgres *PostgresServer
	Procs    []*Proc
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

// Ports of a cluster, by index into freePorts' answer; the backends
// follow.
const (
	portGateway = iota
	portGatewayOps
	portAggregator
	portAggregatorHTTP
	portIndexer
	portIndexerHTTP
	portDirect
	portProxy
	firstBackendPort
)

// Start starts a cluster of topology t: backends, aggregator, indexer (on a
// fresh database), gateway, and the direct backend and the reference proxy
// when t asks for them.
func (e *Env) Start(ctx context.Context, t Topology) (c *Cluster, err error) {
	e.mu.Lock()
	e.n++
	n := e.n
	e.mu.Unlock()
	profiling := e.Profiling

	chosen, err := ports.FreeN(firstBackendPort + t.Backends)
	if err != nil {
		return nil, err
	}
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(chosen[i]) }
	data := configData{
		Gateway: addr(portGateway), Aggregator: addr(portAggregator), AggregatorHTTP: addr(portAggregatorHTTP),
		Indexer: addr(portIndexer), IndexerHTTP: addr(portIndexerHTTP), Pprof: profiling,
	}
	if profiling {
		data.GatewayOps = addr(portGatewayOps)
	}
	for i := range t.Backends {
		data.Backends = append(data.Backends, backendAddr{Name: fmt.Sprintf("b%02d", i), Listen: addr(firstBackendPort + i)})
	}
	if data.Keys, err = newKeys(t.Principals); err != nil {
		return nil, err
	}
	if t.Tasks {
		data.Tasks, data.TasksServer, data.TaskBackend, data.TaskTool = true, tasksServer, data.Backends[0].Name, taskBackendTool
		data.AggregatorAllow, data.MaxTasks = aggregatorTaskMethods(), maxBenchTasks
	}
	db := fmt.Sprintf("load%d", n)
	if err := e.pg.CreateDatabase(ctx, db); err != nil {
		return nil, err
	}
	data.Database = e.pg.URL(db)
	env, err := secretEnv()
	if err != nil {
		return nil, err
	}
	cfg, err := renderConfig(data, env)
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(e.dir, fmt.Sprintf("cluster%d.yaml", n))
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		return nil, err
	}

	c = &Cluster{
		Topology:          t,
		GatewayURL:        "http://" + data.Gateway + "/mcp",
		OptimizedURL:      "http://" + data.Gateway + "/mcp/optimized",
		Keys:              data.Keys,
		GatewayMetrics:    "http://" + data.Gateway + "/metrics",
		AggregatorMetrics: "http://" + data.AggregatorHTTP + "/metrics",
		IndexerMetrics:    "http://" + data.IndexerHTTP + "/metrics",
		Ops:               map[string]string{"aggregator": "http://" + data.AggregatorHTTP, "indexer": "http://" + data.IndexerHTTP},
		Postgres:          e.postgres,
	}
	if data.GatewayOps != "" {
		c.Ops["gateway"] = "http://" + data.GatewayOps
	}
	if data.Tasks {
		c.TasksURL = c.GatewayURL + "/" + tasksServer
	}
	// Stop what started through started: a failed step's "return nil,
	// err" has already cleared c when this runs.
	started := c
	defer func() {
		if err != nil {
			started.Stop()
		}
	}()
	start := func(name, role, path string, args []string, probe devstack.Probe) error {
		p, err := devstack.StartProcess(devstack.ProcessSpec{
			Name: name, Path: path, Args: args, Env: env, Output: e.Logs,
		})
		if err != nil {
			return err
		}
		c.Procs = append(c.Procs, &Proc{Name: name, Role: role, p: p})
		readyCtx, cancel := context.WithTimeout(ctx, startTimeout)
		defer cancel()
		return devstack.WaitReady(readyCtx, p, probe)
	}
	bin := func(name string) string { return filepath.Join(e.BinDir, name) }
	backendArgs := func(name, listen string, tools int) []string {
		return []string{"--listen", listen, "--name", name, "--synthetic", strconv.Itoa(tools)}
	}
	directBase := "http://" + data.Backends[0].Listen
	if t.DirectTools > 0 {
		directBase = "http://" + addr(portDirect)
		if err := start("direct", "direct", bin(devstack.DemoBackendBin), backendArgs("direct", addr(portDirect), t.DirectTools),
			devstack.HTTPOK(directBase+"/healthz")); err != nil {
			return nil, err
		}
	}
	c.DirectURL = directBase + "/mcp"
	for _, b := range data.Backends {
		c.BackendURLs = append(c.BackendURLs, "http://"+b.Listen+"/mcp")
		if err := start(b.Name, "backend", bin(devstack.DemoBackendBin), backendArgs(b.Name, b.Listen, t.ToolsPerBackend),
			devstack.HTTPOK("http://"+b.Listen+"/healthz")); err != nil {
			return nil, err
		}
	}
	if t.Proxy {
		// Ready once a request passes through it to the backend.
		proxyBase := "http://" + addr(portProxy)
		if err := start("proxy", "proxy", e.self, []string{ProxyCommand, "--listen", addr(portProxy), "--target", directBase},
			devstack.HTTPOK(proxyBase+"/healthz")); err != nil {
			return nil, err
		}
		c.ProxyURL = proxyBase + "/mcp"
	}
	gatewayProbe := devstack.HTTPOK("http://" + data.Gateway + "/readyz")
	if data.GatewayOps != "" {
		// Both ports must answer before the cluster counts as started.
		mcpReady, opsReady := gatewayProbe, devstack.HTTPOK(c.Ops["gateway"]+"/readyz")
		gatewayProbe = func(ctx context.Context) error {
			if err := mcpReady(ctx); err != nil {
				return err
			}
			return opsReady(ctx)
		}
	}
	services := []struct {
		name, bin string
		probe     devstack.Probe
	}{
		{"aggregator", devstack.AggregatorBin, devstack.GRPCServing(data.Aggregator, config.TLS{})},
		{"indexer", devstack.IndexerBin, devstack.GRPCServing(data.Indexer, config.TLS{})},
		{"gateway", devstack.GatewayBin, gatewayProbe},
	}
	for _, s := range services {
		if err := start(s.name, s.name, bin(s.bin), []string{"--config", cfgPath}, s.probe); err != nil {
			return nil, err
		}
	}
	c.Started = time.Now()
	return c, nil
}
