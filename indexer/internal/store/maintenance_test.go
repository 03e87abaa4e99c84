package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// migrateResults is a Store whose Migrate answers from a list; nothing
// else of it is used.
type migrateResults struct {
	Store
	errs  []error
	calls int
}

func (m *migrateResults) Migrate(context.Context) (int, error) {
	m.calls++
	if len(m.errs) == 0 {
		return 1, nil
	}
	err := m.errs[0]
	m.errs = m.errs[1:]
	return 0, err
}

// Migrations are tried again while the database is unreachable or a table
// is held by another session, and not after any other failure.
func TestMigrateWithRetryRetriesWhatMayPass(t *testing.T) {
	var logs testkit.LogBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	st := &migrateResults{errs: []error{
		&UnavailableError{Err: errors.New("connection refused")},
		fmt.Errorf("migration 0013_x.sql: %w", ErrLockBusy),
	}}
	if err := MigrateWithRetry(t.Context(), st, log); err != nil || st.calls != 3 {
		t.Fatalf("MigrateWithRetry = %v after %d attempts; want nil after 3", err, st.calls)
	}
	if !strings.Contains(logs.String(), "another session holds") {
		t.Fatalf("the wait for a held table is not logged as one:\n%s", logs.String())
	}
	broken := &migrateResults{errs: []error{errors.New("syntax error")}}
	if err := MigrateWithRetry(t.Context(), broken, log); err == nil || broken.calls != 1 {
		t.Fatalf("MigrateWithRetry of a broken migration = %v after %d attempts; want its error after 1", err, broken.calls)
	}
}
