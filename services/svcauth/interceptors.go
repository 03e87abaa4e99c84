package svcauth

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/tap"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// The server side: a call is authenticated on its headers (Tap), then its
// principal resolved from its request (the interceptors).

var errUnauthenticated = apierr.New(codes.Unauthenticated, commonv1.ErrorReason_ERROR_REASON_UNAUTHENTICATED, "missing or invalid service credentials")

// UnaryInterceptor authenticates the caller, checks that its credential
// allows the method, and resolves the principal of requests that carry
// one. Health checks and reflection are exempt so that
// probes and grpcurl discovery work without credentials; they reveal nothing
// about users.
func (a *Authenticator) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if exempt(info.FullMethod) {
			return handler(ctx, req)
		}
		ctx, c, err := a.admit(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		p, err := resolveRequest(c, req)
		if err != nil {
			return nil, err
		}
		return handler(context.WithValue(ctx, principalKey{}, p), req)
	}
}

// Tap authenticates a call and checks its credential's allow list from
// the call's headers alone (grpc.InTapHandle), before gRPC reads any of
// its messages: a caller without a credential costs the server no
// decoding of what it sends and gets UNAUTHENTICATED, not a decoder's
// error. gRPC runs it on the connection's reader, under the transport's
// lock: it hashes a token and looks a credential up, nothing that waits.
// The interceptors take the caller it found.
func (a *Authenticator) Tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if exempt(info.FullMethodName) {
		return ctx, nil
	}
	ctx, _, err := a.admit(ctx, info.FullMethodName)
	return ctx, err
}

// admit authenticates the call in ctx and checks that its credential
// allows fullMethod, and returns ctx with the caller in it (once Tap
// admitted the call, the caller it found).
func (a *Authenticator) admit(ctx context.Context, fullMethod string) (context.Context, Caller, error) {
	if c, ok := CallerFrom(ctx); ok {
		return ctx, c, nil
	}
	c, ok := a.Authenticate(ctx)
	if !ok {
		return ctx, Caller{}, errUnauthenticated
	}
	if !c.MayCall(fullMethod) {
		return ctx, Caller{}, errMethodNotAllowed(fullMethod)
	}
	return context.WithValue(ctx, callerKey{}, c), c, nil
}

// StreamInterceptor does the same for server-streaming calls: the principal
// is resolved from the first (only) request message.
func (a *Authenticator) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if exempt(info.FullMethod) {
			return handler(srv, ss)
		}
		ctx, c, err := a.admit(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		return handler(srv, &principalStream{ServerStream: ss, ctx: ctx, caller: c})
	}
}

type principalStream struct {
	grpc.ServerStream
	ctx    context.Context
	caller Caller
}

func (s *principalStream) Context() context.Context { return s.ctx }

func (s *principalStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	p, err := resolveRequest(s.caller, m)
	if err != nil {
		return err
	}
	s.ctx = context.WithValue(s.ctx, principalKey{}, p)
	return nil
}

func exempt(fullMethod string) bool {
	return strings.HasPrefix(fullMethod, "/grpc.health.v1.Health/") ||
		strings.HasPrefix(fullMethod, "/grpc.reflection.")
}
