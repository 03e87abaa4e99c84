// Command switchboard-demo-backend is a configurable MCP server for demos
// and tests. It serves MCP at /mcp in both protocol eras (or Legacy only
// with --stateful), /healthz, and an /admin API that changes its tools
// while it runs.
//
//	switchboard-demo-backend --listen 127.0.0.1:9101 --name weather --config weather.yaml
//	switchboard-demo-backend --listen 127.0.0.1:9102 --name load --synthetic 500
//	switchboard-demo-backend --listen 127.0.0.1:9103 --name corpus --tools-json tools.json
//	switchboard-demo-backend --stdio --name local
//
// Without --config, --synthetic or --tools-json it serves one tool of each
// behaviour (echo, add, hello, fail, sleep).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/demobackend"
	"github.com/switchboard-mcp/switchboard/services/lifecycle"
	"github.com/switchboard-mcp/switchboard/services/telemetry"
)

// shutdownGrace is how long open streams get to finish on SIGTERM.
const shutdownGrace = 5 * time.Second

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "switchboard-demo-backend:", err)
		os.Exit(1)
	}
}

func run() error {
	fs := flag.NewFlagSet("switchboard-demo-backend", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:9101", "address to listen on")
	name := fs.String("name", "demo", "backend name, reported in every answer")
	specPath := fs.String("config", "", "YAML file of tools, resources, resource templates and prompts")
	synthetic := fs.Int("synthetic", 0, "also serve N generated echo tools tool_0000...")
	toolsJSON := fs.String("tools-json", "", `also serve one echo tool per entry of a JSON object {"name": "description"}`)
	stateful := fs.Bool("stateful", false, "serve Legacy (2025-11-25) sessions only, refusing Modern requests")
	stdio := fs.Bool("stdio", false, "serve MCP on standard input and output (one session) instead of HTTP; logs go to standard error")
	otlpEndpoint := fs.String("otlp-endpoint", "", "export spans to this OTLP/gRPC collector (host:port)")
	otlpInsecure := fs.Bool("otlp-insecure", false, "send OTLP without TLS (a local collector)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if *showVersion {
		fmt.Println("switchboard-demo-backend", lifecycle.Version)
		return nil
	}
	if *synthetic < 0 {
		return errors.New("--synthetic must not be negative")
	}

	spec := demobackend.Spec{}
	if *specPath != "" {
		s, err := demobackend.LoadSpec(*specPath)
		if err != nil {
			return err
		}
		spec = s
	}
	spec.Tools = append(spec.Tools, demobackend.SyntheticTools(*synthetic)...)
	if *toolsJSON != "" {
		tools, err := demobackend.ToolsFromDescriptions(*toolsJSON)
		if err != nil {
			return err
		}
		spec.Tools = append(spec.Tools, tools...)
	}
	if *specPath == "" && *synthetic == 0 && *toolsJSON == "" {
		spec = demobackend.DefaultSpec()
	}

	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("backend", *name)
	backend, err := demobackend.New(spec, demobackend.Options{Name: *name, StatefulOnly: *stateful, Log: log})
	if err != nil {
		return err
	}
	if *stdio {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		log.Info("serving on stdio", "tools", len(spec.Tools))
		return backend.ServeStdio(ctx)
	}
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: backend.Handler(), ReadHeaderTimeout: 10 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	shutdownTracing, err := telemetry.Setup(ctx, config.Telemetry{OTLPEndpoint: *otlpEndpoint, OTLPInsecure: *otlpInsecure},
		"switchboard-demo-backend", lifecycle.Version)
	if err != nil {
		return err
	}
	defer func() {
		flushCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		if err := shutdownTracing(flushCtx); err != nil {
			log.Warn("telemetry flush failed", "err", err)
		}
	}()
	log.Info("serving", "url", "http://"+lis.Addr().String()+demobackend.MCPPath,
		"tools", len(spec.Tools), "stateful", *stateful)
	// Legacy GET streams never end by themselves: after the grace period
	// they are cut.
	if err := lifecycle.ServeHTTP(ctx, srv, lis, shutdownGrace); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}
