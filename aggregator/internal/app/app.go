// Package app wires the aggregator together: configuration to engine
// options, the engine, the connections to the indexer (pinned
// definitions, rate-limit tokens, the audit trail's table), the peers a
// held call's retry is forwarded to, the gRPC server with its auth, the
// ops HTTP endpoints and the live reload of the configuration (reload.go),
// and runs them until the context ends.
package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/engine"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/peer"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/server"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/stdio"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/traffic"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/lifecycle"
	"github.com/switchboard-mcp/switchboard/services/opshttp"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// Run serves the aggregator described by env until ctx ends. A bad
// configuration is an error before anything listens.
func Run(ctx context.Context, env lifecycle.Env) error {
	if err := Validate(env.Config); err != nil {
		return err
	}
	// Before any stdio server starts: none may read the aggregator's
	// environment, its service tokens, or its memory.
	if err := stdio.HideFromServers(); err != nil {
		return err
	}
	cfg := env.Config.Aggregator.WithDefaults()
	opts, err := engine.OptionsFromConfig(cfg)
	if err != nil {
		return err
	}
	opts.Servers = env.Config.Servers
	// The policy is read once more, as the reload compares it (the file
	// may have changed since Validate read it; this is the one in force).
	policy, err := readPolicy(cfg.Authz.PolicyFile)
	if err != nil {
		return err
	}
	opts.Authz = policy.authz
	var self string
	if cfg.Peers.Enabled() {
		if self, err = cfg.AdvertiseAddr(os.Getenv, os.Hostname); err != nil {
			return err
		}
		// Held calls name this replica, so a retry reaching a peer is
		// forwarded here.
		opts.HeldOwner = self
		env.Log.Info("held calls are reachable through the aggregator peers", "advertise_address", self)
		if cfg.Peers.DNS == "" && !slices.Contains(cfg.Peers.Addresses, self) {
			// The other replicas check owners against the same list.
			env.Log.Warn("aggregator.advertiseAddress is not in aggregator.peers.addresses: other replicas will not forward retries of calls held here", "advertise_address", self)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	opts.Log = env.Log
	opts.Metrics = engine.NewMetrics(reg)
	recorder := traffic.New()
	opts.Traffic = recorder
	// Closed last: the trail below ships its events over it until it is
	// closed.
	idx := newIndexers(env)
	defer idx.Close()
	trail, err := startAudit(env, reg, idx)
	if err != nil {
		return err
	}
	defer trail.Close()
	guard, err := pinningGuard(env, reg, idx)
	if err != nil {
		return err
	}
	if guard != nil {
		guard.SetAudit(trail)
		guard.SetTimeline(recorder)
	}
	opts.Pinning = guard
	limiter, err := rateLimiter(env, reg, idx)
	if err != nil {
		return err
	}
	e, err := engine.New(opts)
	if err != nil {
		return err
	}

	srvOpts := append(rpc.ConnectionOptions(env.Config.GRPC), rpc.ServerMetrics(reg)...)
	services := svcauth.NewAuthenticator(env.Config.ServiceAuth.Credentials)
	srv, err := rpc.NewServer(services, env.Config.ServiceAuth.TLS, env.Log, srvOpts...)
	if err != nil {
		return err
	}
	peers := peer.New(self, cfg.Peers, env.Config.ServiceAuth.TLS, env.Log)
	defer peers.Close()
	api := server.New(e).WithPeers(peers).WithLimiter(limiter).WithAudit(trail).WithGroupsClaim(env.Config.Gateway.Auth.OIDC.GroupsClaim).
		WithTraffic(recorder, replicaName(cfg.AdvertiseAddress, cfg.Listen)).WithShutdown(ctx.Done())
	if err := withTasks(env, api, idx, self); err != nil {
		return err
	}
	if err := withCodeMode(env, api); err != nil {
		return err
	}
	defer api.CloseCodeMode()
	aggregatorv1.RegisterAggregatorServiceServer(srv, api)

	var wg sync.WaitGroup
	defer wg.Wait()
	// Whatever returns first, the goroutines below end before Run does.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The configuration file is watched from here on, so that a policy
	// written while the first catalog is built is not missed.
	reload := &live{started: env.Config, applied: env.Config, engine: e, services: services, log: env.Log, limiter: limiter, api: api,
		indexers: idx, policy: policy, creds: slices.Clone(env.Config.ServiceAuth.Credentials)}
	wg.Go(func() { api.RunTaskLeases(ctx) })
	wg.Go(func() {
		env.WatchConfig(ctx, reg, lifecycle.Reloader{Validate: Validate, Apply: reload.Apply, Related: policyPaths, Audit: trail})
	})
	if cfg.HTTPListen != "" {
		lis, err := net.Listen("tcp", cfg.HTTPListen)
		if err != nil {
			return fmt.Errorf("listen %s: %w", cfg.HTTPListen, err)
		}
		ready := func() error {
			if !e.Ready() {
				return errors.New("catalog not built yet")
			}
			return nil
		}
		wg.Go(func() {
			opshttp.Serve(ctx, lis, opshttp.Handler(ready, reg, opshttp.Pprof(env.Config.Ops.Pprof)), env.Config.Ops.Hosts, env.Log)
		})
	}

	// The first build decides readiness; under the manual strategy an
	// unresolved conflict stops the process here.
	if err := e.Start(ctx); err != nil {
		return err
	}
	srv.SetServing()
	// The engine, which closes the backends (stopping stdio servers) when
	// its context ends, outlives the calls in flight: it stops once the
	// server has given them shutdownGrace.
	engineCtx, stopEngine := context.WithCancel(context.WithoutCancel(ctx))
	defer stopEngine()
	wg.Go(func() { e.Run(engineCtx) })
	return srv.Serve(ctx, cfg.Listen, time.Duration(cfg.ShutdownGrace))
}

// replicaName names this replica on the console's traffic page, where the
// replicas' counts are told apart by it: its advertised address, else its
// host name and listen address (replicas on one host share the name).
func replicaName(advertise, listen string) string {
	if advertise != "" {
		return advertise
	}
	host, _ := os.Hostname()
	return host + " " + listen
}
