// Package app wires the gateway together: the connections to the
// aggregator and the indexer, authentication, metrics and the audit trail,
// the MCP HTTP server, the ops endpoints with the operator console, and the
// configuration watch, and runs them until the context ends.
package app

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/switchboard-mcp/switchboard/gateway/internal/auth"
	"github.com/switchboard-mcp/switchboard/gateway/internal/edge"
	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/hostguard"
	"github.com/switchboard-mcp/switchboard/services/lifecycle"
	"github.com/switchboard-mcp/switchboard/services/opshttp"
	"github.com/switchboard-mcp/switchboard/services/ratelimit"
	"github.com/switchboard-mcp/switchboard/services/rpc"
)

// Run serves the gateway described by env until ctx ends: MCP (with
// /healthz, /readyz and Prometheus /metrics) on gateway.listen, and the ops
// endpoints, with the operator console when it is enabled, on
// gateway.opsListen when that is set. A bad configuration is an error
// before anything listens.
func Run(ctx context.Context, env lifecycle.Env) error {
	cfg := env.Config.Gateway.WithDefaults()
	if err := edge.Validate(env.Config); err != nil {
		return err
	}
	keepalive := rpc.ClientKeepalive(env.Config.GRPC)
	// The service tokens are live: a reload replaces them (edge.Gateway.Reload).
	aggToken, idxToken := rpc.ClientToken(cfg.Aggregator, env.Config.ServiceAuth.TLS), rpc.ClientToken(cfg.Indexer, env.Config.ServiceAuth.TLS)
	aggConn, err := rpc.DialLive(cfg.Aggregator, env.Config.ServiceAuth.TLS, aggToken, keepalive)
	if err != nil {
		return fmt.Errorf("gateway.aggregator: %w", err)
	}
	defer aggConn.Close()
	deps := edge.Deps{
		Aggregator:       aggregatorv1.NewAggregatorServiceClient(aggConn),
		AggregatorHealth: healthpb.NewHealthClient(aggConn),
		AggregatorToken:  aggToken,
		IndexerToken:     idxToken,
		Config:           env.Config,
		Log:              env.Log,
		LoopbackOnly:     hostguard.LoopbackBind(cfg.Listen),
		Servers:          env.Config.Servers,
	}
	if cfg.Indexer.Address != "" {
		idxConn, err := rpc.DialLive(cfg.Indexer, env.Config.ServiceAuth.TLS, idxToken, keepalive)
		if err != nil {
			return fmt.Errorf("gateway.indexer: %w", err)
		}
		defer idxConn.Close()
		deps.Indexer = indexerv1.NewIndexerServiceClient(idxConn)
		deps.ClusterState = indexerv1.NewClusterStateServiceClient(idxConn)
	} else {
		env.Log.Warn("gateway.indexer is not configured: find_tool answers with an error, session deletion is local to this replica, " +
			"and the requests the gateway refuses itself take no rate-limit token")
	}
	if deps.Auth, err = auth.New(cfg.Auth, nil); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	deps.Metrics = edge.NewMetrics(reg)
	if deps.Indexer != nil {
		// The requests the gateway refuses itself take their tokens from
		// the buckets the indexer holds, as the aggregator's do.
		set, err := ratelimit.Compile(env.Config.RateLimits)
		if err != nil {
			return err
		}
		deps.Limiter = ratelimit.New(set, ratelimit.IndexerBuckets{Client: deps.Indexer}, env.Log, ratelimit.NewMetrics(reg, "gateway"))
	}
	var auditSinks []audit.Sink
	if env.Config.Audit.Database.Enabled && deps.Indexer != nil {
		auditSinks = append(auditSinks, audit.NewIndexerSink(deps.Indexer))
	}
	if deps.Audit, err = env.StartAudit(reg, auditSinks...); err != nil {
		return err
	}
	defer deps.Audit.Close()
	gw, err := edge.New(cfg, deps)
	if err != nil {
		return err
	}

	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	srv := &http.Server{
		// A body has gateway.http.bodyTimeout to arrive, whether the
		// handler reads it or refuses the request first (a 401).
		Handler:           opshttp.BoundBodies(gw.Handler(), time.Duration(cfg.HTTP.BodyTimeout)),
		ReadHeaderTimeout: time.Duration(cfg.HTTP.ReadHeaderTimeout),
		// No ReadTimeout or WriteTimeout: notification streams are
		// long-lived, and a read deadline on the connection would end them.
		IdleTimeout: 2 * time.Minute,
	}
	srv.RegisterOnShutdown(gw.Close)
	var con *operatorConsole
	if cfg.OpsListen != "" {
		opsLis, err := net.Listen("tcp", cfg.OpsListen)
		if err != nil {
			return fmt.Errorf("listen %s: %w", cfg.OpsListen, err)
		}
		var ops http.Handler = opshttp.Handler(opshttp.GRPCServing(deps.AggregatorHealth, "aggregator"), reg, opshttp.Pprof(env.Config.Ops.Pprof))
		if cfg.Console.Enabled {
			// The console is served on the ops port only, never on the
			// MCP port (gateway.console).
			if con, err = startConsole(env.Config, keepalive, env.Log); err != nil {
				return err
			}
			defer con.close()
			mux := http.NewServeMux()
			mux.Handle("/console/", con.Handler())
			mux.Handle("/", ops)
			ops = mux
			env.Log.Info("operator console serving", "url", "http://"+opsLis.Addr().String()+"/console/")
		}
		opsCtx, stopOps := context.WithCancel(ctx)
		opsDone := make(chan struct{})
		go func() { opshttp.Serve(opsCtx, opsLis, ops, env.Config.Ops.Hosts, env.Log); close(opsDone) }()
		defer func() { stopOps(); <-opsDone }()
	}
	// The configuration file is watched for as long as the gateway serves:
	// what it applies live is edge.Gateway.Reload's.
	reloadCtx, stopReload := context.WithCancel(ctx)
	reloadDone := make(chan struct{})
	go func() {
		apply := gw.Reload
		if con != nil {
			apply = func(c *config.Config) error {
				// The console's part is built first: an error in
				// either part changes nothing.
				next, err := con.prepare(c)
				if err != nil {
					return err
				}
				if err := gw.Reload(c); err != nil {
					return err
				}
				next.commit()
				return nil
			}
		}
		env.WatchConfig(reloadCtx, reg, lifecycle.Reloader{Validate: edge.Validate, Apply: apply, Audit: deps.Audit})
		close(reloadDone)
	}()
	defer func() { stopReload(); <-reloadDone }()
	env.Log.Info("gateway serving", "addr", lis.Addr().String(), "mcp", "http://"+lis.Addr().String()+"/mcp",
		"auth", cfg.Auth.Mode, "optimizer", cfg.Optimizer.Enabled)
	// In-flight requests get gateway.shutdownGrace to finish; long-lived
	// notification streams are cut after it (clients reconnect).
	defer gw.Stop()
	return lifecycle.ServeHTTP(ctx, srv, lis, time.Duration(cfg.ShutdownGrace))
}
