// Command switchboard-indexer serves tool search over each principal's
// view of the catalog, backed by PostgreSQL full-text search.
//
//	switchboard-indexer --config switchboard.yaml
package main

import (
	"context"

	"github.com/switchboard-mcp/switchboard/services/lifecycle"

	"github.com/switchboard-mcp/switchboard/indexer/internal/app"
)

func main() {
	lifecycle.Main("switchboard-indexer", func(ctx context.Context, env lifecycle.Env) error {
		return app.RunEnv(ctx, env, app.Listeners{})
	}, app.Validate)
}
