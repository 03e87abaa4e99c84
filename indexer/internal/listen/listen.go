// Package listen keeps a PostgreSQL LISTEN going for the indexer's hubs
// (revocations, session events): each listen ends when its connection
// fails, and the hub must follow again, backing off while the database is
// unreachable.
package listen

import (
	"context"
	"log/slog"
	"time"
)

const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 10 * time.Second
)

// Follow runs listen until ctx ends, again after each time it returns,
// waiting between attempts with a backoff that doubles up to maxBackoff
// and starts over once an attempt got as far as following (listening was
// called; Follow then calls onListening). what names the events in the
// log line of an interruption.
func Follow(ctx context.Context, log *slog.Logger, what string, listen func(ctx context.Context, listening func()) error, onListening func()) {
	backoff := minBackoff
	for ctx.Err() == nil {
		followed := false
		err := listen(ctx, func() {
			followed = true
			onListening()
		})
		if ctx.Err() != nil {
			return
		}
		if followed {
			backoff = minBackoff
		}
		log.WarnContext(ctx, what+" listen interrupted; reconnecting", "error", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxBackoff)
	}
}
