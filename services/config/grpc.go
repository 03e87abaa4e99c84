package config

import (
	"errors"
	"math"
	"net"
	"strconv"
	"strings"
	"time"
)

// GRPC tunes the connections between the services: how long a server
// keeps a client's connection before asking it to reconnect (so that the
// client resolves its target again and spreads over the replicas it finds
// then), and the keep-alive pings both sides send. The defaults suit a
// cluster; every service reads the same values.
type GRPC struct {
	// MaxConnectionAge is how long a server keeps a client connection
	// before it sends GOAWAY (plus or minus gRPC's 10% jitter): calls
	// already running carry on, new ones go on a new connection, and a
	// balancing client (a dns:/// target) resolves its target again then,
	// which is how it finds replicas added since (default 5m).
	MaxConnectionAge Duration `yaml:"maxConnectionAge"`
	// MaxConnectionAgeGrace is how long calls and streams still running
	// on a connection past its age get before the connection is closed
	// under them (default 1h). Long: a catalog or revocation watch cut
	// here is reopened on another connection, but the notification streams
	// above it then tell their clients that lists may have changed.
	MaxConnectionAgeGrace Duration `yaml:"maxConnectionAgeGrace"`
	// KeepaliveTime is how long a connection may be quiet before either
	// side pings the other (default 30s, at least 10s: servers refuse
	// pings more frequent than that). KeepaliveTimeout is how long a ping
	// waits for its answer before the connection is taken for dead and
	// closed (default 10s); a client's calls then go to the other
	// replicas.
	KeepaliveTime    Duration `yaml:"keepaliveTime"`
	KeepaliveTimeout Duration `yaml:"keepaliveTimeout"`
	// MaxConcurrentStreams bounds the calls and streams one client
	// connection may have open at once on a server (HTTP/2
	// SETTINGS_MAX_CONCURRENT_STREAMS; default 16384). A client past it
	// waits for one to end, so it must leave room: a gateway replica holds
	// one aggregator catalog watch per open MCP notification stream
	// (gateway.streams.maxOpen) beside its calls, on one connection to
	// each aggregator replica.
	MaxConcurrentStreams int `yaml:"maxConcurrentStreams"`
}

// Defaults and bounds of the grpc section.
const (
	DefaultMaxConnectionAge      = 5 * time.Minute
	DefaultMaxConnectionAgeGrace = time.Hour
	DefaultKeepaliveTime         = 30 * time.Second
	DefaultKeepaliveTimeout      = 10 * time.Second
	// MinKeepaliveTime is the servers' keep-alive enforcement: a client
	// that pings more often is sent GOAWAY (too_many_pings).
	MinKeepaliveTime = 10 * time.Second
	// MinMaxConnectionAge keeps connections from being churned.
	MinMaxConnectionAge = 10 * time.Second
	// DefaultMaxConcurrentStreams leaves a gateway replica at its
	// default gateway.streams.maxOpen (4096) room for three times as
	// many calls beside its watches; MinMaxConcurrentStreams is the least
	// maxConcurrentStreams may be.
	DefaultMaxConcurrentStreams = 16384
	MinMaxConcurrentStreams     = 1024
	// MaxServiceMessageBytes is the largest message a service's gRPC
	// server takes (services/rpc).
	MaxServiceMessageBytes = 16 << 20
	// MaxRequestIDBytes bounds a JSON-RPC request id, and a progress
	// token (its like: a JSON string or number), that a service takes
	// from a request to relay.
	MaxRequestIDBytes = 256
)

// WithDefaults returns the section with every unset value at its default.
func (g GRPC) WithDefaults() GRPC {
	g.MaxConnectionAge = Duration(g.MaxConnectionAge.Or(DefaultMaxConnectionAge))
	g.MaxConnectionAgeGrace = Duration(g.MaxConnectionAgeGrace.Or(DefaultMaxConnectionAgeGrace))
	g.KeepaliveTime = Duration(g.KeepaliveTime.Or(DefaultKeepaliveTime))
	g.KeepaliveTimeout = Duration(g.KeepaliveTimeout.Or(DefaultKeepaliveTimeout))
	g.MaxConcurrentStreams = orInt(g.MaxConcurrentStreams, DefaultMaxConcurrentStreams)
	return g
}

// Validate reports values no connection could work with. Unset (zero)
// values take their defaults.
func (g GRPC) Validate() error {
	var errs []error
	for _, d := range []struct {
		key string
		v   Duration
	}{
		{"maxConnectionAge", g.MaxConnectionAge}, {"maxConnectionAgeGrace", g.MaxConnectionAgeGrace},
		{"keepaliveTime", g.KeepaliveTime}, {"keepaliveTimeout", g.KeepaliveTimeout},
	} {
		if d.v < 0 {
			errs = append(errs, keyErr("grpc."+d.key, "is negative"))
		}
	}
	if g.MaxConnectionAge > 0 && time.Duration(g.MaxConnectionAge) < MinMaxConnectionAge {
		errs = append(errs, keyErr("grpc.maxConnectionAge", "is under %v: connections would be churned", MinMaxConnectionAge))
	}
	if g.KeepaliveTime > 0 && time.Duration(g.KeepaliveTime) < MinKeepaliveTime {
		errs = append(errs, keyErr("grpc.keepaliveTime", "is under %v: servers would refuse the pings (too_many_pings)", MinKeepaliveTime))
	}
	if n := int64(g.MaxConcurrentStreams); n < 0 || (n > 0 && n < MinMaxConcurrentStreams) || n > math.MaxUint32 {
		errs = append(errs, keyErr("grpc.maxConcurrentStreams", "want %d to %d (or unset: %d)", MinMaxConcurrentStreams, uint32(math.MaxUint32), DefaultMaxConcurrentStreams))
	}
	return errors.Join(errs...)
}

// validateGatewayStreams checks that a gateway replica holding maxOpen
// notification streams, each with a catalog watch on its one connection
// to an aggregator replica, leaves as much room again for its calls under
// the servers' maxConcurrentStreams: past it the calls would wait behind
// the watches.
func (g GRPC) validateGatewayStreams(maxOpen int) error {
	if limit := g.WithDefaults().MaxConcurrentStreams; maxOpen > limit/2 {
		return keyErr("gateway.streams.maxOpen", "is over half of grpc.maxConcurrentStreams (default %d): each open stream holds an aggregator watch on the connection its calls take; raise grpc.maxConcurrentStreams to at least twice maxOpen", DefaultMaxConcurrentStreams)
	}
	return nil
}

// DNSScheme starts a target that is resolved to every address of a name
// and balanced over them: dns:///host:port, or dns://server/host:port to
// ask a given DNS server.
const DNSScheme = "dns:"

// Balanced reports whether the endpoint's address is a dns: target, whose
// calls are spread over every healthy address the name resolves to. A
// plain host:port connects to one address at a time.
func (e Endpoint) Balanced() bool { return strings.HasPrefix(e.Address, DNSScheme) }

// ValidateAddress checks a dns: target's form (key names it in the
// error). Other addresses are left to gRPC, as they always were.
func (e Endpoint) ValidateAddress(key string) error {
	if !e.Balanced() {
		return nil
	}
	rest := strings.TrimPrefix(e.Address, DNSScheme)
	if !strings.HasPrefix(rest, "//") {
		return keyErr(key, "write dns:///host:port (or dns://dns-server/host:port)")
	}
	_, hostPort, _ := strings.Cut(rest[2:], "/")
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		return keyErr(key, "the name after dns:/// must be host:port (%s)", addrProblem(err))
	}
	if host == "" {
		return keyErr(key, "no host name")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return keyErr(key, "the port is not a number from 1 to 65535")
	}
	return nil
}
