package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// MigrateWithRetry applies the migrations, retrying with capped
// exponential backoff while the backing store is unreachable or a table a
// migration changes is held by another session (ErrLockBusy). Other
// failures (a broken migration) are returned: retrying would not fix them.
// It returns nil without migrating when ctx ends first.
func MigrateWithRetry(ctx context.Context, st Store, log *slog.Logger) error {
	backoff := 200 * time.Millisecond
	for {
		n, err := st.Migrate(ctx)
		if err == nil {
			log.InfoContext(ctx, "schema migrated", "applied", n)
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		var unavailable *UnavailableError
		switch {
		case errors.Is(err, ErrLockBusy):
			log.WarnContext(ctx, "a migration waited too long for a table another session holds; retrying", "error", err, "backoff", backoff)
		case errors.As(err, &unavailable):
			log.WarnContext(ctx, "database unreachable; retrying migrations", "error", err, "backoff", backoff)
		default:
			return fmt.Errorf("migrate: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// CollectGarbageEvery runs CollectGarbage every period until ctx ends.
func CollectGarbageEvery(ctx context.Context, ix Index, every, retention time.Duration, log *slog.Logger) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		c, err := ix.CollectGarbage(ctx, retention)
		if err != nil {
			log.WarnContext(ctx, "garbage collection failed", "error", err)
			continue
		}
		if c.Scopes+c.Documents+c.Revocations+c.RequestStates+c.SessionStates+c.Tasks+c.ToolDefinitions > 0 {
			log.InfoContext(ctx, "garbage collected", "scopes", c.Scopes, "documents", c.Documents, "revocations", c.Revocations,
				"request_states", c.RequestStates, "session_states", c.SessionStates, "tasks", c.Tasks, "tool_definitions", c.ToolDefinitions)
		}
	}
}
