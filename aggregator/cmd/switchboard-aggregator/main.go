// Command switchboard-aggregator serves the aggregated, authorized catalog
// of many backend MCP servers over gRPC (AggregatorService), with optional
// /healthz, /readyz and Prometheus /metrics on HTTP. Wiring lives in
// internal/app.
package main

import (
	"github.com/switchboard-mcp/switchboard/aggregator/internal/app"
	"github.com/switchboard-mcp/switchboard/services/lifecycle"
)

func main() { lifecycle.Main("switchboard-aggregator", app.Run, app.Validate) }
