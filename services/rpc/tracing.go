package rpc

import (
	"context"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/switchboard-mcp/switchboard/services/telemetry"
)

// serverTracing is a server's tracing: otelgrpc's spans when this process
// exports them (telemetry.Recording), otherwise only the caller's W3C trace
// context taken into each RPC's context by an interceptor, so that it goes
// on with whatever the handler calls. otelgrpc against the no-op provider
// opened a span and copied the metadata on every RPC for nothing, and any
// stats handler makes gRPC build an event per header and message: together
// a quarter of a bare round trip's CPU (BenchmarkGRPCFloor).
func serverTracing() []grpc.ServerOption {
	if telemetry.Recording() {
		return []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler())}
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
			return next(incomingTraceContext(ctx), req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, next grpc.StreamHandler) error {
			ctx := ss.Context()
			if traced := incomingTraceContext(ctx); traced != ctx {
				ss = tracedStream{ServerStream: ss, ctx: traced}
			}
			return next(srv, ss)
		}),
	}
}

// clientTracing is serverTracing's counterpart on a client connection: the
// caller's span context goes into each RPC's metadata.
func clientTracing() []grpc.DialOption {
	if telemetry.Recording() {
		return []grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler())}
	}
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(outgoingTraceContext(ctx), method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(outgoingTraceContext(ctx), desc, cc, method, opts...)
		}),
	}
}

// incomingTraceContext is ctx with the span context its RPC's metadata
// carries, or ctx itself when it carries none.
func incomingTraceContext(ctx context.Context) context.Context {
	if len(metadata.ValueFromIncomingContext(ctx, "traceparent")) == 0 {
		return ctx
	}
	return otel.GetTextMapPropagator().Extract(ctx, incomingCarrier{ctx})
}

// outgoingTraceContext is ctx with its span context added to the outgoing
// metadata, or ctx itself when it has none.
func outgoingTraceContext(ctx context.Context) context.Context {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	var out outgoingCarrier
	otel.GetTextMapPropagator().Inject(ctx, &out)
	if len(out) == 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, out...)
}

// tracedStream is a server stream whose context holds its caller's span.
type tracedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s tracedStream) Context() context.Context { return s.ctx }

// incomingCarrier reads a propagator's fields from an RPC's incoming
// metadata without copying the rest of it.
type incomingCarrier struct{ ctx context.Context }

func (c incomingCarrier) Get(key string) string {
	if v := metadata.ValueFromIncomingContext(c.ctx, key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (incomingCarrier) Set(string, string) {}

func (c incomingCarrier) Keys() []string {
	md, _ := metadata.FromIncomingContext(c.ctx)
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	return keys
}

// outgoingCarrier collects a propagator's fields as metadata pairs.
type outgoingCarrier []string

func (c *outgoingCarrier) Get(string) string { return "" }

func (c *outgoingCarrier) Set(key, value string) { *c = append(*c, key, value) }

func (c *outgoingCarrier) Keys() []string {
	keys := make([]string, 0, len(*c)/2)
	for i := 0; i+1 < len(*c); i += 2 {
		keys = append(keys, (*c)[i])
	}
	return keys
}
