package rpc

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	// The client side of gRPC health checking: with the service config's
	// healthCheckConfig, a balancing channel watches every address's
	// health and picks only those that report SERVING.
	_ "google.golang.org/grpc/health"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// Spreading calls over replicas.
//
// A dns: target (dns:///switchboard-aggregator-headless:50051) is resolved
// to every address of the name, and the channel keeps one connection to
// each and sends every call (a unary call, or a whole stream) to the next
// ready one in turn (round_robin). A ready connection is one whose server
// reports SERVING on the standard health service (grpc.health.v1.Health,
// the server as a whole, service name ""), watched over a stream of its
// own: a replica that is starting, not ready or draining (NOT_SERVING),
// whose connection broke, or that went away gets no new calls. When every
// address has failed, calls fail UNAVAILABLE without waiting, as with a
// single peer that is down.
//
// The name is resolved again whenever a connection is lost or ends (a
// replica stops, or its server's MaxConnectionAge sends GOAWAY), at most
// once every 30 seconds (gRPC's minimum between DNS resolutions). That is
// how replicas added later get calls: within about maxConnectionAge of
// starting, or 30 seconds if that is longer. gRPC ignores DNS TTLs. A stream stays on the replica it started on; when that
// replica goes, the stream fails and the caller opens it again, on a
// replica that is ready.
//
// A plain host:port target connects to one address at a time (gRPC's
// pick_first) without health checking, as it always has; behind a
// ClusterIP Service that is one virtual address, which kube-proxy spreads
// per connection, not per call.
//
// DNS service configs (TXT records) are ignored: the balancing is this
// package's, not the DNS server's.

// balancedServiceConfig is the service config of a dns: target.
const balancedServiceConfig = `{
  "loadBalancingConfig": [{"round_robin": {}}],
  "healthCheckConfig": {"serviceName": ""}
}`

// targetOptions are the dial options that depend on the form of ep's
// address.
func targetOptions(ep config.Endpoint) []grpc.DialOption {
	if !ep.Balanced() {
		return nil
	}
	return []grpc.DialOption{
		grpc.WithDisableServiceConfig(),
		grpc.WithDefaultServiceConfig(balancedServiceConfig),
	}
}

// PickFirst makes a connection to a dns: target send every call to one
// of its addresses (moving to another when that one fails) instead of
// spreading them: for a sequence of calls that must see one replica's
// state, such as the pages of one listing. Pass it after the others.
func PickFirst() grpc.DialOption {
	return grpc.WithDefaultServiceConfig(`{"loadBalancingConfig": [{"pick_first": {}}]}`)
}

// ConnectionOptions are the server options that bound a client
// connection's age and the streams it may have open at once, and set the
// keep-alive pings, from the grpc section. NewServer applies the
// defaults; pass these among its extra options to apply a deployment's
// values.
func ConnectionOptions(c config.GRPC) []grpc.ServerOption {
	c = c.WithDefaults()
	return []grpc.ServerOption{
		grpc.MaxConcurrentStreams(uint32(c.MaxConcurrentStreams)),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionAge:      time.Duration(c.MaxConnectionAge),
			MaxConnectionAgeGrace: time.Duration(c.MaxConnectionAgeGrace),
			Time:                  time.Duration(c.KeepaliveTime),
			Timeout:               time.Duration(c.KeepaliveTimeout),
		}),
		// Clients ping at KeepaliveTime, at least MinKeepaliveTime
		// (grpc.Validate), idle or not: allow exactly that.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: config.MinKeepaliveTime, PermitWithoutStream: true}),
	}
}

// ClientKeepalive is the dial option of the keep-alive pings a client
// sends, from the grpc section; Dial applies the defaults without it.
func ClientKeepalive(c config.GRPC) grpc.DialOption {
	c = c.WithDefaults()
	return grpc.WithKeepaliveParams(keepalive.ClientParameters{
		Time:                time.Duration(c.KeepaliveTime),
		Timeout:             time.Duration(c.KeepaliveTimeout),
		PermitWithoutStream: true,
	})
}
