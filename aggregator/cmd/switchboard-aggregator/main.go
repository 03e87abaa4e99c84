// Command switchboard-aggregator serves the aggregated, authorized catalog
// of many backend MCP servers over gRPC (AggregatorService), with optional
// /healthz, /readyz and Prometheus /metrics on HTTP.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/aggregator"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/lifecycle"
	"github.com/switchboard-mcp/switchboard/services/opshttp"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

func main() {
	lifecycle.Main("switchboard-aggregator", run)
}

func run(ctx context.Context, env lifecycle.Env) error {
	cfg := env.Config.Aggregator
	if cfg.Listen == "" {
		return errors.New("aggregator.listen is required")
	}
	opts, err := aggregator.OptionsFromConfig(cfg)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	opts.Log = env.Log
	opts.Metrics = aggregator.NewMetrics(reg)
	engine, err := aggregator.New(opts)
	if err != nil {
		return err
	}

	srv, err := rpc.NewServer(svcauth.NewAuthenticator(env.Config.ServiceAuth.Credentials), env.Config.ServiceAuth.TLS, env.Log)
	if err != nil {
		return err
	}
	aggregatorv1.RegisterAggregatorServiceServer(srv.Server, aggregator.NewService(engine))

	var wg sync.WaitGroup
	defer wg.Wait()
	if cfg.HTTPListen != "" {
		lis, err := net.Listen("tcp", cfg.HTTPListen)
		if err != nil {
			return fmt.Errorf("listen %s: %w", cfg.HTTPListen, err)
		}
		ready := func() error {
			if !engine.Ready() {
				return errors.New("catalog not built yet")
			}
			return nil
		}
		ops := opshttp.Handler(ready, reg, opshttp.Pprof(env.Config.Ops.Pprof))
		wg.Go(func() { opshttp.Serve(ctx, lis, ops, env.Log) })
	}

	// The first build decides readiness; under the manual strategy an
	// unresolved conflict stops the process here.
	if err := engine.Start(ctx); err != nil {
		return err
	}
	srv.SetServing(aggregatorv1.AggregatorService_ServiceDesc.ServiceName)
	wg.Go(func() { engine.Run(ctx) })
	return srv.Serve(ctx, cfg.Listen, cfg.ShutdownGrace.Or(10*time.Second))
}
