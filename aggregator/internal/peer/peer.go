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
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/rpc"
)

// ErrNotAPeer: a requestState names an owner outside the peer set.
var ErrNotAPeer = errors.New("the held call's owner is not a known aggregator peer")

// dnsTTL is how long a resolution of peers.dns is trusted: a new replica
// becomes a valid owner within it. A miss resolves again sooner, but at
// most once per minResolveInterval, and concurrent misses share one
// lookup: requestStates naming unknown owners cannot turn into a flood of
// DNS queries.
const (
	dnsTTL             = 5 * time.Second
	minResolveInterval = time.Second
	resolveTimeout     = 5 * time.Second
)

// Forwarder knows this replica's address and its peers, and forwards
// retries to them. A nil Forwarder has no peers: every held call is local.
type Forwarder struct {
	self      string
	peers     config.AggregatorPeers
	tls       config.TLS
	log       *slog.Logger
	lookupIPs func(ctx context.Context, host string) ([]string, error)
	now       func() time.Time

	mu         sync.Mutex
	resolved   []string // peers.dns's addresses (host:port), the last good resolution
	resolvedAt time.Time
	// triedAt is the last lookup's start; resolving is closed when the
	// lookup in flight (if any) ends.
	triedAt   time.Time
	resolving chan struct{}
	conns     map[string]*peerConn
}

// peerConn is a connection to a peer and the forwarded calls on it.
type peerConn struct {
	*grpc.ClientConn
	inFlight int
}

// New returns the forwarder of the replica advertised as self, or nil when
// no peers are configured.
func New(self string, peers config.AggregatorPeers, tls config.TLS, log *slog.Logger) *Forwarder {
	if !peers.Enabled() {
		return nil
	}
	return &Forwarder{self: self, peers: peers, tls: tls, log: log, lookupIPs: net.DefaultResolver.LookupHost, now: time.Now, conns: map[string]*peerConn{}}
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
	fresh := f.now().Sub(f.resolvedAt) < dnsTTL
	resolved := f.resolved
	f.mu.Unlock()
	if !fresh || !slices.Contains(resolved, addr) {
		// A miss resolves again (rate-limited): the owner may be a replica
		// started after the last resolution.
		resolved = f.resolve(ctx)
	}
	return slices.Contains(resolved, addr)
}

// resolve looks peers.dns up, unless a lookup is in flight (it waits for
// that one) or one started within minResolveInterval, and returns the last
// good resolution: a failed lookup keeps the one before.
func (f *Forwarder) resolve(ctx context.Context) []string {
	f.mu.Lock()
	if wait := f.resolving; wait != nil {
		f.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.resolved
	}
	if !f.triedAt.IsZero() && f.now().Sub(f.triedAt) < minResolveInterval {
		defer f.mu.Unlock()
		return f.resolved
	}
	done := make(chan struct{})
	f.resolving, f.triedAt = done, f.now()
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.resolving = nil
		f.mu.Unlock()
		close(done)
	}()
	// The lookup is shared, so it does not end with this caller's request.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resolveTimeout)
	defer cancel()
	host, port, _ := net.SplitHostPort(f.peers.DNS)
	ips, err := f.lookupIPs(lctx, host)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.log.WarnContext(ctx, "aggregator peers not resolved; keeping the last resolution", "dns", f.peers.DNS, "err", err, "kept", len(f.resolved))
		return f.resolved
	}
	addrs := make([]string, len(ips))
	for i, ip := range ips {
		addrs[i] = net.JoinHostPort(ip, port)
	}
	f.resolved, f.resolvedAt = addrs, f.now()
	return addrs
}

// maxConns bounds the open peer connections: replicas come and go under
// a DNS name. When it is reached, connections without forwarded calls in
// flight are closed, those to addresses no longer configured or resolved
// first; a connection with calls in flight is never closed under them (so
// the bound is passed only while every connection is busy).
const maxConns = 64

// conn returns the connection to peer addr, dialled once, counting a
// forwarded call on it until release.
func (f *Forwarder) conn(addr string) (c *peerConn, release func(), err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.conns[addr]
	if !ok {
		if len(f.conns) >= maxConns {
			f.evict()
		}
		cc, err := rpc.Dial(config.Endpoint{Address: addr, Token: f.peers.Token}, f.tls)
		if err != nil {
			return nil, nil, err
		}
		c = &peerConn{ClientConn: cc}
		f.conns[addr] = c
	}
	c.inFlight++
	return c, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		c.inFlight--
	}, nil
}

// evict closes idle connections until there is room for one more: first
// those to addresses neither configured nor in the last resolution, then
// any. Call with f.mu held.
func (f *Forwarder) evict() {
	for _, stale := range []bool{true, false} {
		for a, c := range f.conns {
			if len(f.conns) < maxConns {
				return
			}
			current := slices.Contains(f.peers.Addresses, a) || slices.Contains(f.resolved, a)
			if c.inFlight == 0 && (!stale || !current) {
				_ = c.Close()
				delete(f.conns, a)
			}
		}
	}
}

// Resume forwards the retry req of principal p to owner, which must be a
// known peer. With onNotification set (a streamed retry) it asks with
// ResumeHeldCallStream and hands it each notification the owner relays,
// before the result; an owner that does not serve that RPC (an older
// replica) is asked with ResumeHeldCall, without notifications. Its error
// is the peer's gRPC status, unchanged, or ErrNotAPeer, or a dial failure.
func (f *Forwarder) Resume(ctx context.Context, owner string, p *commonv1.Principal, req *aggregatorv1.CallToolRequest, onNotification func(*aggregatorv1.Notification)) (*aggregatorv1.CallToolResponse, error) {
	if f == nil || !f.known(ctx, owner) {
		return nil, ErrNotAPeer
	}
	conn, release, err := f.conn(owner)
	if err != nil {
		return nil, err
	}
	defer release()
	client := aggregatorv1.NewAggregatorServiceClient(conn)
	if onNotification != nil {
		resp, err := resumeStreamed(ctx, client, p, req, onNotification)
		if status.Code(err) != codes.Unimplemented {
			return resp, err
		}
	}
	resp, err := client.ResumeHeldCall(ctx, &aggregatorv1.ResumeHeldCallRequest{Principal: p, Call: req})
	if err != nil {
		return nil, err
	}
	return resp.GetResult(), nil
}

// resumeStreamed asks with ResumeHeldCallStream.
func resumeStreamed(ctx context.Context, client aggregatorv1.AggregatorServiceClient, p *commonv1.Principal, req *aggregatorv1.CallToolRequest, onNotification func(*aggregatorv1.Notification)) (*aggregatorv1.CallToolResponse, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.ResumeHeldCallStream(ctx, &aggregatorv1.ResumeHeldCallStreamRequest{Principal: p, Call: req})
	if err != nil {
		return nil, err
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the peer ended the stream without a result")
			}
			return nil, err
		}
		if n := ev.GetNotification(); n != nil {
			onNotification(n)
			continue
		}
		if r := ev.GetResult(); r != nil {
			return r, nil
		}
	}
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
