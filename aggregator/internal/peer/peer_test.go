package peer

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/switchboard-mcp/switchboard/services/config"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
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
	// again at once.
	ips = append(ips, "10.0.0.3")
	if !f.known(ctx, "10.0.0.3:9090") {
		t.Error("a new replica is not known after a fresh resolution")
	}
	f.lookupIPs = func(context.Context, string) ([]string, error) { return nil, errors.New("no DNS") }
	if f.known(ctx, "10.0.0.9:9090") {
		t.Error("an address is known while DNS fails")
	}
	if _, err := f.Resume(ctx, "evil.example:9090", &commonv1.Principal{}, nil); !errors.Is(err, ErrNotAPeer) {
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
	if _, err := f.Resume(context.Background(), "10.0.0.2:9090", nil, nil); !errors.Is(err, ErrNotAPeer) {
		t.Fatalf("Resume without peers: %v", err)
	}
	g := New("10.0.0.1:9090", config.AggregatorPeers{Addresses: []string{"10.0.0.2:9090"}, Token: "t"}, config.TLS{}, quiet)
	if !g.Local("") || !g.Local("10.0.0.1:9090") || g.Local("10.0.0.2:9090") {
		t.Fatal("Local does not follow the owner")
	}
}
