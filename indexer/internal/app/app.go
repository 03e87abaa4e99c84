// Package app wires the indexer: the store, the scope resolver, the gRPC
// server and the HTTP probes and metrics. Health reports SERVING only once the schema migrations have been
// applied; until then (the database may be unreachable at start) it keeps
// retrying with backoff while NOT_SERVING.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/opshttp"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/svcauth"

	"github.com/switchboard-mcp/switchboard/indexer/internal/scope"
	"github.com/switchboard-mcp/switchboard/indexer/internal/server"
	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// Defaults of the indexer section.
const (
	DefaultScopeTTL       = 30 * time.Second
	DefaultLimit          = 8
	MaxLimit              = 50
	DefaultGCInterval     = 10 * time.Minute
	DefaultScopeRetention = 24 * time.Hour
	shutdownGrace         = 10 * time.Second
)

// Listeners are pre-opened listeners for tests; a nil one means the
// configured address (indexer.listen, indexer.httpListen).
type Listeners struct {
	GRPC, HTTP net.Listener
}

// Run serves the indexer until ctx ends: gRPC, and /healthz, /readyz and
// Prometheus /metrics on HTTP when indexer.httpListen is set.
func Run(ctx context.Context, cfg *config.Config, log *slog.Logger, listeners Listeners) error {
	ic := cfg.Indexer
	if ic.Database == "" {
		return errors.New("indexer.database is required (a PostgreSQL URL)")
	}
	if ic.Aggregator.Address == "" {
		return errors.New("indexer.aggregator.address is required")
	}
	limits := server.Limits{Default: ic.DefaultLimit, Max: ic.MaxLimit}
	if limits.Max <= 0 || limits.Max > MaxLimit {
		limits.Max = MaxLimit
	}
	if limits.Default <= 0 {
		limits.Default = DefaultLimit
	}
	limits.Default = min(limits.Default, limits.Max)
	lis, httpLis := listeners.GRPC, listeners.HTTP
	if lis == nil {
		if ic.Listen == "" {
			return errors.New("indexer.listen is required")
		}
		var err error
		if lis, err = net.Listen("tcp", ic.Listen); err != nil {
			return fmt.Errorf("listen %s: %w", ic.Listen, err)
		}
	}
	if httpLis == nil && ic.HTTPListen != "" {
		var err error
		if httpLis, err = net.Listen("tcp", ic.HTTPListen); err != nil {
			return fmt.Errorf("listen %s: %w", ic.HTTPListen, err)
		}
	}

	st, err := store.Open(ctx, ic.Database)
	if err != nil {
		return err
	}
	defer st.Close()
	conn, err := rpc.Dial(ic.Aggregator, cfg.ServiceAuth.TLS)
	if err != nil {
		return fmt.Errorf("aggregator client: %w", err)
	}
	defer conn.Close()
	resolver := scope.New(aggregatorv1.NewAggregatorServiceClient(conn), st, ic.ScopeTTL.Or(DefaultScopeTTL), log)

	srv, err := rpc.NewServer(svcauth.NewAuthenticator(cfg.ServiceAuth.Credentials), cfg.ServiceAuth.TLS, log)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	api := server.New(st, resolver, store.DefaultRanking, limits, log, server.NewMetrics(reg))
	indexerv1.RegisterIndexerServiceServer(srv.Server, api)

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.ServeListener(ctx, lis, shutdownGrace) }()
	if httpLis != nil {
		ready := func() error {
			if !api.Ready() {
				return errors.New("database schema not migrated yet")
			}
			return nil
		}
		opsCtx, stopOps := context.WithCancel(ctx)
		opsDone := make(chan struct{})
		ops := opshttp.Handler(ready, reg, opshttp.Pprof(cfg.Ops.Pprof))
		go func() { opshttp.Serve(opsCtx, httpLis, ops, log); close(opsDone) }()
		defer func() { stopOps(); <-opsDone }()
	}

	if err := migrateWithRetry(ctx, st, log); err != nil {
		<-serveErr
		return err
	}
	api.SetReady()
	srv.SetServing(indexerv1.IndexerService_ServiceDesc.ServiceName)
	log.InfoContext(ctx, "indexer ready")

	go resolver.Watch(ctx)
	go collectGarbage(ctx, st, ic.GCInterval.Or(DefaultGCInterval), ic.ScopeRetention.Or(DefaultScopeRetention), log)
	return <-serveErr
}

// migrateWithRetry applies migrations, retrying with capped exponential
// backoff while the database is unreachable. Other failures (a broken
// migration) are fatal: retrying would not fix them.
func migrateWithRetry(ctx context.Context, st *store.Store, log *slog.Logger) error {
	backoff := 200 * time.Millisecond
	for {
		n, err := st.Migrate(ctx)
		if err == nil {
			log.InfoContext(ctx, "schema migrated", "applied", n)
			return nil
		}
		var unavailable *store.UnavailableError
		if !errors.As(err, &unavailable) {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("migrate: %w", err)
		}
		log.WarnContext(ctx, "database unreachable; retrying migrations", "error", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func collectGarbage(ctx context.Context, st *store.Store, every, retention time.Duration, log *slog.Logger) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		scopes, docs, err := st.CollectGarbage(ctx, retention)
		if err != nil {
			log.WarnContext(ctx, "garbage collection failed", "error", err)
			continue
		}
		if scopes+docs > 0 {
			log.InfoContext(ctx, "garbage collected", "scopes", scopes, "documents", docs)
		}
	}
}
