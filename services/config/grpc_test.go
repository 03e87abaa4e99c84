package config

import (
	"strings"
	"testing"
	"time"
)

func TestGRPCDefaultsAndValidate(t *testing.T) {
	d := GRPC{}.WithDefaults()
	if time.Duration(d.MaxConnectionAge) != 5*time.Minute || time.Duration(d.MaxConnectionAgeGrace) != time.Hour ||
		time.Duration(d.KeepaliveTime) != 30*time.Second || time.Duration(d.KeepaliveTimeout) != 10*time.Second {
		t.Errorf("defaults: %+v", d)
	}
	if err := (GRPC{}).Validate(); err != nil {
		t.Errorf("an empty section: %v", err)
	}
	if err := d.Validate(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
	for _, tc := range []struct {
		g    GRPC
		want string
	}{
		{GRPC{MaxConnectionAge: Duration(time.Second)}, "grpc.maxConnectionAge: is under 10s"},
		{GRPC{KeepaliveTime: Duration(5 * time.Second)}, "grpc.keepaliveTime: is under 10s"},
		{GRPC{MaxConnectionAgeGrace: Duration(-time.Second)}, "grpc.maxConnectionAgeGrace: is negative"},
		{GRPC{KeepaliveTimeout: Duration(-time.Second)}, "grpc.keepaliveTimeout: is negative"},
		{GRPC{MaxConcurrentStreams: -1}, "grpc.maxConcurrentStreams: want 1024 to"},
		{GRPC{MaxConcurrentStreams: 100}, "grpc.maxConcurrentStreams: want 1024 to"},
		{GRPC{MaxConcurrentStreams: 1 << 33}, "grpc.maxConcurrentStreams: want 1024 to"},
	} {
		if err := tc.g.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.g, err, tc.want)
		}
	}
}

// The servers' bound on a connection's streams leaves a gateway replica
// room for its calls beside one aggregator watch per open notification
// stream: gateway.streams.maxOpen is at most half of it.
func TestMaxConcurrentStreamsLeavesTheGatewayRoom(t *testing.T) {
	if d := (GRPC{}).WithDefaults(); d.MaxConcurrentStreams != DefaultMaxConcurrentStreams || DefaultMaxStreams > DefaultMaxConcurrentStreams/2 {
		t.Fatalf("default maxConcurrentStreams %d, gateway.streams.maxOpen %d", d.MaxConcurrentStreams, DefaultMaxStreams)
	}
	for _, tc := range []struct {
		grpc, maxOpen int
		ok            bool
	}{{0, DefaultMaxStreams, true}, {0, DefaultMaxConcurrentStreams/2 + 1, false}, {40000, 20000, true}, {40000, 20001, false}} {
		c := &Config{GRPC: GRPC{MaxConcurrentStreams: tc.grpc}, Gateway: Gateway{Aggregator: Endpoint{Address: "agg:50051", Token: "t"}, Streams: StreamLimits{MaxOpen: tc.maxOpen}}}
		err := c.ValidateGateway()
		if tc.ok && err != nil || !tc.ok && (err == nil || !strings.Contains(err.Error(), "gateway.streams.maxOpen")) {
			t.Errorf("maxConcurrentStreams %d, maxOpen %d: %v", tc.grpc, tc.maxOpen, err)
		}
	}
}

func TestEndpointAddressForms(t *testing.T) {
	for _, ok := range []string{"agg:50051", "127.0.0.1:1", "dns:///agg-headless:50051", "dns://10.0.0.10:53/agg-headless.ns.svc.cluster.local:50051", "dns:///[::1]:5"} {
		e := Endpoint{Address: ok}
		if err := e.ValidateAddress("x"); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	if (Endpoint{Address: "agg:50051"}).Balanced() || !(Endpoint{Address: "dns:///agg:50051"}).Balanced() {
		t.Error("Balanced: only dns: targets balance")
	}
	for addr, want := range map[string]string{
		"dns:agg:50051":      "write dns:///host:port",
		"dns:///agg":         "must be host:port",
		"dns:///:50051":      "no host name",
		"dns:///agg:http":    "the port is not a number",
		"dns:///agg:0":       "the port is not a number",
		"dns://1.2.3.4/agg:": "the port is not a number",
	} {
		err := Endpoint{Address: addr}.ValidateAddress("gateway.aggregator.address")
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "gateway.aggregator.address") {
			t.Errorf("%s: %v, want %q", addr, err, want)
		}
	}
	if err := (Gateway{Aggregator: Endpoint{Address: "dns:///a"}}).Validate(); err == nil {
		t.Error("the gateway accepts a dns: aggregator address without a port")
	}
	if err := (Indexer{Listen: ":0", Database: "postgres://x", Aggregator: Endpoint{Address: "dns:///a"}}).Validate(); err == nil {
		t.Error("the indexer accepts a dns: aggregator address without a port")
	}
}
