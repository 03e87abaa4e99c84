package peer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestOnlyConfiguredPeersAreKnown: an owner is a peer when it is listed or
// when the DNS name resolves to it with the DNS port; nothing else, so a
// requestState cannot point the forwarder anywhere else.
func TestOnlyConfiguredPeersAreKnown(t *testing.T) {
	f := New("10.0.0.1:9090", config.AggregatorPeers{DNS: "agg-headless:9090", Addresses: []string{"agg-static:7000"}, Token: "t"}, config.TLS{}, quiet)
	ips := []string{"10.0.0.1", "10.0.0.2"}
	lookups := 0
	f.lookupIPs = func(_ context.Context, host string) ([]string, error) {
		lookups++
		if host != "agg-headless" {
			t.Errorf("resolved %q", host)
		}
		return ips, nil
	}
	now := time.Now()
	f.now = func() time.Time { return now }
	ctx := context.Background()
	for addr, want := range map[string]bool{
		"10.0.0.2:9090": true, "agg-static:7000": true,
		"10.0.0.2:9091": false, "10.0.0.3:9090": false, "agg-headless:9090": false, "evil.example:9090": false, "": false,
	} {
		if got := f.known(ctx, addr); got != want {
			t.Errorf("known(%q) = %v, want %v", addr, got, want)
		}
	}
	// A replica started after the last resolution is found by resolving
	// again on a miss, once the minimum interval has passed.
	ips = append(ips, "10.0.0.3")
	now = now.Add(minResolveInterval)
	if !f.known(ctx, "10.0.0.3:9090") {
		t.Error("a new replica is not known after a fresh resolution")
	}
	f.lookupIPs = func(context.Context, string) ([]string, error) { lookups++; return nil, errors.New("no DNS") }
	now = now.Add(dnsTTL)
	if f.known(ctx, "10.0.0.9:9090") {
		t.Error("an address is known while DNS fails")
	}
	// A failed lookup keeps the last good resolution.
	if !f.known(ctx, "10.0.0.2:9090") {
		t.Error("a resolved peer is forgotten when DNS fails")
	}
	if _, err := f.Resume(ctx, "evil.example:9090", &commonv1.Principal{}, nil, nil); !errors.Is(err, ErrNotAPeer) {
		t.Errorf("Resume to an unknown owner: %v", err)
	}
	if lookups == 0 {
		t.Error("DNS never resolved")
	}
}

func TestNoPeersEverythingIsLocal(t *testing.T) {
	var f *Forwarder = New("10.0.0.1:9090", config.AggregatorPeers{}, config.TLS{}, quiet)
	if f != nil || !f.Local("") || f.Local("10.0.0.2:9090") || f.Self() != "" {
		t.Fatalf("a forwarder without peers: %+v", f)
	}
	if _, err := f.Resume(context.Background(), "10.0.0.2:9090", nil, nil, nil); !errors.Is(err, ErrNotAPeer) {
		t.Fatalf("Resume without peers: %v", err)
	}
	g := New("10.0.0.1:9090", config.AggregatorPeers{Addresses: []string{"10.0.0.2:9090"}, Token: "t"}, config.TLS{}, quiet)
	if !g.Local("") || !g.Local("10.0.0.1:9090") || g.Local("10.0.0.2:9090") {
		t.Fatal("Local does not follow the owner")
	}
}

// Misses resolve at most once per minResolveInterval, and concurrent misses
// share one lookup.
func TestResolutionsAreRateLimited(t *testing.T) {
	f := New("10.0.0.1:9090", config.AggregatorPeers{DNS: "agg-headless:9090", Token: "t"}, config.TLS{}, quiet)
	now := time.Now()
	f.now = func() time.Time { return now }
	var mu sync.Mutex
	lookups := 0
	release := make(chan struct{})
	f.lookupIPs = func(context.Context, string) ([]string, error) {
		mu.Lock()
		lookups++
		mu.Unlock()
		<-release
		return []string{"10.0.0.2"}, nil
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() { f.known(context.Background(), fmt.Sprintf("10.0.9.%d:9090", i)) })
	}
	testkit.Eventually(t, "a lookup started", 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return lookups > 0
	})
	close(release)
	wg.Wait()
	for i := range 20 {
		f.known(context.Background(), fmt.Sprintf("10.0.8.%d:9090", i))
	}
	if lookups != 1 {
		t.Fatalf("%d lookups for 40 misses within the interval, want 1", lookups)
	}
	now = now.Add(minResolveInterval)
	f.known(context.Background(), "10.0.7.1:9090")
	if lookups != 2 {
		t.Fatalf("%d lookups after the interval, want 2", lookups)
	}
}

// At the connection bound, idle connections to peers no longer resolved go
// first, and a connection with a forwarded call in flight is never closed.
func TestConnectionBoundKeepsCallsInFlight(t *testing.T) {
	f := New("10.0.0.1:9090", config.AggregatorPeers{DNS: "agg-headless:9090", Token: "t"}, config.TLS{}, quiet)
	defer f.Close()
	addr := func(i int) string { return fmt.Sprintf("10.0.1.%d:9090", i) }
	f.mu.Lock()
	for i := range maxConns {
		f.resolved = append(f.resolved, addr(i))
	}
	f.resolved = slices.DeleteFunc(f.resolved, func(a string) bool { return a == addr(5) })
	f.mu.Unlock()
	busy, _, err := f.conn(addr(0))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < maxConns; i++ {
		_, done, err := f.conn(addr(i))
		if err != nil {
			t.Fatal(err)
		}
		done()
	}
	if _, _, err := f.conn("10.0.2.1:9090"); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.conns) != maxConns || f.conns[addr(0)] != busy || f.conns[addr(5)] != nil {
		t.Fatalf("after the bound: %d connections, busy one kept %v, unresolved one dropped %v",
			len(f.conns), f.conns[addr(0)] == busy, f.conns[addr(5)] == nil)
	}
}

// olderPeer serves ResumeHeldCall only, as a replica of the version before
// ResumeHeldCallStream does.
type olderPeer struct {
	aggregatorv1.UnimplementedAggregatorServiceServer
	resumed atomic.Int32
}

func (p *olderPeer) ResumeHeldCall(_ context.Context, req *aggregatorv1.ResumeHeldCallRequest) (*aggregatorv1.ResumeHeldCallResponse, error) {
	p.resumed.Add(1)
	return &aggregatorv1.ResumeHeldCallResponse{Result: &aggregatorv1.CallToolResponse{ResultJson: `{"content":[]}`, Backend: "b"}}, nil
}

// A streamed retry forwarded to a peer that does not serve
// ResumeHeldCallStream (UNIMPLEMENTED: an older replica during a rolling
// upgrade) is resumed with ResumeHeldCall, without notifications, rather
// than failed.
func TestStreamedResumeFallsBackToAnOlderPeer(t *testing.T) {
	srv := grpc.NewServer()
	old := &olderPeer{}
	aggregatorv1.RegisterAggregatorServiceServer(srv, old)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	owner := lis.Addr().String()
	f := New("127.0.0.1:1", config.AggregatorPeers{Addresses: []string{owner}, Token: "t"}, config.TLS{}, quiet)
	t.Cleanup(f.Close)
	notes := 0
	resp, err := f.Resume(context.Background(), owner, &commonv1.Principal{Subject: "alice"}, &aggregatorv1.CallToolRequest{Name: "t"},
		func(*aggregatorv1.Notification) { notes++ })
	if err != nil || resp.GetBackend() != "b" || old.resumed.Load() != 1 || notes != 0 {
		t.Fatalf("resume: %v %v, %d unary resumes, %d notifications", resp, err, old.resumed.Load(), notes)
	}
}
