// Package app wires the indexer: the store, the scope resolver, the
// revocation and session event hubs, the gRPC server and the HTTP probes and metrics. Health
// reports SERVING only once the schema migrations have been applied; until
// then (the database may be unreachable at start) it keeps retrying with
// backoff while NOT_SERVING.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/lifecycle"
	"github.com/switchboard-mcp/switchboard/services/opshttp"
	"github.com/switchboard-mcp/switchboard/services/ratelimit"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/svcauth"

	"github.com/switchboard-mcp/switchboard/indexer/internal/approvals"
	"github.com/switchboard-mcp/switchboard/indexer/internal/revocation"
	"github.com/switchboard-mcp/switchboard/indexer/internal/scope"
	"github.com/switchboard-mcp/switchboard/indexer/internal/server"
	"github.com/switchboard-mcp/switchboard/indexer/internal/sessionevents"
	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
	"github.com/switchboard-mcp/switchboard/indexer/internal/store/postgres"
)

const (
	shutdownGrace = 10 * time.Second
	// revocationResync is how often every revocation is read again, in
	// case a notification was missed.
	revocationResync = 30 * time.Second
)

// Listeners are pre-opened listeners for tests; a nil one means the
// configured address (indexer.listen, indexer.httpListen).
type Listeners struct {
	GRPC, HTTP net.Listener
}

// readKeys are the parts of the configuration file the indexer reads
// (the gateway's session bounds, which it enforces for the cluster, and
// the aggregators' aggregator.pinning.newTools, which it applies to what
// they record, included); liveKeys are those a reload applies ("reload"
// is applied by the watch itself). A change of any other key it reads is
// logged as needing a restart.
var (
	readKeys = []string{"indexer", "serviceAuth", "grpc", "telemetry", "logging", "ops", "rateLimits", "reload", "audit",
		"aggregator.pinning.newTools",
		// The session state bounds, and the TTL, which bounds how long a
		// revocation is kept; not the sessions' key or the gateway's own
		// bounds, which a rotation or a change of restarts no indexer.
		"gateway.sessions.maxSubscriptions", "gateway.sessions.maxURIBytes", "gateway.sessions.maxPerPrincipal",
		"gateway.sessions.maxPrincipalStateBytes", "gateway.sessions.ttl"}
	liveKeys = []string{"serviceAuth.credentials", "indexer.aggregator.token", "rateLimits", "reload", "aggregator.pinning.newTools",
		"gateway.sessions.ttl", "indexer.maxRevocationTTL"}
)

// Validate checks everything the indexer reads in cfg, as at start and on
// every reload: the sections (config.ValidateIndexer), the TLS files, the
// database URL's form and aggregator.pinning.newTools.
func Validate(cfg *config.Config) error {
	return errors.Join(cfg.ValidateIndexer(), rpc.CheckTLS(cfg.ServiceAuth.TLS), postgres.CheckURL(cfg.Indexer.Database),
		cfg.Aggregator.Pinning.ValidateNewTools())
}

// Run serves the indexer until ctx ends: gRPC, and /healthz, /readyz and
// Prometheus /metrics on HTTP when indexer.httpListen is set. The
// configuration is not reloaded (see RunEnv).
func Run(ctx context.Context, cfg *config.Config, log *slog.Logger, listeners Listeners) error {
	return RunEnv(ctx, lifecycle.Env{Config: cfg, Log: log}, listeners)
}

// RunEnv is Run for a service started by lifecycle.Main: the configuration
// file is watched, and the service credentials are reloaded live.
func RunEnv(ctx context.Context, env lifecycle.Env, listeners Listeners) error {
	cfg, log := env.Config, env.Log
	if env.Service == "" {
		env.Service = "indexer"
	}
	ic := cfg.Indexer.WithDefaults()
	validated := *cfg
	if listeners.GRPC != nil {
		ic.Listen = listeners.GRPC.Addr().String()
		validated.Indexer.Listen = ic.Listen
	}
	if err := Validate(&validated); err != nil {
		return err
	}
	lis, httpLis := listeners.GRPC, listeners.HTTP
	if lis == nil {
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

	st, err := postgres.Open(ctx, ic.Database, postgres.Options{CachedDocuments: ic.ScopeCache.Documents, CachedMemberships: ic.ScopeCache.Memberships})
	if err != nil {
		return err
	}
	defer st.Close()
	// The token presented to the aggregator is live: a reload replaces it.
	aggToken := rpc.ClientToken(ic.Aggregator, cfg.ServiceAuth.TLS)
	conn, err := rpc.DialLive(ic.Aggregator, cfg.ServiceAuth.TLS, aggToken, rpc.ClientKeepalive(cfg.GRPC))
	if err != nil {
		return fmt.Errorf("aggregator client: %w", err)
	}
	defer conn.Close()
	resolver := scope.New(aggregatorv1.NewAggregatorServiceClient(conn), st, time.Duration(ic.ScopeTTL), log)
	if ic.Aggregator.Balanced() {
		// A second connection to the same replicas that sends every call to
		// one of them: a build that saw two replicas' views retries through
		// it (scope.Resolver.PinRetries).
		pinnedConn, err := rpc.DialLive(ic.Aggregator, cfg.ServiceAuth.TLS, aggToken, rpc.ClientKeepalive(cfg.GRPC), rpc.PickFirst())
		if err != nil {
			return fmt.Errorf("aggregator client: %w", err)
		}
		defer pinnedConn.Close()
		resolver.PinRetries(aggregatorv1.NewAggregatorServiceClient(pinnedConn))
	}
	hub := revocation.New(st, revocationResync, log)
	sessionHub := sessionevents.New(st, revocationResync, log)
	approvalHub := approvals.New(st, log)
	// Session states are bounded as the gateway bounds them: the same
	// settings, read from the same configuration.
	gs := cfg.Gateway.WithDefaults().Sessions

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registerScopeCacheMetrics(reg, st.CacheStats)
	trail, auditTable, err := startAudit(env, reg, st)
	if err != nil {
		return err
	}
	defer trail.Close()
	services := svcauth.NewAuthenticator(cfg.ServiceAuth.Credentials)
	// find_tool's rate limits; a reload applies new ones.
	limits, err := ratelimit.Compile(cfg.RateLimits)
	if err != nil {
		return err
	}
	limiter := ratelimit.New(limits, server.StoreBuckets{Store: st}, log, ratelimit.NewMetrics(reg, "indexer"))
	// aggregator.pinning.newTools review makes new tools of a backend with
	// tools recorded pending whatever the aggregators ask; a reload
	// applies a change.
	var reviewNewTools atomic.Bool
	reviewNewTools.Store(cfg.Aggregator.Pinning.ReviewNewTools())
	if reviewNewTools.Load() {
		log.Info("new tools of a backend with tools recorded are pending until approved (aggregator.pinning.newTools review)")
	}
	// The gateways take a longer gateway.sessions.ttl when they restart;
	// revocations kept no longer than the old one would let a deleted
	// session open again, so a reload applies it.
	var revocationTTL atomic.Int64
	revocationTTL.Store(int64(cfg.RevocationTTL()))
	// The configuration file is watched for as long as the indexer runs.
	reloadCtx, stopReload := context.WithCancel(ctx)
	reloadDone := make(chan struct{})
	go func() {
		creds, token, rateLimits, newTools := cfg.ServiceAuth.Credentials, ic.Aggregator.Token, cfg.RateLimits, cfg.Aggregator.Pinning.NewTools
		env.WatchConfig(reloadCtx, reg, lifecycle.Reloader{Validate: Validate, Apply: func(next *config.Config) error {
			if !reflect.DeepEqual(next.ServiceAuth.Credentials, creds) {
				creds = slices.Clone(next.ServiceAuth.Credentials)
				services.Update(creds)
				log.Info("serviceAuth.credentials reloaded", "credentials", len(creds))
			}
			if next.Indexer.Aggregator.Token != token {
				token = next.Indexer.Aggregator.Token
				aggToken.Set(token)
				log.Info("indexer.aggregator.token reloaded")
			}
			if !reflect.DeepEqual(next.RateLimits, rateLimits) {
				set, err := ratelimit.Compile(next.RateLimits)
				if err != nil {
					return err
				}
				rateLimits = next.RateLimits
				limiter.Apply(set)
				log.Info("rateLimits reloaded", "limits", len(rateLimits.Limits))
			}
			if ttl := next.RevocationTTL(); int64(ttl) != revocationTTL.Load() {
				revocationTTL.Store(int64(ttl))
				log.Info("revocation TTL reloaded", "ttl", ttl)
			}
			if next.Aggregator.Pinning.NewTools != newTools {
				newTools = next.Aggregator.Pinning.NewTools
				reviewNewTools.Store(next.Aggregator.Pinning.ReviewNewTools())
				log.Info("aggregator.pinning.newTools reloaded", "review", reviewNewTools.Load())
			}
			if restart := config.NeedRestart(config.Changed(cfg, next), readKeys, liveKeys); len(restart) > 0 {
				log.Warn("needs a restart: configuration changes not applied", "keys", restart)
			}
			return nil
		}, Audit: trail})
		close(reloadDone)
	}()
	defer func() { stopReload(); <-reloadDone }()
	metrics := server.NewMetrics(reg)
	api := server.New(server.Deps{
		Store: st, Resolver: resolver, Revocations: hub, Ranking: store.DefaultRanking,
		Limits:                  server.Limits{Default: ic.DefaultLimit, Max: ic.MaxLimit},
		RevocationTTL:           &revocationTTL,
		MaxRevocationsPerCaller: ic.MaxRevocationsPerCaller,
		SessionEvents:           sessionHub,
		Approvals:               approvalHub,
		ReviewNewTools:          &reviewNewTools,
		SessionLimits: store.SessionStateLimits{Subscriptions: gs.MaxSubscriptions, URIBytes: gs.MaxURIBytes,
			PerPrincipal: gs.MaxPerPrincipal, PrincipalBytes: int64(gs.MaxPrincipalStateBytes)},
		MaxSessionStateBytes: ic.SessionStates.MaxBytes,
		Stopping:             ctx.Done(), Log: log, Metrics: metrics,
		Limiter: limiter,
		Audit:   trail, AuditEvents: auditTable,
	})
	// Who may call each RPC beyond its allow list (server.methodAccess),
	// checked after the service authentication.
	srvOpts := append(rpc.ConnectionOptions(cfg.GRPC), rpc.ServerMetrics(reg)...)
	srv, err := rpc.NewServer(services, cfg.ServiceAuth.TLS, log, append(srvOpts, api.AccessOptions()...)...)
	if err != nil {
		return err
	}
	indexerv1.RegisterIndexerServiceServer(srv, api)
	// The cluster state's own service; IndexerService serves its RPCs too,
	// for one release (docs/grpc-api.md, "Versions").
	indexerv1.RegisterClusterStateServiceServer(srv, api)

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
		go func() { opshttp.Serve(opsCtx, httpLis, ops, cfg.Ops.Hosts, log); close(opsDone) }()
		defer func() { stopOps(); <-opsDone }()
	}

	if err := store.MigrateWithRetry(ctx, st, log); err != nil {
		<-serveErr
		return err
	}
	api.SetReady()
	srv.SetServing()
	log.InfoContext(ctx, "indexer ready")

	// The background work ends with ctx, before the store closes.
	var background sync.WaitGroup
	defer background.Wait()
	background.Go(func() { resolver.Watch(ctx) })
	background.Go(func() { metrics.WatchDatabase(ctx, st, server.DatabasePingEvery) })
	background.Go(func() { hub.Run(ctx) })
	background.Go(func() { sessionHub.Run(ctx) })
	background.Go(func() { approvalHub.Run(ctx) })
	if auditTable != nil {
		background.Go(func() { deleteOldAuditEvents(ctx, auditTable, cfg.Audit.EffectiveRetention(), log) })
	}
	background.Go(func() {
		store.CollectGarbageEvery(ctx, st, time.Duration(ic.GCInterval), time.Duration(ic.ScopeRetention), log)
	})
	return <-serveErr
}
