// Package lifecycle runs a service's main loop: it parses --config, loads
// the configuration, sets up logging and tracing, and cancels the run
// context on SIGINT or SIGTERM so every server can shut down gracefully.
// SIGHUP reloads the configuration (reload.go).
package lifecycle

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/heapfloor"
	"github.com/switchboard-mcp/switchboard/services/logging"
	"github.com/switchboard-mcp/switchboard/services/telemetry"
)

// Version is set at build time with -ldflags.
var Version = "dev"

// Env is what a service's run function gets.
type Env struct {
	// Service is the process kind (gateway, aggregator, indexer).
	Service string
	Config  *config.Config
	Log     *slog.Logger
	// ConfigPath is the file Config was read from, and configRaw its
	// content then; an Env made in code (tests) has neither, and its
	// WatchConfig does nothing.
	ConfigPath string
	configRaw  []byte
	// hangup receives SIGHUP, which asks for a reload now (WatchConfig).
	hangup <-chan os.Signal
}

// Main parses flags, builds the environment and calls run with a context
// that is cancelled on SIGINT/SIGTERM. It exits the process with status 1 if
// run fails, 2 on bad usage. With --check it only reads the configuration
// file and validates it with validate, the service's check at start and on
// every reload, prints every problem (by key, line and variable, never a
// value) or "ok", and exits 1 on any problem.
func Main(service string, run func(ctx context.Context, env Env) error, validate func(*config.Config) error) {
	fs := flag.NewFlagSet(service, flag.ContinueOnError)
	path := fs.String("config", "", "configuration file (YAML)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	check := fs.Bool("check", false, "validate the configuration file as the service would at start, print its problems, and exit")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if *showVersion {
		fmt.Println(service, Version)
		return
	}
	if *path == "" {
		fmt.Fprintf(os.Stderr, "%s: --config FILE is required\n", service)
		os.Exit(2)
	}
	// SIGHUP asks for a configuration reload. It is caught from the
	// start: its default action would end the process.
	hangup := make(chan os.Signal, 1)
	signal.Notify(hangup, syscall.SIGHUP)
	raw, err := os.ReadFile(*path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: read config: %v\n", service, err)
		os.Exit(1)
	}
	// A file refused at start is reported as a reload's refusal is: by
	// keys, lines and environment variables, never a value (the same
	// parse and validation; stderr reaches the same log collectors).
	cfg, err := config.Parse(raw, os.LookupEnv)
	if err == nil && *check {
		err = cfg.Annotate(validate(cfg))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", service, err)
		os.Exit(1)
	}
	if *check {
		fmt.Printf("%s: %s: ok\n", service, *path)
		return
	}
	log := logging.New(os.Stderr, cfg.Logging, service)
	slog.SetDefault(log)
	// The floor starts before run validates the file, so only a valid
	// ops section sets it (run refuses an invalid one).
	if cfg.Ops.Validate() == nil {
		if _, off := heapfloor.Start(cfg.Ops.HeapFloorBytes()); off != "" {
			log.Info("garbage collector paced by Go alone", "reason", off)
		}
	}
	if limit, off := heapfloor.SetMemoryLimit(); off == "" {
		log.Info("soft memory limit set below the container's", "limit_bytes", limit)
	} else {
		log.Info("soft memory limit not set", "reason", off)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	shutdownTracing, err := telemetry.Setup(ctx, cfg.Telemetry, service, Version)
	if err != nil {
		log.Error("telemetry setup failed", "err", err)
		os.Exit(1)
	}
	runErr := run(ctx, Env{Service: service, Config: cfg, Log: log, ConfigPath: *path, configRaw: raw, hangup: hangup})
	flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := shutdownTracing(flushCtx); err != nil {
		log.Warn("telemetry flush failed", "err", err)
	}
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		// A service's own checks may name keys too (config.KeyError):
		// cfg names the variables their values came from.
		attrs := []any{"err", cfg.Annotate(runErr)}
		if advice := exitAdvice(runErr); advice != "" {
			attrs = append(attrs, "advice", advice)
		}
		log.Error("exiting", attrs...)
		os.Exit(1)
	}
	log.Info("stopped")
}

// exitAdvice says what to do about an error a service stops with, when it
// is one a first run meets; "" otherwise.
func exitAdvice(err error) string {
	if errors.Is(err, syscall.EADDRINUSE) {
		return "another process listens at that address (an earlier run still going?): stop it, or set another address in the configuration " +
			"(gateway.listen, gateway.opsListen, aggregator.listen, aggregator.httpListen, indexer.listen, indexer.httpListen)"
	}
	return ""
}
