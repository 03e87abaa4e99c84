package replicas

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/devstack"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// replicas is how many processes of each service the cluster runs.
const replicas = 2

// balancedTargets is the switch for client-side load balancing (issue 14,
// item 3). When true, gateways and indexers get gRPC targets that name
// every replica, dns://<the test's DNS server>/aggregators.switchboard.test:P
// (and indexers.switchboard.test:Q), resolving to 127.0.0.1 and 127.0.0.2,
// where the replicas listen on the same port: what a headless Service is
// in Kubernetes. gRPC's dns resolver accepts such a target today; with the
// default pick_first policy a client then uses the first address that
// answers and moves to the other when it dies, and with client-side
// balancing it spreads its calls over both. When false, every client gets
// replica 1's address only (and loses its service when replica 1 dies).
const balancedTargets = true

// Names the test's DNS server resolves to every replica of a service.
const (
	aggregatorsName = "aggregators.switchboard.test"
	indexersName    = "indexers.switchboard.test"
)

// replicaIPs are the loopback addresses of replicas 1 and 2 of the gRPC
// services: one port, one address per replica, as pods behind a headless
// Service.
var replicaIPs = []string{"127.0.0.1", "127.0.0.2"}

// backendTimeout is each backend's request timeout; a failed call must come
// back long before it.
const backendTimeout = 20 * time.Second

// pageSize makes every tools/list answer hold three tools, so a listing
// takes several requests, each with the cursor of the last.
const pageSize = 3

// modernSpec is a demo backend serving both eras; legacySpec one that
// serves Legacy sessions only (the aggregator holds its elicitations).
const modernSpec = `
tools:
  - {name: echo, description: Echo the arguments back., behaviour: echo}
  - {name: add, description: Add two numbers a and b., behaviour: add}
  - {name: sleep, description: Wait for a duration., behaviour: sleep}
  - {name: chatty, description: Log one message at each of three levels., behaviour: log}
  - {name: ask, description: Ask the user before acting., behaviour: ask, text: "Proceed?"}
resources:
  - {uri: "alpha://readme", name: readme, mimeType: text/plain, text: "readme of {backend}"}
prompts:
  - name: greet
    text: "Greet {who} from {backend}"
    arguments: [{name: who, required: true, values: [alice, albert, bob]}]
`

const legacySpec = `
tools:
  - {name: echo, description: Echo the arguments back., behaviour: echo}
  - {name: ask, description: Ask the user before acting., behaviour: ask, text: "Proceed?"}
  - {name: chatty, description: Log one message at each of three levels., behaviour: log}
`

// cluster is two replicas of every service over one PostgreSQL, demo
// backends, and HAProxy in front of the gateways.
type cluster struct {
	// MCPURL and OptimizedURL are the load balancer's MCP endpoints.
	MCPURL, OptimizedURL string
	Aggregators          []*harness.Proc
	Indexers             []*harness.Proc
	Gateways             []*harness.Proc
	Backends             map[string]*harness.Proc
	LB                   *harness.Proc
	// backendURLs are the demo backends' MCP URLs, for their /admin API.
	backendURLs map[string]string
	// configs[i] is replica i's configuration (every service reads its own
	// section of it).
	configs []*config.Config
}

// procs returns every Switchboard process and backend.
func (c *cluster) procs() []*harness.Proc {
	all := append(append(append([]*harness.Proc{}, c.Aggregators...), c.Indexers...), c.Gateways...)
	for _, b := range c.Backends {
		all = append(all, b)
	}
	return append(all, c.LB)
}

// startCluster starts the demo backends, PostgreSQL, two aggregators, two
// indexers, two gateways and the load balancer, each once the ones it
// talks to are ready, and stops them all when the test ends. edits
// change the configuration every replica shares before it is written.
func startCluster(t *testing.T, edits ...func(*config.Config)) *cluster {
	t.Helper()
	return startClusterOf(t, defaultBackends, edits...)
}

// demoBackend is one demo backend of the cluster.
type demoBackend struct {
	name, spec string
	stateful   bool
}

// defaultBackends are the cluster's backends unless a test names others.
var defaultBackends = []demoBackend{{"alpha", modernSpec, false}, {"legacy", legacySpec, true}}

// startClusterOf is startCluster with the given demo backends.
func startClusterOf(t *testing.T, demo []demoBackend, edits ...func(*config.Config)) *cluster {
	t.Helper()
	c := &cluster{Backends: map[string]*harness.Proc{}, backendURLs: map[string]string{}}
	dir := t.TempDir()
	var backends []config.Backend
	for _, b := range demo {
		backends = append(backends, config.Backend{Name: b.name, URL: c.startBackend(t, dir, b.name, b.spec, b.stateful)})
	}
	pg := harness.StartPostgres(t)
	c.configs = replicaConfigs(t, backends, harness.CreateDatabase(t, pg), startReplicaDNS(t), edits...)
	var paths []string
	for _, cfg := range c.configs {
		paths = append(paths, harness.WriteConfig(t, t.TempDir(), cfg))
	}
	start := func(service, bin string, i int, probe devstack.Probe) *harness.Proc {
		return harness.StartProc(t, fmt.Sprintf("%s-%d", service, i+1), bin, []string{"--config", paths[i]}, nil, probe)
	}
	for i, cfg := range c.configs {
		c.Aggregators = append(c.Aggregators, start("aggregator", devstack.AggregatorBin, i, devstack.GRPCServing(cfg.Aggregator.Listen, cfg.ServiceAuth.TLS)))
	}
	for i, cfg := range c.configs {
		c.Indexers = append(c.Indexers, start("indexer", devstack.IndexerBin, i, devstack.GRPCServing(cfg.Indexer.Listen, cfg.ServiceAuth.TLS)))
	}
	var gateways []string
	for i, cfg := range c.configs {
		c.Gateways = append(c.Gateways, start("gateway", devstack.GatewayBin, i, devstack.HTTPOK("http://"+cfg.Gateway.Listen+"/readyz")))
		gateways = append(gateways, cfg.Gateway.Listen)
	}
	var url string
	c.LB, url = startLB(t, gateways)
	c.MCPURL, c.OptimizedURL = url+"/mcp", url+"/mcp/optimized"
	return c
}

// startBackend starts one demo backend and returns its MCP URL.
func (c *cluster) startBackend(t *testing.T, dir, name, spec string, stateful bool) string {
	t.Helper()
	path := filepath.Join(dir, "backend-"+name+".yaml")
	if err := os.WriteFile(path, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := harness.FreeAddr(t)
	args := []string{"--listen", addr, "--name", name, "--config", path}
	if stateful {
		args = append(args, "--stateful")
	}
	c.Backends[name] = harness.StartProc(t, "backend:"+name, devstack.DemoBackendBin, args, nil, devstack.HTTPOK("http://"+addr+"/healthz"))
	c.backendURLs[name] = "http://" + addr + "/mcp"
	return c.backendURLs[name]
}

// replicaConfigs builds every replica's configuration: one base that all
// share, as production's replicas share their ConfigMap and Secrets (the
// service credentials, the session key that seals Legacy session ids and
// request states, the database), and per replica only its own listen
// addresses. This is the one place the cluster's configuration is made.
func replicaConfigs(t *testing.T, backends []config.Backend, database, dns string, edits ...func(*config.Config)) []*config.Config {
	t.Helper()
	gatewayToken, indexerToken, aggregatorToken := randomToken(t), randomToken(t), randomToken(t)
	aggPort, idxPort := sharedPort(t), sharedPort(t)

	base := config.Config{
		ServiceAuth: config.ServiceAuth{Credentials: []config.ServiceCredential{
			{Name: "gateway", Token: gatewayToken, AssertPrincipals: true, Allow: config.GatewayMethods},
			{Name: "indexer", Token: indexerToken, AssertPrincipals: true, Allow: config.IndexerMethods},
			// The aggregators' own credential: a retry of a call another
			// replica holds is forwarded to it (aggregator.peers).
			{Name: "aggregator", Token: aggregatorToken, AssertPrincipals: true, Allow: config.AggregatorMethods},
			// An operator's, as the console's: it reads each replica's
			// traffic through the balanced address.
			{Name: "operator", Token: operatorToken, AssertPrincipals: true, Operator: true, Allow: config.ConsoleMethods},
		}},
		Logging: config.Logging{Level: "info", Format: "text"},
	}
	base.Aggregator.Backends = backends
	for i := range base.Aggregator.Backends {
		base.Aggregator.Backends[i].Timeout = config.Duration(backendTimeout)
	}
	base.Aggregator.ConflictResolution = config.ConflictResolution{Strategy: "prefix", PrefixFormat: "{backend}_"}
	base.Aggregator.PageSize, base.Aggregator.MaxPageSize = pageSize, pageSize
	base.Aggregator.Health = config.HealthCheck{
		Interval:           config.Duration(300 * time.Millisecond),
		Timeout:            config.Duration(time.Second),
		DegradedThreshold:  config.Duration(time.Second),
		UnhealthyThreshold: 2,
	}
	base.Indexer.Database = database
	base.Gateway.Auth.Mode = "anonymous"
	base.Gateway.Sessions.Key = sessionKey(t)
	// go-sdk's Modern client caches a listing for the advertised ttlMs;
	// these tests watch listings change, so every list reaches a gateway.
	base.Gateway.Cache.TTL = config.Duration(time.Millisecond)

	aggregators, indexers := serviceTarget(dns, aggregatorsName, aggPort), serviceTarget(dns, indexersName, idxPort)
	base.Gateway.Aggregator = config.Endpoint{Address: aggregators, Token: gatewayToken}
	base.Gateway.Indexer = config.Endpoint{Address: indexers, Token: gatewayToken}
	base.Indexer.Aggregator = config.Endpoint{Address: aggregators, Token: indexerToken}

	// Every aggregator replica may forward a held call's retry to the
	// others, as the manifests' peers.dns names the headless Service.
	for _, ip := range replicaIPs {
		base.Aggregator.Peers.Addresses = append(base.Aggregator.Peers.Addresses, net.JoinHostPort(ip, strconv.Itoa(aggPort)))
	}
	base.Aggregator.Peers.Token = aggregatorToken
	for _, edit := range edits {
		edit(&base)
	}

	var out []*config.Config
	for i := range replicas {
		cfg := base
		cfg.Aggregator.Listen = net.JoinHostPort(replicaIPs[i], strconv.Itoa(aggPort))
		cfg.Indexer.Listen = net.JoinHostPort(replicaIPs[i], strconv.Itoa(idxPort))
		cfg.Gateway.Listen = harness.FreeAddr(t)
		// The aggregator's ops port, for its RPC counts (metrics).
		cfg.Aggregator.HTTPListen = harness.FreeAddr(t)
		out = append(out, &cfg)
	}
	return out
}

// startReplicaDNS starts the DNS server that resolves aggregatorsName and
// indexersName to every replica's address; "" when balancedTargets is off.
func startReplicaDNS(t *testing.T) string {
	if !balancedTargets {
		return ""
	}
	var all []netip.Addr
	for _, ip := range replicaIPs {
		all = append(all, netip.MustParseAddr(ip))
	}
	return startDNS(t, map[string][]netip.Addr{aggregatorsName: all, indexersName: all})
}

// serviceTarget is the gRPC target by which gateways and indexers reach
// every replica of a service listening on port (see balancedTargets).
func serviceTarget(dns, name string, port int) string {
	if dns == "" {
		return net.JoinHostPort(replicaIPs[0], strconv.Itoa(port))
	}
	return fmt.Sprintf("dns://%s/%s:%d", dns, name, port)
}

// sharedPort returns a port free on every replica address.
func sharedPort(t *testing.T) int {
	t.Helper()
	for range 20 {
		port := strings.TrimPrefix(harness.FreeAddr(t), replicaIPs[0]+":")
		free := true
		for _, ip := range replicaIPs[1:] {
			l, err := net.Listen("tcp", net.JoinHostPort(ip, port))
			if err != nil {
				free = false
				break
			}
			l.Close()
		}
		if free {
			n, _ := strconv.Atoi(port)
			return n
		}
	}
	t.Fatalf("no port free on all of %v", replicaIPs)
	return 0
}

func sessionKey(t *testing.T) string {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(key)
}

func randomToken(t *testing.T) string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
