// Command switchboard-dev runs a whole Switchboard on one machine from one
// configuration file: the demo backends listed under dev.backends, the
// aggregator, the indexer and the gateway, each a separate process, plus a
// throwaway PostgreSQL when indexer.database is empty.
//
//	switchboard-dev --config deploy/examples/switchboard-dev.yaml
//	switchboard-dev check --config deploy/examples/switchboard-dev.yaml
//
// check validates the file as every service would at start and on reload,
// prints each problem by key and line (never a value), and exits 1 on any.
//
// Once the gateway serves it prints one line, "ready <MCP URL>", on stdout;
// its own log and the children's output (prefixed with their names) go to
// stderr. SIGINT or SIGTERM, or any child dying, stops everything in
// reverse order and removes every file it created. Unset
// ${SWITCHBOARD_...} variables the file references get random values, which
// are passed to the children and never printed.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/switchboard-mcp/switchboard/services/devstack"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "check" {
		check(os.Args[2:])
		return
	}
	fs := flag.NewFlagSet("switchboard-dev", flag.ContinueOnError)
	configPath := fs.String("config", "", "configuration file (YAML)")
	binDir := fs.String("bin-dir", "", "directory of the Switchboard binaries (default: dev.binDir, else this binary's directory)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if *configPath == "" {
		fmt.Fprintln(os.Stderr, "switchboard-dev: --config FILE is required")
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("service", "switchboard-dev")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := devstack.Run(ctx, devstack.RunOptions{
		ConfigPath: *configPath,
		BinDir:     *binDir,
		Ready:      os.Stdout,
		Output:     os.Stderr,
		Log:        log,
	})
	if err != nil {
		log.Error("failed", "err", err)
		os.Exit(1)
	}
	log.Info("stopped")
}

// check validates a configuration file as every service would
// (devstack.Check) and exits 1 if any refuses it.
func check(args []string) {
	fs := flag.NewFlagSet("switchboard-dev check", flag.ContinueOnError)
	configPath := fs.String("config", "", "configuration file (YAML)")
	binDir := fs.String("bin-dir", "", "directory of the Switchboard binaries (default: dev.binDir, else this binary's directory)")
	if err := fs.Parse(args); err != nil {
		os.Exit(2)
	}
	if *configPath == "" {
		fmt.Fprintln(os.Stderr, "switchboard-dev check: --config FILE is required")
		os.Exit(2)
	}
	if err := devstack.Check(context.Background(), devstack.CheckOptions{ConfigPath: *configPath, BinDir: *binDir, Output: os.Stdout}); err != nil {
		fmt.Fprintf(os.Stderr, "switchboard-dev check: %s: %v\n", *configPath, err)
		os.Exit(1)
	}
	fmt.Printf("switchboard-dev check: %s: ok\n", *configPath)
}
