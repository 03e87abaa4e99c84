// Command switchboard-aggregator serves the aggregated, authorized catalog
// of many backend MCP servers over gRPC (AggregatorService), with optional
// /healthz, /readyz and Prometheus /metrics on HTTP. Wiring lives in
// internal/app.
package main

import (
	"os"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/app"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/codemode"
	"github.com/switchboard-mcp/switchboard/services/lifecycle"
)

func main() {
	// The aggregator starts itself as the code runners of code mode
	// (internal/codemode): no configuration, no credential, programs on
	// its standard input.
	if len(os.Args) > 1 && os.Args[1] == codemode.RunnerFlag {
		os.Exit(codemode.RunnerMain(os.Args[2:]))
	}
	lifecycle.Main("switchboard-aggregator", app.Run, app.Validate)
}
