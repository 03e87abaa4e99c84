package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one versioned SQL file, NNNN_name.sql.
type migration struct {
	version int
	name    string
	sql     string
}

func loadMigrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		version, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %s: name must be NNNN_name.sql", e.Name())
		}
		raw, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: version, name: e.Name(), sql: string(raw)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// defaultMigrationLockTimeout is how long a migration waits for a lock on
// a table it changes. A migration that alters a table needs it alone, and
// while it waits behind a transaction of a replica still running the
// previous version, every other statement on that table queues behind
// the migration: a short wait that gives up and is tried again later
// costs the upgrade a few seconds instead of stalling the cluster's
// traffic for as long as the other transaction lasts.
const defaultMigrationLockTimeout = 3 * time.Second

// lockNotAvailable is PostgreSQL's SQLSTATE for a lock_timeout expiring.
const lockNotAvailable = "55P03"

// Migrate applies the embedded migrations that the schema_migrations table
// does not list yet, each in its own transaction. A session advisory lock
// makes concurrent replicas take turns: the first applies, the others find
// nothing left to do. It returns how many migrations it applied. A
// migration that waited longer than the store's migration lock timeout
// for a table is rolled back and the error is a store.ErrLockBusy: try
// again later.
func (s *Store) Migrate(ctx context.Context) (int, error) {
	n, err := s.migrate(ctx)
	return n, classify(err)
}

func (s *Store) migrate(ctx context.Context) (int, error) {
	ms, err := loadMigrations()
	if err != nil {
		return 0, err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("connect: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrateLockKey); err != nil {
		return 0, fmt.Errorf("lock migrations: %w", err)
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrateLockKey) }()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return 0, fmt.Errorf("create schema_migrations: %w", err)
	}
	applied := map[int]bool{}
	rows, err := conn.Query(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return 0, fmt.Errorf("read schema_migrations: %w", err)
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return 0, err
		}
		applied[v] = true
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("read schema_migrations: %w", err)
	}
	count := 0
	for _, m := range ms {
		if applied[m.version] {
			continue
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			return count, err
		}
		// SET LOCAL takes no parameters; the value is the store's own.
		if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", s.migrationLockTimeout.Milliseconds())); err != nil {
			_ = tx.Rollback(ctx)
			return count, fmt.Errorf("migration %s: %w", m.name, err)
		}
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			_ = tx.Rollback(ctx)
			if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == lockNotAvailable {
				return count, fmt.Errorf("migration %s: %w (waited %s)", m.name, store.ErrLockBusy, s.migrationLockTimeout)
			}
			return count, fmt.Errorf("migration %s: %w", m.name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
			_ = tx.Rollback(ctx)
			return count, fmt.Errorf("record migration %s: %w", m.name, err)
		}
		if err := tx.Commit(ctx); err != nil {
			return count, fmt.Errorf("commit migration %s: %w", m.name, err)
		}
		count++
	}
	return count, nil
}

// isNetError reports transport failures: a refused or reset connection, or
// a server that went away mid-conversation.
func isNetError(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ENOENT) ||
		errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "conn closed")
}
