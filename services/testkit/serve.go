package testkit

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// Server serves fakes over gRPC on a loopback port.
type Server struct {
	// Addr is the address it listens on; Start listens there again.
	Addr string

	t        testing.TB
	creds    []config.ServiceCredential
	register []func(grpc.ServiceRegistrar)
	mu       sync.Mutex
	stop     func()
}

// Serve serves what register registers (FakeAggregator.Register,
// FakeIndexer.Register) on a loopback port with the services' own gRPC
// server (services/rpc): callers authenticate with the service
// credentials creds, and health reports SERVING. It serves until Stop or
// the end of the test.
func Serve(t testing.TB, creds []config.ServiceCredential, register ...func(grpc.ServiceRegistrar)) *Server {
	t.Helper()
	s := &Server{Addr: "127.0.0.1:0", t: t, creds: creds, register: register}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// Start serves again at Addr after Stop, as a restarted process does.
func (s *Server) Start() {
	s.t.Helper()
	lis, err := net.Listen("tcp", s.Addr)
	if err != nil {
		s.t.Fatal(err)
	}
	srv, err := rpc.NewServer(svcauth.NewAuthenticator(s.creds), config.TLS{}, slog.New(slog.DiscardHandler))
	if err != nil {
		s.t.Fatal(err)
	}
	for _, register := range s.register {
		register(srv)
	}
	srv.SetServing()
	done := make(chan struct{})
	go func() { _ = srv.ServeListener(context.Background(), lis, 0); close(done) }()
	s.Addr = lis.Addr().String()
	s.mu.Lock()
	s.stop = func() { srv.Stop(); <-done }
	s.mu.Unlock()
}

// Stop stops serving at once, as when the process dies: the listener and
// every connection close under the calls in flight.
func (s *Server) Stop() {
	s.mu.Lock()
	stop := s.stop
	s.stop = nil
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
}
