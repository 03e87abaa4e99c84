package rpc_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/resolver"
	grpcdns "google.golang.org/grpc/resolver/dns"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/config"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/rpc/dnstest"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// Tests of dns: targets over real gRPC servers built by rpc.NewServer on
// loopback. The balancing tests give the channel its addresses with gRPC's
// manual resolver (registered for the dns scheme of that one channel), so
// that a test decides exactly which replicas exist; TestBalancedDNSOverTLS
// resolves a name through a real DNS server instead.

const replicaToken = "replica-secret"

// replicaAPI is a replica's fake indexer: it answers RefreshScope with
// the replica's name, blocks a Search until the call ends (telling
// searching it started), and holds a WatchRevocations stream open after
// its snapshot.
func replicaAPI(name string, searching chan<- string) *testkit.FakeIndexer {
	return &testkit.FakeIndexer{
		RefreshScopeFunc: func(context.Context, *indexerv1.RefreshScopeRequest) (*indexerv1.RefreshScopeResponse, error) {
			return &indexerv1.RefreshScopeResponse{ToolsDigest: name}, nil
		},
		SearchFunc: func(ctx context.Context, _ *indexerv1.SearchRequest) (*indexerv1.SearchResponse, error) {
			searching <- name
			<-ctx.Done()
			return nil, status.FromContextError(ctx.Err()).Err()
		},
	}
}

// replica is one running server.
type replica struct {
	name string
	addr string
	srv  *rpc.Server
	reg  *prometheus.Registry
	done chan struct{}
}

// startReplica serves replicaAPI on lis (a fresh loopback listener when
// nil) with TLS when tlsCfg is set, SERVING.
func startReplica(t *testing.T, name string, lis net.Listener, tlsCfg config.TLS, searching chan<- string) *replica {
	t.Helper()
	return startReplicaOpts(t, name, lis, tlsCfg, searching)
}

// startReplicaWith is startReplica, without TLS, with extra server
// options.
func startReplicaWith(t *testing.T, name string, lis net.Listener, extra []grpc.ServerOption) *replica {
	t.Helper()
	return startReplicaOpts(t, name, lis, config.TLS{}, nil, extra...)
}

func startReplicaOpts(t *testing.T, name string, lis net.Listener, tlsCfg config.TLS, searching chan<- string, extra ...grpc.ServerOption) *replica {
	t.Helper()
	if lis == nil {
		var err error
		if lis, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	creds := []config.ServiceCredential{{Name: "client", Token: replicaToken, AssertPrincipals: true, Allow: []string{"switchboard.indexer.v1.IndexerService/*"}}}
	srv, err := rpc.NewServer(svcauth.NewAuthenticator(creds), tlsCfg, slog.New(slog.NewTextHandler(io.Discard, nil)), append(extra, rpc.ServerMetrics(reg)...)...)
	if err != nil {
		t.Fatal(err)
	}
	indexerv1.RegisterIndexerServiceServer(srv, replicaAPI(name, searching))
	srv.SetServing()
	r := &replica{name: name, addr: lis.Addr().String(), srv: srv, reg: reg, done: make(chan struct{})}
	go func() { defer close(r.done); _ = srv.ServeListener(context.Background(), lis, 0) }()
	t.Cleanup(r.kill)
	return r
}

// kill ends the server at once: its listener and every connection close
// under the calls in flight, as when the process dies.
func (r *replica) kill() {
	r.srv.Stop()
	<-r.done
}

// setServing flips the replica's health, as a service does while it is
// not ready or is shutting down.
func (r *replica) setServing(serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	r.srv.Health.SetServingStatus("", st)
}

// handled is the replica's switchboard_grpc_server_handled_total for
// method (a full method name) with code OK.
func (r *replica) handled(t *testing.T, method string) int {
	t.Helper()
	families, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, f := range families {
		if f.GetName() != "switchboard_grpc_server_handled_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["method"] == method && labels["code"] == "OK" {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return int(n)
}

const refreshScope = "/switchboard.indexer.v1.IndexerService/RefreshScope"

// dialReplicas opens a dns: channel whose name resolves (through the
// manual resolver) to the replicas' addresses.
func dialReplicas(t *testing.T, replicas ...*replica) indexerv1.IndexerServiceClient {
	t.Helper()
	r := manual.NewBuilderWithScheme("dns")
	var addrs []resolver.Address
	for _, rep := range replicas {
		addrs = append(addrs, resolver.Address{Addr: rep.addr})
	}
	r.InitialState(resolver.State{Addresses: addrs})
	conn, err := rpc.Dial(config.Endpoint{Address: "dns:///replicas.switchboard.test:50051", Token: replicaToken}, config.TLS{}, grpc.WithResolvers(r))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return indexerv1.NewIndexerServiceClient(conn)
}

// whoAnswers makes one RefreshScope call and returns the replica that
// answered it.
func whoAnswers(ctx context.Context, c indexerv1.IndexerServiceClient) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := c.RefreshScope(cctx, &indexerv1.RefreshScopeRequest{})
	return resp.GetToolsDigest(), err
}

// answeredBy makes n calls and counts them by the replica that answered;
// a failed call fails the test.
func answeredBy(t *testing.T, c indexerv1.IndexerServiceClient, n int) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for range n {
		who, err := whoAnswers(t.Context(), c)
		if err != nil {
			t.Fatalf("call: %v", err)
		}
		counts[who]++
	}
	return counts
}

// waitAllAnswer polls until every named replica has answered a call.
func waitAllAnswer(t *testing.T, c indexerv1.IndexerServiceClient, names ...string) {
	t.Helper()
	seen := map[string]bool{}
	testkit.Eventually(t, "every replica answers", 20*time.Second, func() error {
		who, err := whoAnswers(t.Context(), c)
		if err != nil {
			return err
		}
		seen[who] = true
		for _, n := range names {
			if !seen[n] {
				return fmt.Errorf("not yet answered by %s (seen %v)", n, seen)
			}
		}
		return nil
	})
}

// TestBalancedTargetSpreadsCalls: a dns: target's calls go to every
// replica in turn, as each replica's own handled counter shows.
func TestBalancedTargetSpreadsCalls(t *testing.T) {
	a, b := startReplica(t, "a", nil, config.TLS{}, nil), startReplica(t, "b", nil, config.TLS{}, nil)
	c := dialReplicas(t, a, b)
	waitAllAnswer(t, c, "a", "b")
	beforeA, beforeB := a.handled(t, refreshScope), b.handled(t, refreshScope)
	const calls = 200
	counts := answeredBy(t, c, calls)
	gotA, gotB := a.handled(t, refreshScope)-beforeA, b.handled(t, refreshScope)-beforeB
	t.Logf("%d calls: answered %v; handled_total a +%d, b +%d", calls, counts, gotA, gotB)
	if gotA != counts["a"] || gotB != counts["b"] {
		t.Errorf("the servers counted a %d, b %d; the answers say %v", gotA, gotB, counts)
	}
	// Round robin alternates: each replica gets half, give or take one.
	for name, n := range counts {
		if n < calls/2-1 || n > calls/2+1 {
			t.Errorf("replica %s answered %d of %d calls; want %d±1", name, n, calls, calls/2)
		}
	}
}

// TestBalancedTargetSkipsNotServing: a replica whose health is
// NOT_SERVING gets no calls until it is SERVING again.
func TestBalancedTargetSkipsNotServing(t *testing.T) {
	a, b := startReplica(t, "a", nil, config.TLS{}, nil), startReplica(t, "b", nil, config.TLS{}, nil)
	c := dialReplicas(t, a, b)
	waitAllAnswer(t, c, "a", "b")

	b.setServing(false)
	// The client learns of it over its health watch of b, a moment later.
	testkit.Eventually(t, "b's calls stop", 20*time.Second, func() error {
		if counts := answeredBy(t, c, 10); counts["b"] > 0 {
			return fmt.Errorf("b still answered %d of 10", counts["b"])
		}
		return nil
	})
	before := b.handled(t, refreshScope)
	if counts := answeredBy(t, c, 100); counts["a"] != 100 {
		t.Errorf("with b NOT_SERVING: answered %v, want all 100 by a", counts)
	}
	if got := b.handled(t, refreshScope) - before; got != 0 {
		t.Errorf("b, NOT_SERVING, handled %d calls", got)
	}

	// Both NOT_SERVING: calls fail at once, UNAVAILABLE, rather than wait.
	a.setServing(false)
	testkit.Eventually(t, "calls fail with no replica serving", 20*time.Second, func() error {
		start := time.Now()
		_, err := whoAnswers(t.Context(), c)
		if status.Code(err) != codes.Unavailable {
			return fmt.Errorf("call: %v, want UNAVAILABLE", err)
		}
		if d := time.Since(start); d > time.Second {
			return fmt.Errorf("the call took %v to fail", d)
		}
		return nil
	})

	a.setServing(true)
	b.setServing(true)
	waitAllAnswer(t, c, "a", "b")
}

// call is one call made under load: when it started, the replica it was
// sent to and how it ended.
type call struct {
	start time.Time
	peer  string
	err   error
}

// TestBalancedTargetLosesReplica kills one of two replicas under
// concurrent load, with a long call and a stream in flight on each: only
// calls sent to the killed one fail (UNAVAILABLE): those in flight, and
// any the client wrote to the connection in the moment before it read
// that the connection had closed; none sent to the other fails, the
// other's long call and stream carry on, and from then on every call
// goes to the survivor, the killed replica's stream too when reopened.
func TestBalancedTargetLosesReplica(t *testing.T) {
	searching := make(chan string, 4)
	a, b := startReplica(t, "a", nil, config.TLS{}, searching), startReplica(t, "b", nil, config.TLS{}, searching)
	c := dialReplicas(t, a, b)
	waitAllAnswer(t, c, "a", "b")

	// A long call on each replica (round robin alternates).
	long := map[string]chan error{}
	longCtx, stopLong := context.WithCancel(t.Context())
	defer stopLong()
	for range 2 {
		done := make(chan error, 1)
		go func() { _, err := c.Search(longCtx, &indexerv1.SearchRequest{Query: "hold"}); done <- err }()
		select {
		case name := <-searching:
			long[name] = done
		case <-time.After(10 * time.Second):
			t.Fatal("a long call did not start")
		}
	}
	if len(long) != 2 {
		t.Fatalf("the two long calls went to %v; want one on each replica", long)
	}
	// A stream on each.
	streams := map[string]grpc.ServerStreamingClient[indexerv1.WatchRevocationsResponse]{}
	for range 2 {
		s, err := c.WatchRevocations(t.Context(), &indexerv1.WatchRevocationsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); err != nil {
			t.Fatal(err)
		}
		streams[streamReplica(s, a, b)] = s
	}
	if len(streams) != 2 {
		t.Fatalf("the two streams went to %v; want one on each replica", streams)
	}

	// Load: four callers, one call each at a time, until stopped.
	var (
		mu    sync.Mutex
		calls []call
		wg    sync.WaitGroup
	)
	stopLoad := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stopLoad:
					return
				default:
				}
				start := time.Now()
				var p peer.Peer
				cctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				_, err := c.RefreshScope(cctx, &indexerv1.RefreshScopeRequest{}, grpc.Peer(&p))
				cancel()
				sentTo := ""
				if p.Addr != nil {
					sentTo = replicaAt(p.Addr.String(), a, b)
				}
				mu.Lock()
				calls = append(calls, call{start, sentTo, err})
				mu.Unlock()
			}
		})
	}
	made := func() int { mu.Lock(); defer mu.Unlock(); return len(calls) }
	testkit.Eventually(t, "load before the kill", 20*time.Second, func() error {
		if n := made(); n < 200 {
			return fmt.Errorf("%d calls made", n)
		}
		return nil
	})
	b.kill()
	killed := time.Now()
	atKill := made()
	testkit.Eventually(t, "load after the kill", 20*time.Second, func() error {
		if n := made() - atKill; n < 200 {
			return fmt.Errorf("%d calls made", n)
		}
		return nil
	})
	close(stopLoad)
	wg.Wait()

	var after int
	failed := map[string]int{}
	for _, cl := range calls {
		if !cl.start.Before(killed) {
			after++
		}
		if cl.err == nil {
			continue
		}
		failed[cl.peer]++
		if cl.peer != "b" || status.Code(cl.err) != codes.Unavailable {
			t.Errorf("a call sent to %q, started %v after the kill, failed: %v; only calls sent to the killed b may, UNAVAILABLE",
				cl.peer, cl.start.Sub(killed), cl.err)
		}
	}
	t.Logf("%d calls, %d started after the kill; failed, by replica sent to: %v", len(calls), after, failed)
	if failed["b"] > 8 {
		t.Errorf("%d calls sent to b failed; with four callers, expected at most a few", failed["b"])
	}
	// From now on every call goes to the survivor.
	if counts := answeredBy(t, c, 100); counts["a"] != 100 {
		t.Errorf("after the kill: answered %v, want all 100 by a", counts)
	}

	select {
	case err := <-long["b"]:
		if status.Code(err) != codes.Unavailable {
			t.Errorf("the long call on the killed replica ended with %v, want UNAVAILABLE", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("the long call on the killed replica did not fail")
	}
	select {
	case err := <-long["a"]:
		t.Errorf("the long call on the surviving replica ended: %v", err)
	default:
	}
	if _, err := streams["b"].Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("the killed replica's stream: %v, want UNAVAILABLE", err)
	}
	// Opened again, the stream lands on the survivor.
	s, err := c.WatchRevocations(t.Context(), &indexerv1.WatchRevocationsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatalf("reopened stream: %v", err)
	}
	if got := streamReplica(s, a, b); got != "a" {
		t.Errorf("the reopened stream went to %s, want a", got)
	}
	stopLong()
	if err := <-long["a"]; status.Code(err) != codes.Canceled {
		t.Errorf("the long call on the survivor, cancelled: %v", err)
	}
}

// streamReplica names the replica a stream went to.
func streamReplica(s grpc.ClientStream, replicas ...*replica) string {
	p, ok := peer.FromContext(s.Context())
	if !ok {
		return "unknown"
	}
	return replicaAt(p.Addr.String(), replicas...)
}

// replicaAt names the replica listening at addr.
func replicaAt(addr string, replicas ...*replica) string {
	for _, r := range replicas {
		if r.addr == addr {
			return r.name
		}
	}
	return "unknown " + addr
}

// TestBalancedDNSOverTLS resolves a dns://server/name:port target through
// gRPC's DNS resolver and a real DNS server to two replicas on two
// loopback addresses (127.0.0.1 and 127.0.0.2, one port), over TLS: calls
// spread over both, each replica's certificate is checked against the
// name of the target, and a certificate for another name is refused
// unless serviceAuth.tls.serverName names it.
func TestBalancedDNSOverTLS(t *testing.T) {
	const name = "replicas.switchboard.test"
	dns, err := dnstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dns.Close() })

	first, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := first.Addr().(*net.TCPAddr).Port
	second, err := net.Listen("tcp", fmt.Sprintf("127.0.0.2:%d", port))
	if err != nil {
		t.Fatalf("this test needs 127.0.0.2 on the loopback interface: %v", err)
	}
	dns.Set(name, netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2"))

	dir := t.TempDir()
	ca := newCA(t)
	serverTLS := func(tag, certName string) config.TLS {
		files := config.TLS{CertFile: filepath.Join(dir, tag+".crt"), KeyFile: filepath.Join(dir, tag+".key")}
		c, k := ca.serverFor(t, certName)
		write(t, files.CertFile, c)
		write(t, files.KeyFile, k)
		return files
	}
	a := startReplica(t, "a", first, serverTLS("a", name), nil)
	b := startReplica(t, "b", second, serverTLS("b", name), nil)
	caFile := filepath.Join(dir, "ca.pem")
	write(t, caFile, ca.pem())

	target := fmt.Sprintf("dns://%s/%s:%d", dns.Addr(), name, port)
	dial := func(tlsCfg config.TLS) indexerv1.IndexerServiceClient {
		conn, err := rpc.Dial(config.Endpoint{Address: target, Token: replicaToken}, tlsCfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return indexerv1.NewIndexerServiceClient(conn)
	}
	c := dial(config.TLS{CAFile: caFile})
	waitAllAnswer(t, c, "a", "b")
	counts := answeredBy(t, c, 100)
	t.Logf("over DNS and TLS, 100 calls: %v; DNS questions for %s: %d", counts, name, dns.Queries(name))
	if counts["a"] < 49 || counts["b"] < 49 {
		t.Errorf("100 calls answered %v; want about half each", counts)
	}
	if dns.Queries(name) == 0 {
		t.Error("the DNS server was never asked: the target was not resolved through it")
	}

	// Replicas whose certificates name another host: refused, whichever
	// answers, unless serverName says that host is the one meant.
	a.kill()
	b.kill()
	first, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	second, err = net.Listen("tcp", fmt.Sprintf("127.0.0.2:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	startReplica(t, "c", first, serverTLS("c", "elsewhere.test"), nil)
	startReplica(t, "d", second, serverTLS("d", "elsewhere.test"), nil)
	wrong := dial(config.TLS{CAFile: caFile})
	if _, err := whoAnswers(t.Context(), wrong); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a certificate for another name: %v, want UNAVAILABLE for the certificate", err)
	}
	named := dial(config.TLS{CAFile: caFile, ServerName: "elsewhere.test"})
	waitAllAnswer(t, named, "c", "d")
}

// serverFor issues a server certificate for the DNS name.
func (ca *testCA) serverFor(t *testing.T, dnsName string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: dnsName}, DNSNames: []string{dnsName},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// TestBalancedTargetFindsNewReplica: a replica added to DNS gets calls
// once the servers' connection age has sent the client to resolve the
// name again, with no other event. The age here is half a second (the
// grpc section's validation keeps deployments at 10s or more), and gRPC's
// floor between two DNS resolutions, 30s, is lowered for the test.
func TestBalancedTargetFindsNewReplica(t *testing.T) {
	grpcdns.SetMinResolutionInterval(50 * time.Millisecond)
	t.Cleanup(func() { grpcdns.SetMinResolutionInterval(30 * time.Second) })
	const name = "grow.switchboard.test"
	dns, err := dnstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dns.Close() })
	first, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := first.Addr().(*net.TCPAddr).Port
	second, err := net.Listen("tcp", fmt.Sprintf("127.0.0.2:%d", port))
	if err != nil {
		t.Fatalf("this test needs 127.0.0.2 on the loopback interface: %v", err)
	}
	aged := rpc.ConnectionOptions(config.GRPC{MaxConnectionAge: config.Duration(500 * time.Millisecond), MaxConnectionAgeGrace: config.Duration(time.Second)})
	startReplicaWith(t, "a", first, aged)
	startReplicaWith(t, "b", second, aged)
	dns.Set(name, netip.MustParseAddr("127.0.0.1"))

	conn, err := rpc.Dial(config.Endpoint{Address: fmt.Sprintf("dns://%s/%s:%d", dns.Addr(), name, port), Token: replicaToken}, config.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := indexerv1.NewIndexerServiceClient(conn)
	if counts := answeredBy(t, c, 20); counts["a"] != 20 {
		t.Fatalf("with only a in DNS: answered %v", counts)
	}
	dns.Set(name, netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2"))
	waitAllAnswer(t, c, "a", "b")
	if counts := answeredBy(t, c, 100); counts["a"] < 40 || counts["b"] < 40 {
		t.Errorf("with both in DNS: answered %v; want about half each", counts)
	}
	// And a replica removed from DNS stops getting calls once the name is
	// resolved again, though it still runs.
	dns.Set(name, netip.MustParseAddr("127.0.0.2"))
	testkit.Eventually(t, "a, out of DNS, stops getting calls", 20*time.Second, func() error {
		if counts := answeredBy(t, c, 10); counts["a"] > 0 {
			return fmt.Errorf("a answered %d of 10", counts["a"])
		}
		return nil
	})
}
