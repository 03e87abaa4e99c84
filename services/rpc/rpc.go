// Package rpc builds the gRPC servers and clients every Switchboard service
// uses, so that all of them get the same instrumentation, authentication,
// health checking, reflection and panic recovery.
package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// Every connection has fixed HTTP/2 flow-control windows, on both ends.
// Without them gRPC estimates the bandwidth-delay product by sending a PING
// with the first DATA frame after each acknowledgement, which, for calls
// made one after another, is a PING and its ACK each way on every call:
// four more frames, write system calls and thread wake-ups per call on the
// request path (in the load harness, gateway + aggregator CPU per call at one
// client went from 1.20 to 0.98 ms). Setting the windows turns the estimator
// off. A megabyte per stream and eight per connection keep the largest
// catalog page moving at loopback speed, and bound what a peer may send
// before it is read as the estimator's 16 MB ceiling did.
const (
	streamWindow = 1 << 20
	connWindow   = 8 << 20
)

// streamWorkers is how many goroutines a server keeps to run calls on.
// gRPC otherwise starts a goroutine per call, whose stack then grows, by
// copying, through the depth of a handler: at one client that was a tenth
// of the aggregator's CPU (runtime.copystack under every CallTool). A
// worker's stack stays grown between calls. Calls beyond the workers still
// get a goroutine of their own, so this bounds nothing. (gRPC marks the
// option experimental; TestCallsRunOnKeptGoroutines notices if an upgrade
// changes what it does.)
const streamWorkers = 64

// Server is a gRPC server with health and reflection registered.
// Services register on it (it is a grpc.ServiceRegistrar), never on the
// gRPC server it holds: RegisterService makes their requests decode as
// decode.go says.
type Server struct {
	server *grpc.Server
	// Health reports serving status; services flip it to SERVING once they
	// are ready (the indexer only after its migrations).
	Health *health.Server
	log    *slog.Logger
}

// RegisterService registers a service and its implementation, as
// grpc.Server's does, with its requests' decoding errors the caller's
// (withDecodeErrors).
func (s *Server) RegisterService(sd *grpc.ServiceDesc, impl any) {
	s.server.RegisterService(withDecodeErrors(sd), impl)
}

// GetServiceInfo returns the services registered, by name.
func (s *Server) GetServiceInfo() map[string]grpc.ServiceInfo { return s.server.GetServiceInfo() }

// Stop closes every connection and listener at once, cancelling the
// calls in flight.
func (s *Server) Stop() { s.server.Stop() }

// maxHeaderList bounds the headers of one call a server reads.
const maxHeaderList = 64 << 10

// NewServer builds a server that authenticates callers with auth, over TLS
// when tlsCfg is enabled (tls.go: files re-read as they change, client
// certificates required with a client CA). Its health status starts as
// NOT_SERVING.
func NewServer(auth *svcauth.Authenticator, tlsCfg config.TLS, log *slog.Logger, extra ...grpc.ServerOption) (*Server, error) {
	// Tracing comes first: its interceptors are the outermost.
	opts := append(serverTracing(),
		// Callers are authenticated on a call's headers, before its
		// messages are read (svcauth.Authenticator.Tap).
		grpc.InTapHandle(auth.Tap),
		grpc.ChainUnaryInterceptor(recoverUnary(log), auth.UnaryInterceptor()),
		grpc.ChainStreamInterceptor(recoverStream(log), auth.StreamInterceptor()),
		grpc.MaxRecvMsgSize(config.MaxServiceMessageBytes),
		// A request it cannot decode is the caller's error (decode.go).
		grpc.ForceServerCodecV2(newRequestCodec()),
		// A call's headers are read, and authenticated, before anything is
		// known of its caller: gRPC's default admits 16 MiB of them. Ours
		// carry a token and a trace context.
		grpc.MaxHeaderListSize(maxHeaderList),
		grpc.InitialWindowSize(streamWindow),
		grpc.InitialConnWindowSize(connWindow),
		grpc.NumStreamWorkers(streamWorkers),
	)
	// Long-lived watch streams must survive idle periods and notice dead
	// peers, and a client connection ends after an age so that balancing
	// clients re-resolve (balance.go). The defaults here; a service passes
	// ConnectionOptions of its configuration among extra.
	opts = append(opts, ConnectionOptions(config.GRPC{})...)
	if tlsCfg.Enabled() {
		files, err := loadTLSFiles(tlsCfg, log)
		if err != nil {
			return nil, err
		}
		creds, err := files.serverCredentials()
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.Creds(creds))
	}
	opts = append(opts, extra...)
	s := &Server{server: grpc.NewServer(opts...), Health: health.NewServer(), log: log}
	healthpb.RegisterHealthServer(s, s.Health)
	reflection.Register(s)
	s.Health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	return s, nil
}

// SetServing marks the whole server and every service registered on it
// SERVING: a client checking one service's health by name (gRPC
// client-side health checking) finds each one the binary serves, none
// left out by a list kept apart from the registrations.
func (s *Server) SetServing() {
	s.Health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	for name := range s.GetServiceInfo() {
		s.Health.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
}

// Serve listens on addr and serves until ctx is done, then stops gracefully:
// health flips to NOT_SERVING first so load balancers drain, in-flight calls
// get up to grace to finish, and what remains is cancelled.
func (s *Server) Serve(ctx context.Context, addr string, grace time.Duration) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	return s.ServeListener(ctx, lis, grace)
}

// ServeListener is Serve on an existing listener.
func (s *Server) ServeListener(ctx context.Context, lis net.Listener, grace time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- s.server.Serve(lis) }()
	s.log.Info("grpc serving", "addr", lis.Addr().String())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.Health.Shutdown()
	done := make(chan struct{})
	go func() { s.server.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		s.Stop()
	}
	return nil
}

func recoverUnary(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if r := recover(); r != nil {
				log.ErrorContext(ctx, "panic in grpc handler", "method", info.FullMethod, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				err = status.Error(codes.Internal, "internal error")
			}
		}()
		return handler(ctx, req)
	}
}

func recoverStream(log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		defer func() {
			if r := recover(); r != nil {
				log.ErrorContext(ss.Context(), "panic in grpc stream", "method", info.FullMethod, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				err = status.Error(codes.Internal, "internal error")
			}
		}()
		return handler(srv, ss)
	}
}

// Dial connects to another Switchboard service, presenting token as the
// service credential. The connection is lazy: it is established on first use
// and re-established automatically after the peer restarts. A dns: address
// spreads the calls over every healthy address of the name (balance.go).
// extra options come last (ClientKeepalive of the configuration).
//
// Over TLS the server's certificate must name the host of the address
// (the name part of dns:///name:port), or serviceAuth.tls.serverName
// when that is set, whichever replica answers.
func Dial(ep config.Endpoint, tlsCfg config.TLS, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	var token *svcauth.LiveToken
	if ep.Token != "" {
		token = svcauth.NewLiveToken(ep.Token, tlsCfg.Enabled())
	}
	return DialLive(ep, tlsCfg, token, extra...)
}

// ClientToken is the LiveToken to dial ep with (DialLive): its token, sent
// over TLS only when tlsCfg enables it.
func ClientToken(ep config.Endpoint, tlsCfg config.TLS) *svcauth.LiveToken {
	return svcauth.NewLiveToken(ep.Token, tlsCfg.Enabled())
}

// DialLive is Dial presenting token, which a configuration reload may
// replace (token.Set); ep.Token is not used. A nil token presents none.
func DialLive(ep config.Endpoint, tlsCfg config.TLS, token *svcauth.LiveToken, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	if ep.Address == "" {
		return nil, errors.New("no address configured")
	}
	if err := ep.ValidateAddress("address"); err != nil {
		return nil, err
	}
	opts := append(clientTracing(),
		ClientKeepalive(config.GRPC{}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)),
		grpc.WithInitialWindowSize(streamWindow),
		grpc.WithInitialConnWindowSize(connWindow),
		// gRPC's default reconnect back-off grows to two minutes, so a peer
		// that was down for a while would stay unreachable long after it is
		// back. Services on one network retry fast and cap at a second.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
	)
	if tlsCfg.Enabled() {
		files, err := loadTLSFiles(tlsCfg, nil)
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.WithTransportCredentials(&reloadingClientCredentials{files: files}))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if token != nil {
		opts = append(opts, grpc.WithPerRPCCredentials(token))
	}
	opts = append(opts, targetOptions(ep)...)
	opts = append(opts, extra...)
	return grpc.NewClient(ep.Address, opts...)
}
