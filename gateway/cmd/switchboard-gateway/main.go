// Command switchboard-gateway is Switchboard's MCP edge: it serves MCP
// 2026-07-28 and 2025-11-25 clients on one endpoint and turns every request
// into a gRPC call to the aggregator (and the indexer for find_tool).
// Wiring lives in internal/app.
//
// Usage: switchboard-gateway --config FILE
package main

import (
	"github.com/switchboard-mcp/switchboard/gateway/internal/app"
	"github.com/switchboard-mcp/switchboard/gateway/internal/edge"
	"github.com/switchboard-mcp/switchboard/services/lifecycle"
)

func main() { lifecycle.Main("switchboard-gateway", app.Run, edge.Validate) }
