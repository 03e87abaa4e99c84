// Package opshttp serves the operational HTTP endpoints of the services on
// their ops port: /healthz (the process is up), /readyz (it can serve
// traffic), Prometheus /metrics and, when the deployment turns it on
// (ops.pprof), the runtime profiles under /debug/pprof/. Kubernetes probes
// and scrapers use these where the gRPC health protocol is not an option
// (for example under mTLS).
//
// The profiles are never served on a port that carries MCP or gRPC
// traffic: only the ops port, which the network policies keep away from
// clients, and only when asked for, because a profile shows what the
// process is doing and a CPU profile costs CPU while it runs.
package opshttp

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/switchboard-mcp/switchboard/services/hostguard"
	"github.com/switchboard-mcp/switchboard/services/lifecycle"
)

// Option changes what Handler serves.
type Option func(*options)

type options struct {
	pprof bool
}

// Pprof serves net/http/pprof under /debug/pprof/ when enabled is true
// (the deployment's ops.pprof). Without it those paths answer 404.
func Pprof(enabled bool) Option { return func(o *options) { o.pprof = enabled } }

// Handler serves the endpoints. ready returns nil when the service can
// serve, or an error whose text explains why not (it is shown to the
// prober, so it must not carry secrets).
func Handler(ready func() error, reg *prometheus.Registry, opts ...Option) http.Handler {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if o.pprof {
		// Registered by hand on this mux: the package's init also adds them
		// to http.DefaultServeMux, which no Switchboard server serves.
		// Index serves every named profile (/debug/pprof/heap, allocs,
		// goroutine, ...), with ?seconds=N for a delta over N seconds.
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// readyTimeout bounds the health check a readiness probe makes.
const readyTimeout = 2 * time.Second

// GRPCServing is a readiness function for a service that can serve only
// while a gRPC dependency does: ready when its health service reports
// SERVING. what names the dependency in the prober's error.
func GRPCServing(health healthpb.HealthClient, what string) func() error {
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
		defer cancel()
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return errors.New(what + " not ready")
		}
		return nil
	}
}

// shutdownGrace is how long open requests get at shutdown. A CPU profile
// or trace in progress is cut after it; it is a diagnostic, not traffic.
const shutdownGrace = 5 * time.Second

// bodyTimeout is how long a request's body may take to arrive at an ops
// port (a variable for tests).
var bodyTimeout = 10 * time.Second

// BoundBodies gives a request with a body timeout to send it, whether or
// not its handler reads it: net/http reads what a handler left of a body
// before it answers the next request on the connection, so without a
// bound a client that sent the headers of a request with a body (a
// login form; a POST to /healthz, or one refused 401 before its body is
// read) and held the body back kept the connection and a goroutine for
// as long as it liked. net/http lifts the deadline once the body is read
// to its end, before a long answer (an event stream) goes on. The body is
// left as it is: net/http answers an unread body sent with Expect:
// 100-continue at once only while the body is its own. A request without
// a body (a probe, a scrape, a profile that answers after the seconds it
// records, a GET stream) has none.
func BoundBodies(h http.Handler, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 {
			// Servers that cannot set deadlines (tests' recorders) read
			// without.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(timeout))
		}
		h.ServeHTTP(w, r)
	})
}

// Serve serves h on lis until ctx is done, then shuts down, giving open
// requests (a scrape in progress) a few seconds to finish.
//
// Whatever address it is bound to, it answers only requests whose Host is
// an IP literal, localhost, or one of hosts (config ops.hosts): a page
// whose own name was rebound to the port's address (DNS rebinding, as
// behind kubectl port-forward) is refused, while probes and scrapers,
// which name the address itself, are served.
func Serve(ctx context.Context, lis net.Listener, h http.Handler, hosts []string, log *slog.Logger) {
	log.Info("http serving", "addr", lis.Addr().String())
	// No WriteTimeout: a CPU profile or trace answers after the seconds
	// it was asked to record; no ReadTimeout either, which would end such
	// a request's context when it passed: a body's time is bounded by
	// BoundBodies. An idle keep-alive connection is closed.
	srv := &http.Server{Handler: BoundBodies(hostguard.NamedHostsOnly(h, hosts), bodyTimeout), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	if err := lifecycle.ServeHTTP(ctx, srv, lis, shutdownGrace); err != nil {
		log.Error("http server failed", "err", err)
	}
}
