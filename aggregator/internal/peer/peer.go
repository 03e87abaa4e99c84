// Package peer forwards the retry of a held call to the aggregator replica
// that holds it. A Legacy backend's call held for the client's input lives
// in one replica's memory (backend.CallToolAsking); its requestState names
// that replica by its advertised address. A replica that receives the
// retry and is not the owner forwards it with ResumeHeldCall, but only to
// an address in its configured peer set (aggregator.peers): the state is
// sealed by the gateway, and is still never trusted to choose what is
// dialled.
package peer

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/rpc"
)

// ErrNotAPeer: a requestState names an owner outside the peer set.
var ErrNotAPeer = errors.New("the held call's owner is not a known aggregator peer")

// dnsTTL is how long a resolution of peers.dns is trusted: a new replica
// becomes a valid owner within it.
const dnsTTL = 5 * time.Second

// Forwarder knows this replica's address and its peers, and forwards
// retries to them. A nil Forwarder has no peers: every held call is local.
type Forwarder struct {
	self      string
	peers     config.AggregatorPeers
	tls       config.TLS
	log       *slog.Logger
	lookupIPs func(ctx context.Context, host string) ([]string, error)

	mu         sync.Mutex
	resolved   []string // peers.dns's addresses (host:port) at resolvedAt
	resolvedAt time.Time
	conns      map[string]*grpc.ClientConn
}

// New returns the forwarder of the replica advertised as self, or nil when
// no peers are configured.
func New(self string, peers config.AggregatorPeers, tls config.TLS, log *slog.Logger) *Forwarder {
	if !peers.Enabled() {
		return nil
	}
	return &Forwarder{self: self, peers: peers, tls: tls, log: log, lookupIPs: net.DefaultResolver.LookupHost, conns: map[string]*grpc.ClientConn{}}
}

// Self is the address this replica advertises ("" without peers).
func (f *Forwarder) Self() string {
	if f == nil {
		return ""
	}
	return f.self
}

// Local reports whether a held call naming owner lives here: it names no
// owner, or this replica.
func (f *Forwarder) Local(owner string) bool { return owner == "" || owner == f.Self() }

// known reports whether addr is one of the configured peers.
func (f *Forwarder) known(ctx context.Context, addr string) bool {
	if slices.Contains(f.peers.Addresses, addr) {
		return true
	}
	if f.peers.DNS == "" {
		return false
	}
	f.mu.Lock()
	fresh := time.Since(f.resolvedAt) < dnsTTL
	resolved := f.resolved
	f.mu.Unlock()
	if !fresh || !slices.Contains(resolved, addr) {
		// A miss re-resolves at once: the owner may be a replica started
		// after the last resolution.
		resolved = f.resolve(ctx)
	}
	return slices.Contains(resolved, addr)
}

// resolve looks peers.dns up and returns its addresses with its port.
func (f *Forwarder) resolve(ctx context.Context) []string {
	host, port, _ := net.SplitHostPort(f.peers.DNS)
	ips, err := f.lookupIPs(ctx, host)
	if err != nil {
		f.log.WarnContext(ctx, "aggregator peers not resolved", "dns", f.peers.DNS, "err", err)
		return nil
	}
	addrs := make([]string, len(ips))
	for i, ip := range ips {
		addrs[i] = net.JoinHostPort(ip, port)
	}
	f.mu.Lock()
	f.resolved, f.resolvedAt = addrs, time.Now()
	f.mu.Unlock()
	return addrs
}

// maxConns bounds the open peer connections: replicas come and go under
// a DNS name, and connections to ones long gone are dropped when it is
// reached.
const maxConns = 64

// conn returns the connection to peer addr, dialled once.
func (f *Forwarder) conn(addr string) (*grpc.ClientConn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.conns[addr]; ok {
		return c, nil
	}
	if len(f.conns) >= maxConns {
		for a, c := range f.conns {
			_ = c.Close()
			delete(f.conns, a)
		}
	}
	c, err := rpc.Dial(config.Endpoint{Address: addr, Token: f.peers.Token}, f.tls)
	if err != nil {
		return nil, err
	}
	f.conns[addr] = c
	return c, nil
}

// Resume forwards the retry req of principal p to owner, which must be a
// known peer. Its error is the peer's gRPC status, unchanged, or
// ErrNotAPeer, or a dial failure.
func (f *Forwarder) Resume(ctx context.Context, owner string, p *commonv1.Principal, req *aggregatorv1.CallToolRequest) (*aggregatorv1.CallToolResponse, error) {
	if f == nil || !f.known(ctx, owner) {
		return nil, ErrNotAPeer
	}
	conn, err := f.conn(owner)
	if err != nil {
		return nil, err
	}
	resp, err := aggregatorv1.NewAggregatorServiceClient(conn).ResumeHeldCall(ctx, &aggregatorv1.ResumeHeldCallRequest{Principal: p, Call: req})
	if err != nil {
		return nil, err
	}
	return resp.GetResult(), nil
}

// Close closes the connections to peers.
func (f *Forwarder) Close() {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for addr, c := range f.conns {
		_ = c.Close()
		delete(f.conns, addr)
	}
}
