// Package opshttp serves the operational HTTP endpoints of the gRPC
// services: /healthz (the process is up), /readyz (it can serve traffic) and
// Prometheus /metrics. Kubernetes probes and scrapers use these where the
// gRPC health protocol is not an option (for example under mTLS).
package opshttp

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchboard-mcp/switchboard/services/lifecycle"
)

// Handler serves the three endpoints. ready returns nil when the service can
// serve, or an error whose text explains why not (it is shown to the
// prober, so it must not carry secrets).
func Handler(ready func() error, reg *prometheus.Registry) http.Handler {
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
	return mux
}

// Serve serves h on lis until ctx is done, then shuts down, giving open
// requests (a scrape in progress) a few seconds to finish.
func Serve(ctx context.Context, lis net.Listener, h http.Handler, log *slog.Logger) {
	log.Info("http serving", "addr", lis.Addr().String())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	if err := lifecycle.ServeHTTP(ctx, srv, lis, 5*time.Second); err != nil {
		log.Error("http server failed", "err", err)
	}
}
