package rpc

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// ServerMetrics returns the options that count every handled RPC in reg as
// switchboard_grpc_server_handled_total{method, code, caller}: which RPCs a
// service answers, for which service credential, and how they end, so
// operators (and the fault and hostile suites) can see, for example, that
// a tools/call never makes the gateway list the catalog. The labels are
// bounded: gRPC calls interceptors only for registered methods, codes are
// a fixed set and callers are the configured credentials' names ("" for
// an exempt health check or reflection call). Calls the authentication
// interceptor refuses are not counted. Pass the options after the
// authentication interceptors, as NewServer's extra options are.
func ServerMetrics(reg prometheus.Registerer) []grpc.ServerOption {
	handled := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_grpc_server_handled_total",
		Help: "Authenticated gRPC requests this service handled, by full method name, status code and calling service.",
	}, []string{"method", "code", "caller"})
	reg.MustRegister(handled)
	count := func(ctx context.Context, method string, err error) {
		caller, _ := svcauth.CallerFrom(ctx)
		handled.WithLabelValues(method, status.Code(err).String(), caller.Name).Inc()
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			resp, err := handler(ctx, req)
			count(ctx, info.FullMethod, err)
			return resp, err
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			err := handler(srv, ss)
			count(ss.Context(), info.FullMethod, err)
			return err
		}),
	}
}
