// Package lb checks client-side load balancing between real processes:
// one gateway whose aggregator address is a dns:// target that a real DNS
// server (services/rpc/dnstest, asked by gRPC's own DNS resolver) resolves
// to two aggregator processes on 127.0.0.1 and 127.0.0.2 (one port, as the
// pods behind a headless Service), over one demo backend. Calls spread
// over both; with one killed under load, the calls keep succeeding on the
// other without a restart of anything; the notification streams (whose
// catalog watches each sit on one replica) reopen on the survivor; a
// restarted replica gets calls again; a replica that joins the name gets
// calls once connection age makes the gateway resolve it again. In
// indexer_test.go the gateway balances over two indexers, one of them
// NOT_SERVING.
package lb

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/demobackend"
	"github.com/switchboard-mcp/switchboard/services/devstack"
	"github.com/switchboard-mcp/switchboard/services/rpc/dnstest"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

// aggregatorsName is the name the DNS server resolves to the aggregators.
const aggregatorsName = "aggregators.switchboard.test"

const callTool = "/switchboard.aggregator.v1.AggregatorService/CallTool"

// aggregator is one replica (an aggregator, or an indexer in
// indexer_test.go): its process and its metrics URL.
type aggregator struct {
	name       string
	proc       *harness.Proc
	metricsURL string
}

// cluster is the processes of a test.
type cluster struct {
	dns      *dnstest.Server
	backends *harness.Cluster // only its BackendURLs: the admin API helpers
	aggs     []*aggregator
	gateway  *harness.Proc
	mcpURL   string
}

// freePortOnBoth returns a port that is free on 127.0.0.1 and 127.0.0.2.
func freePortOnBoth(t *testing.T) int {
	t.Helper()
	for range 20 {
		l1, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l1.Addr().(*net.TCPAddr).Port
		l2, err := net.Listen("tcp", fmt.Sprintf("127.0.0.2:%d", port))
		l1.Close()
		if err == nil {
			l2.Close()
			return port
		}
	}
	t.Fatal("no port free on both 127.0.0.1 and 127.0.0.2 (this test needs 127.0.0.2 on the loopback interface)")
	return 0
}

// startCluster starts the demo backend, the two aggregators (on
// 127.0.0.1 and 127.0.0.2) and the gateway, with grpcCfg as the grpc
// section; aggregatorsName resolves to the addresses inDNS.
func startCluster(t *testing.T, grpcCfg config.GRPC, inDNS ...string) *cluster {
	t.Helper()
	dns, err := dnstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dns.Close() })
	var addrs []netip.Addr
	for _, a := range inDNS {
		addrs = append(addrs, netip.MustParseAddr(a))
	}
	dns.Set(aggregatorsName, addrs...)

	c := &cluster{dns: dns, backends: &harness.Cluster{BackendURLs: map[string]string{}}}
	backendAddr := harness.FreeAddr(t)
	harness.StartProc(t, "backend:alpha", devstack.DemoBackendBin, []string{"--listen", backendAddr, "--name", "alpha"}, nil,
		devstack.HTTPOK("http://"+backendAddr+"/healthz"))
	c.backends.BackendURLs["alpha"] = "http://" + backendAddr + demobackend.MCPPath

	const token = "lb-gateway-token"
	port := freePortOnBoth(t)
	base := config.Config{
		ServiceAuth: config.ServiceAuth{Credentials: []config.ServiceCredential{
			{Name: "gateway", Token: token, AssertPrincipals: true, Allow: config.GatewayMethods},
		}},
		Logging: config.Logging{Level: "debug", Format: "text"},
		GRPC:    grpcCfg,
	}
	base.Aggregator.ConflictResolution = config.ConflictResolution{Strategy: "prefix", PrefixFormat: "{backend}_"}
	base.Aggregator.Backends = []config.Backend{{Name: "alpha", URL: c.backends.BackendURLs["alpha"]}}
	base.Gateway.Listen = harness.FreeAddr(t)
	base.Gateway.Auth.Mode = "anonymous"
	base.Gateway.Aggregator = config.Endpoint{Address: fmt.Sprintf("dns://%s/%s:%d", dns.Addr(), aggregatorsName, port), Token: token}

	for i, host := range []string{"127.0.0.1", "127.0.0.2"} {
		cfg := base
		cfg.Aggregator.Listen = fmt.Sprintf("%s:%d", host, port)
		cfg.Aggregator.HTTPListen = harness.FreeAddr(t)
		name := fmt.Sprintf("aggregator-%d", i+1)
		path := harness.WriteConfig(t, t.TempDir(), &cfg)
		proc := harness.StartProc(t, name, devstack.AggregatorBin, []string{"--config", path}, nil,
			devstack.GRPCServing(cfg.Aggregator.Listen, config.TLS{}))
		c.aggs = append(c.aggs, &aggregator{name: name, proc: proc, metricsURL: "http://" + cfg.Aggregator.HTTPListen + "/metrics"})
	}
	path := harness.WriteConfig(t, t.TempDir(), &base)
	c.gateway = harness.StartProc(t, "gateway", devstack.GatewayBin, []string{"--config", path}, nil,
		devstack.HTTPOK("http://"+base.Gateway.Listen+"/readyz"))
	c.mcpURL = "http://" + base.Gateway.Listen + "/mcp"
	if dns.Queries(aggregatorsName) == 0 {
		t.Fatal("the gateway is ready but never asked the DNS server for the aggregators")
	}
	return c
}

// handled reads the aggregator's switchboard_grpc_server_handled_total
// for method, code OK, called by the gateway.
func (a *aggregator) handled(t *testing.T, method string) int {
	t.Helper()
	return a.count(t, func(labels string) bool {
		return strings.Contains(labels, `method="`+method+`"`) && strings.Contains(labels, `code="OK"`) && strings.Contains(labels, `caller="gateway"`)
	})
}

// handledAny is the same counter for method (every method when empty)
// with any code, called by caller.
func (a *aggregator) handledAny(t *testing.T, method, caller string) int {
	t.Helper()
	return a.count(t, func(labels string) bool {
		return (method == "" || strings.Contains(labels, `method="`+method+`"`)) && strings.Contains(labels, `caller="`+caller+`"`)
	})
}

// count sums the switchboard_grpc_server_handled_total series of the
// process's /metrics whose labels match.
func (a *aggregator) count(t *testing.T, match func(labels string) bool) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.metricsURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s metrics: %v", a.name, err)
	}
	defer resp.Body.Close()
	total := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	const series = "switchboard_grpc_server_handled_total{"
	for sc.Scan() {
		line := sc.Text()
		labels, ok := strings.CutPrefix(line, series)
		if !ok || !match(labels[:strings.LastIndexByte(labels, '}')+1]) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("%s metrics line %q: %v", a.name, line, err)
		}
		total += int(v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return total
}

// eras are the two MCP eras a client can speak.
var eras = []struct{ name, pin string }{{"modern", harness.Modern}, {"legacy", harness.Legacy}}

// session is a go-sdk session that counts the tools list_changed it gets.
type session struct {
	era      string
	cs       *mcp.ClientSession
	notified chan struct{}
}

func connect(t *testing.T, url string) []*session {
	t.Helper()
	var out []*session
	for _, era := range eras {
		s := &session{era: era.name, notified: make(chan struct{}, 64)}
		s.cs = harness.ConnectWith(t, url, era.pin, &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
				select {
				case s.notified <- struct{}{}:
				default:
				}
			},
		})
		out = append(out, s)
	}
	return out
}

// echo makes one tools/call of alpha_echo; nil means a result without
// isError.
func (s *session) echo(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha_echo", Arguments: map[string]any{"message": "hi"}})
	switch {
	case err != nil:
		return err
	case res.IsError:
		return fmt.Errorf("isError: %v", res.Content)
	}
	return nil
}

// toolNames lists every tool of the session.
func (s *session) toolNames(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var names []string
	for tool, err := range s.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		names = append(names, tool.Name)
	}
	return names, nil
}

// awaitListing waits for list_changed until the listing satisfies ok.
func (s *session) awaitListing(t *testing.T, what string, ok func([]string) bool) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case <-s.notified:
		case <-deadline:
			names, err := s.toolNames(t.Context())
			t.Fatalf("%s: no notifications/tools/list_changed leading to a listing %s within 60s (listing now %v, %v)", s.era, what, names, err)
		}
		if names, err := s.toolNames(t.Context()); err == nil && ok(names) {
			return
		}
	}
}

func (s *session) drain() {
	for {
		select {
		case <-s.notified:
		default:
			return
		}
	}
}

// spread makes n echo calls on each session and returns how many
// CallTools each aggregator handled meanwhile.
func spread(t *testing.T, c *cluster, sessions []*session, n int) []int {
	t.Helper()
	before := make([]int, len(c.aggs))
	for i, a := range c.aggs {
		before[i] = a.handled(t, callTool)
	}
	for range n {
		for _, s := range sessions {
			if err := s.echo(t.Context()); err != nil {
				t.Fatalf("%s: echo: %v", s.era, err)
			}
		}
	}
	out := make([]int, len(c.aggs))
	for i, a := range c.aggs {
		out[i] = a.handled(t, callTool) - before[i]
	}
	return out
}

// call is one call made under load.
type call struct {
	era   string
	start time.Time
	err   error
}

// underLoad runs echo calls on every session, two callers per session,
// while fault runs; it returns every call made and the time fault
// returned.
func underLoad(t *testing.T, sessions []*session, fault func()) ([]call, time.Time) {
	t.Helper()
	var (
		mu    sync.Mutex
		calls []call
		wg    sync.WaitGroup
	)
	made := func() int { mu.Lock(); defer mu.Unlock(); return len(calls) }
	stop := make(chan struct{})
	for _, s := range sessions {
		for range 2 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					start := time.Now()
					err := s.echo(t.Context())
					mu.Lock()
					calls = append(calls, call{s.era, start, err})
					mu.Unlock()
				}
			})
		}
	}
	testkit.Eventually(t, "load before the fault", 60*time.Second, func() error {
		if n := made(); n < 40 {
			return fmt.Errorf("%d calls made", n)
		}
		return nil
	})
	fault()
	at := time.Now()
	testkit.Eventually(t, "load after the fault", 60*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		late := 0
		for _, cl := range calls {
			if cl.start.After(at.Add(noticeWindow)) {
				late++
			}
		}
		if late < 40 {
			return fmt.Errorf("%d calls made more than %v after the fault", late, noticeWindow)
		}
		return nil
	})
	close(stop)
	wg.Wait()
	return calls, at
}

// TestGatewaySpreadsOverAggregators is the whole story with real
// processes; see the package comment.
func TestGatewaySpreadsOverAggregators(t *testing.T) {
	c := startCluster(t, config.GRPC{}, "127.0.0.1", "127.0.0.2")
	sessions := connect(t, c.mcpURL)

	// Both replicas get calls: round robin over the two, give or take the
	// other calls (lists, watches) that share the channel's turns.
	testkit.Eventually(t, "both aggregators handle calls", 60*time.Second, func() error {
		got := spread(t, c, sessions, 20)
		t.Logf("40 tools/call: CallTool handled by %s %d, %s %d", c.aggs[0].name, got[0], c.aggs[1].name, got[1])
		if got[0]+got[1] != 40 {
			t.Fatalf("the aggregators handled %d CallTools for 40 calls", got[0]+got[1])
		}
		if got[0] < 10 || got[1] < 10 {
			return fmt.Errorf("not spread: %v", got)
		}
		return nil
	})

	// Kill the second replica under load: only calls in flight on it may
	// fail; every call made after the kill succeeds on the first.
	calls, killed := underLoad(t, sessions, c.aggs[1].proc.Kill)
	checkLoad(t, calls, killed, 4)
	before := c.aggs[0].handled(t, callTool)
	for _, s := range sessions {
		for range 10 {
			if err := s.echo(t.Context()); err != nil {
				t.Fatalf("%s: echo with one aggregator: %v", s.era, err)
			}
		}
	}
	if got := c.aggs[0].handled(t, callTool) - before; got != 20 {
		t.Errorf("the surviving aggregator handled %d of 20 calls", got)
	}

	// The notification streams work on: a watch that was on the killed
	// replica reopened on the survivor.
	for _, s := range sessions {
		s.drain()
	}
	c.backends.AddTool(t, "alpha", demobackend.ToolSpec{Name: "late", Description: "Added while one replica is down.",
		Behaviour: demobackend.BehaviourText, Text: "late"})
	for _, s := range sessions {
		s.awaitListing(t, "with alpha_late", func(names []string) bool { return slices.Contains(names, "alpha_late") })
	}

	// The killed replica back (same address): it gets calls again, with
	// no restart of the gateway.
	c.aggs[1].proc.Restart()
	testkit.Eventually(t, "the restarted aggregator gets calls again", 60*time.Second, func() error {
		got := spread(t, c, sessions, 10)
		if got[1] < 5 {
			return fmt.Errorf("CallTool handled %v", got)
		}
		return nil
	})

	// Now kill the first: every stream has then lost its replica at least
	// once (one on the first moved to the second now; one on the second
	// moved to the first before, and moves back).
	calls, killed = underLoad(t, sessions, c.aggs[0].proc.Kill)
	checkLoad(t, calls, killed, 4)
	for _, s := range sessions {
		s.drain()
	}
	c.backends.RemoveTool(t, "alpha", "late")
	for _, s := range sessions {
		s.awaitListing(t, "without alpha_late", func(names []string) bool { return !slices.Contains(names, "alpha_late") })
	}
	if !c.gateway.Running() || !c.aggs[1].proc.Running() {
		t.Error("a process that was not killed is not running")
	}
}

// noticeWindow bounds how long after a replica's death the gateway may
// still send a call to it: the kernel closes the dead process's sockets at
// once, and the gateway reads that its connection closed as soon as it is
// scheduled. A call written to the connection before that is in flight on
// the dead replica and fails; it cannot be retried, as the gateway cannot
// know whether the replica acted on it.
const noticeWindow = 2 * time.Second

// checkLoad: only calls started before the kill or within noticeWindow
// after it failed, at most two per caller; every later call succeeded.
func checkLoad(t *testing.T, calls []call, killed time.Time, callers int) {
	t.Helper()
	var before, window, after, failed int
	for _, cl := range calls {
		switch {
		case cl.start.Before(killed):
			before++
		case cl.start.Before(killed.Add(noticeWindow)):
			window++
		default:
			after++
			if cl.err != nil {
				t.Errorf("%s: a call started %v after the kill failed: %v", cl.era, cl.start.Sub(killed).Round(time.Millisecond), cl.err)
			}
			continue
		}
		if cl.err != nil {
			failed++
			t.Logf("%s: a call started at the kill %+v (so in flight on the killed replica) failed: %v", cl.era, cl.start.Sub(killed).Round(time.Millisecond), cl.err)
		}
	}
	t.Logf("under load: %d calls started before the kill, %d within %v after it (%d of these failed), %d later (all must succeed)",
		before, window, noticeWindow, failed, after)
	if failed > 2*callers {
		t.Errorf("%d calls failed; with %d callers, at most %d may have been in flight on the killed replica", failed, callers, 2*callers)
	}
}

// TestNewAggregatorGetsCalls: an aggregator that joins the DNS name gets
// calls once the running one's connection age (grpc.maxConnectionAge, at
// its minimum of 10s here) has made the gateway resolve the name again,
// and gRPC's DNS resolver allows it (at most once every 30s): without a
// restart, and with nothing else telling the gateway.
func TestNewAggregatorGetsCalls(t *testing.T) {
	c := startCluster(t, config.GRPC{MaxConnectionAge: config.Duration(10 * time.Second)}, "127.0.0.1")
	sessions := connect(t, c.mcpURL)
	if got := spread(t, c, sessions, 10); got[0] != 20 || got[1] != 0 {
		t.Fatalf("with one aggregator in DNS: CallTool handled %v, want all 20 by the first", got)
	}
	c.dns.Set(aggregatorsName, netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2"))
	took := testkit.Eventually(t, "the new aggregator gets a call after it joined the name", 90*time.Second, func() bool { return spread(t, c, sessions[:1], 1)[1] > 0 })
	t.Logf("the new aggregator got its first call %v after it joined the name", took.Round(100*time.Millisecond))
	if got := spread(t, c, sessions, 20); got[0] < 10 || got[1] < 10 {
		t.Errorf("with both in DNS: CallTool handled %v of 40, want them spread", got)
	}
}
