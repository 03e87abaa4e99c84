package multiagg

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// rrProxy is a tiny round-robin gRPC target: every call it receives goes,
// whole and unchanged, to the next of its upstream aggregators, as a
// client-side load balancer spreads calls. route may pin some methods.
type rrProxy struct {
	addr      string
	upstreams []*grpc.ClientConn
	next      atomic.Uint64
	// route, when set, picks the upstream of a method (-1: round robin).
	route atomic.Pointer[func(method string) int]

	mu    sync.Mutex
	calls map[string][]int // method → upstream of each call, in order
}

// startRRProxy serves a round-robin proxy over upstream addresses.
func startRRProxy(t *testing.T, upstreams ...string) *rrProxy {
	t.Helper()
	p := &rrProxy{calls: map[string][]int{}}
	for _, u := range upstreams {
		conn, err := grpc.NewClient(u, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		p.upstreams = append(p.upstreams, conn)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = lis.Addr().String()
	srv := grpc.NewServer(grpc.UnknownServiceHandler(p.forward), grpc.ForceServerCodec(rawCodec{}))
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return p
}

// pick chooses the upstream of one call and records it.
func (p *rrProxy) pick(method string) int {
	i := -1
	if r := p.route.Load(); r != nil {
		i = (*r)(method)
	}
	if i < 0 {
		i = int((p.next.Add(1) - 1) % uint64(len(p.upstreams)))
	}
	p.mu.Lock()
	p.calls[method] = append(p.calls[method], i)
	p.mu.Unlock()
	return i
}

// callsTo reports how many calls of method went to each upstream.
func (p *rrProxy) callsTo(method string) []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := make([]int, len(p.upstreams))
	for _, i := range p.calls[method] {
		n[i]++
	}
	return n
}

// forward relays one call, any kind of stream, to the chosen upstream.
func (p *rrProxy) forward(_ any, in grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(in)
	md, _ := metadata.FromIncomingContext(in.Context())
	out := metadata.MD{}
	for k, v := range md {
		if !strings.HasPrefix(k, ":") && !strings.HasPrefix(k, "grpc-") && k != "content-type" && k != "user-agent" && k != "te" {
			out[k] = v
		}
	}
	ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(in.Context(), out))
	defer cancel()
	up, err := p.upstreams[p.pick(method)].NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		return err
	}
	go func() {
		for {
			var f frame
			if err := in.RecvMsg(&f); err != nil {
				_ = up.CloseSend()
				return
			}
			if err := up.SendMsg(&f); err != nil {
				return
			}
		}
	}()
	for first := true; ; first = false {
		var f frame
		err := up.RecvMsg(&f)
		if first {
			if h, herr := up.Header(); herr == nil {
				_ = in.SendHeader(h)
			}
		}
		if err != nil {
			in.SetTrailer(up.Trailer())
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := in.SendMsg(&f); err != nil {
			return err
		}
	}
}

// frame is one message, as bytes.
type frame struct{ b []byte }

// rawCodec passes messages through undecoded.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return v.(*frame).b, nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	v.(*frame).b = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }
