// Package listen keeps a PostgreSQL LISTEN going for the indexer's hubs
// (revocations, session events, tool approvals): each listen ends when its
// connection fails, and the hub must follow again, backing off while the
// database is unreachable (services/follow).
package listen

import (
	"context"
	"log/slog"
	"time"

	"github.com/switchboard-mcp/switchboard/services/follow"
)

// Follow runs listen until ctx ends, again after each time it returns
// (follow.Run, with the services' stream backoff). Once an attempt got as
// far as following (listening was called), Follow calls onListening. what
// names the events in the log line of an interruption.
func Follow(ctx context.Context, log *slog.Logger, what string, listen func(ctx context.Context, listening func()) error, onListening func()) {
	follow.Run(ctx, follow.Streams, func(ctx context.Context, connected func()) error {
		return listen(ctx, func() {
			connected()
			onListening()
		})
	}, func(err error, _ bool, wait time.Duration) {
		log.WarnContext(ctx, what+" listen interrupted; reconnecting", "error", err, "backoff", wait)
	})
}
