package pinning

import (
	"context"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/follow"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

const (
	// maxRetryDelay bounds the wait before another record after failures.
	maxRetryDelay = 30 * time.Second
)

// Run follows the indexer's approvals until ctx ends and calls onChange
// (a rebuild request: it must not block) whenever the tools should be
// recorded again: on each approval, on each (re)connection of the
// stream (approvals may have been missed meanwhile, and the indexer may
// have been unreachable at the last build), and after a failed record,
// with a backoff. Off does nothing.
func (g *Guard) Run(ctx context.Context, onChange func()) {
	if g == nil || g.mode == config.PinningOff || g.client == nil {
		return
	}
	done := make(chan struct{})
	go func() { defer close(done); g.retryLoop(ctx, onChange) }()
	defer func() { <-done }()
	follow.Run(ctx, follow.Streams, func(ctx context.Context, connected func()) error {
		return g.watchOnce(ctx, func() {
			connected()
			g.markStale()
			onChange()
		})
	}, func(err error, first bool, _ time.Duration) {
		if first {
			g.log.Warn("tool definition approvals watch down: approvals reach this replica at its next listing until it reconnects", "err", err)
		}
	})
}

// watchOnce reads one stream until it breaks, calling heard for each
// message (the first, a resync, included).
func (g *Guard) watchOnce(ctx context.Context, heard func()) error {
	stream, err := g.client.WatchToolDefinitions(ctx, &indexerv1.WatchToolDefinitionsRequest{})
	if err != nil {
		return err
	}
	for {
		msg, err := stream.Recv()
		if err != nil {
			return err
		}
		for _, a := range msg.GetApprovals() {
			g.log.Info("tool definition approval heard", "backend", a.GetBackend(), "tool", a.GetTool(), "digest", a.GetDigest())
		}
		heard()
	}
}

func (g *Guard) markStale() {
	g.mu.Lock()
	g.stale = true
	g.mu.Unlock()
}

// retryLoop asks for a rebuild after each failed record, waiting longer
// the more failed in a row.
func (g *Guard) retryLoop(ctx context.Context, onChange func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.retry:
		}
		g.mu.Lock()
		delay := min(time.Second<<min(g.failures, 5), maxRetryDelay)
		g.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		onChange()
	}
}
