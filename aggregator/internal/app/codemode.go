package app

import (
	"fmt"
	"os"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/codemode"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/server"
	"github.com/switchboard-mcp/switchboard/services/lifecycle"
)

// withCodeMode gives api code mode's runners: this binary, started with
// codemode.RunnerFlag. Its bounds are read at start; where it is offered
// (aggregator.codeMode.enabled, servers[].codeMode) follows reloads.
func withCodeMode(env lifecycle.Env, api *server.Server) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("code mode: find this binary to run programs with: %w", err)
	}
	api.WithCodeMode(env.Config.Aggregator.CodeMode.WithDefaults(), []string{self, codemode.RunnerFlag}, env.Config.CodeModeIn)
	return nil
}
