package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// Tasks live in the tasks table (migration 0011). A change reads the row
// FOR UPDATE, applies the change of package store (Task.Advance, Answer,
// Cancel, FailLapsed) with the database's clock, and writes the row back in
// the same transaction: concurrent changes through any replica take turns
// on the row, so each sees the last one's outcome (exactly one answer
// resumes a round).

// taskColumns are the columns of a store.Task, in scanTask's order.
const taskColumns = `task_key, owner, server, tool, backend, status, status_message, created_at, updated_at, expires_at,
	poll_interval_ms, call_json, input_requests_json, input_responses_json, request_state, result_json, error_json,
	runner, lease_expires_at, round`

// taskOwnerLockSpace holds the advisory locks of task creation: an
// owner's (hashed from its subject) serializes the count of its tasks with
// the insert. The table's bound is the task_rows counter's.
const taskOwnerLockSpace int64 = 0x5377_6964_7835

// scanTask reads taskColumns and then the database's clock.
func scanTask(row pgx.Row) (store.Task, time.Time, error) {
	var t store.Task
	var now time.Time
	var lease *time.Time
	var pollMS, round int64
	err := row.Scan(&t.Key, &t.Owner, &t.Server, &t.Tool, &t.Backend, &t.Status, &t.StatusMessage, &t.CreatedAt, &t.UpdatedAt,
		&t.ExpiresAt, &pollMS, &t.CallJSON, &t.InputRequestsJSON, &t.InputResponsesJSON, &t.RequestState, &t.ResultJSON,
		&t.ErrorJSON, &t.Runner, &lease, &round, &now)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Task{}, time.Time{}, store.ErrTaskNotFound
	}
	if err != nil {
		return store.Task{}, time.Time{}, fmt.Errorf("read task: %w", err)
	}
	if lease != nil {
		t.LeaseExpiresAt = *lease
	}
	t.PollIntervalMS, t.Round = uint32(pollMS), uint32(round)
	return t, now, nil
}

// lease is a task's lease as stored: NULL when nobody holds one.
func lease(t store.Task) *time.Time {
	if t.LeaseExpiresAt.IsZero() {
		return nil
	}
	return &t.LeaseExpiresAt
}

// CreateTask inserts the task within the bounds asked, in one
// transaction: the owner's unexpired tasks are counted under an advisory
// lock of the owner's, the table's in the task_rows counter row, whose
// row lock is held to the commit (a count of the table under one lock
// made every creation of the cluster take turns).
func (s *Store) CreateTask(ctx context.Context, t store.Task, limits store.TaskLimits) (store.Task, error) {
	created, err := s.createTask(ctx, t, limits)
	return created, classify(err)
}

func (s *Store) createTask(ctx context.Context, t store.Task, limits store.TaskLimits) (store.Task, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return store.Task{}, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if limits.PerOwner > 0 {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($2, $1))`, taskOwnerLockSpace, t.Owner); err != nil {
			return store.Task{}, fmt.Errorf("lock owner's tasks: %w", err)
		}
		full, err := atLeast(ctx, tx, `SELECT 1 FROM tasks WHERE owner = $2 AND expires_at > now() LIMIT $1`, limits.PerOwner, t.Owner)
		if err != nil {
			return store.Task{}, err
		}
		if full {
			return store.Task{}, store.ErrTasksFull
		}
	}
	created, _, err := scanTask(tx.QueryRow(ctx, `
		INSERT INTO tasks (task_key, owner, server, tool, backend, status, status_message, created_at, updated_at, expires_at,
			poll_interval_ms, call_json, input_requests_json, input_responses_json, request_state, result_json, error_json,
			runner, lease_expires_at, round)
		VALUES ($1, $2, $3, $4, $5, $6, $7, now(), now(), $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)
		ON CONFLICT (task_key) DO NOTHING
		RETURNING `+taskColumns+`, now()`,
		t.Key, t.Owner, t.Server, t.Tool, t.Backend, t.Status, t.StatusMessage, t.ExpiresAt, int64(t.PollIntervalMS), t.CallJSON,
		t.InputRequestsJSON, t.InputResponsesJSON, t.RequestState, t.ResultJSON, t.ErrorJSON, t.Runner, lease(t), int64(t.Round)))
	if errors.Is(err, store.ErrTaskNotFound) {
		return store.Task{}, store.ErrTaskExists
	}
	if err != nil {
		return store.Task{}, err
	}
	// The total, in the counter row: a row lock held to the commit, not
	// a count of the table.
	limit := int64(math.MaxInt64)
	if limits.Total > 0 {
		limit = int64(limits.Total)
	}
	tag, err := tx.Exec(ctx, `UPDATE task_rows SET count = count + 1 WHERE count < $1`, limit)
	if err != nil {
		return store.Task{}, fmt.Errorf("count tasks: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return store.Task{}, store.ErrTasksFull
	}
	return created, tx.Commit(ctx)
}

// atLeast reports whether query, which selects at most n rows, selects n:
// a count that stops at the bound costs the bound at most, whatever the
// table holds.
func atLeast(ctx context.Context, tx pgx.Tx, query string, n int, args ...any) (bool, error) {
	var count int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM (`+query+`) AS counted`, append([]any{n}, args...)...).Scan(&count); err != nil {
		return false, fmt.Errorf("count tasks: %w", err)
	}
	return count >= n, nil
}

// GetTask reads the task, and fails it first if its lease lapsed.
func (s *Store) GetTask(ctx context.Context, ref store.TaskRef) (store.Task, error) {
	t, now, err := scanTask(s.pool.QueryRow(ctx, `SELECT `+taskColumns+`, now() FROM tasks
		WHERE task_key = $1 AND owner = $2 AND server = $3 AND expires_at > now()`, ref.Key, ref.Owner, ref.Server))
	if err == nil && t.Lapsed(now) {
		t, err = s.changeTask(ctx, ref.Key, &ref, nil)
	}
	return t, classify(err)
}

// ListTasks reads a page; a task on it whose lease lapsed is failed first.
func (s *Store) ListTasks(ctx context.Context, owner, server string, after *store.TaskPosition, limit int) ([]store.Task, error) {
	query := `SELECT ` + taskColumns + `, now() FROM tasks WHERE owner = $1 AND server = $2 AND expires_at > now()`
	args := []any{owner, server, limit}
	if after != nil {
		query += ` AND (created_at, task_key) < ($4, $5)`
		args = append(args, after.CreatedAt, after.Key)
	}
	rows, err := s.pool.Query(ctx, query+` ORDER BY created_at DESC, task_key DESC LIMIT $3`, args...)
	if err != nil {
		return nil, classify(fmt.Errorf("list tasks: %w", err))
	}
	var now time.Time
	tasks, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Task, error) {
		t, clock, err := scanTask(row)
		now = clock
		return t, err
	})
	if err != nil {
		return nil, classify(err)
	}
	listed := tasks[:0]
	for _, t := range tasks {
		if t.Lapsed(now) {
			ref := t.Ref()
			t, err = s.changeTask(ctx, t.Key, &ref, nil)
			if errors.Is(err, store.ErrTaskNotFound) {
				continue // expired since it was read
			}
			if err != nil {
				return nil, classify(err)
			}
		}
		listed = append(listed, t)
	}
	return listed, nil
}

// AdvanceTask applies a runner's change (store.Task.Advance).
func (s *Store) AdvanceTask(ctx context.Context, a store.TaskAdvance) (store.Task, bool, error) {
	var applied bool
	t, err := s.changeTask(ctx, a.Key, nil, func(t *store.Task, now time.Time) (bool, error) {
		applied = t.Advance(a, now)
		return applied, nil
	})
	return t, applied, classify(err)
}

// AnswerTask merges a client's answers (store.Task.Answer).
func (s *Store) AnswerTask(ctx context.Context, a store.TaskAnswer) (store.Task, bool, error) {
	var resume bool
	t, err := s.changeTask(ctx, a.Ref.Key, &a.Ref, func(t *store.Task, now time.Time) (changed bool, err error) {
		changed, resume, err = t.Answer(a, now)
		return changed, err
	})
	return t, resume, classify(err)
}

// CancelTask cancels a task that has not ended (store.Task.Cancel).
func (s *Store) CancelTask(ctx context.Context, ref store.TaskRef, statusMessage string) (store.Task, error) {
	t, err := s.changeTask(ctx, ref.Key, &ref, func(t *store.Task, now time.Time) (bool, error) {
		return t.Cancel(statusMessage, now), nil
	})
	return t, classify(err)
}

// changeTask locks the unexpired task's row, fails it if its lease lapsed,
// applies change (unless nil) and writes the row back if either changed
// it. With ref, a task of another owner or server is store.ErrTaskNotFound.
func (s *Store) changeTask(ctx context.Context, key string, ref *store.TaskRef, change func(*store.Task, time.Time) (bool, error)) (store.Task, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return store.Task{}, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	t, now, err := scanTask(tx.QueryRow(ctx, `SELECT `+taskColumns+`, now() FROM tasks WHERE task_key = $1 AND expires_at > now() FOR UPDATE`, key))
	if err != nil {
		return store.Task{}, err
	}
	if ref != nil && (t.Owner != ref.Owner || t.Server != ref.Server) {
		return store.Task{}, store.ErrTaskNotFound
	}
	changed := t.FailLapsed(now)
	if change != nil {
		applied, err := change(&t, now)
		if err != nil {
			return store.Task{}, err
		}
		changed = changed || applied
	}
	if !changed {
		return t, nil
	}
	_, err = tx.Exec(ctx, `UPDATE tasks SET status = $2, status_message = $3, updated_at = $4, input_requests_json = $5,
			input_responses_json = $6, request_state = $7, result_json = $8, error_json = $9, runner = $10,
			lease_expires_at = $11, round = $12
		WHERE task_key = $1`,
		t.Key, t.Status, t.StatusMessage, t.UpdatedAt, t.InputRequestsJSON, t.InputResponsesJSON, t.RequestState, t.ResultJSON,
		t.ErrorJSON, t.Runner, lease(t), int64(t.Round))
	if err != nil {
		return store.Task{}, fmt.Errorf("write task: %w", err)
	}
	return t, tx.Commit(ctx)
}

// RenewTaskLeases extends, in one statement, the leases runner holds on
// working tasks whose lease has not lapsed. A lapsed lease is not renewed:
// its task is failed by the next read, and the runner must stop it now.
func (s *Store) RenewTaskLeases(ctx context.Context, runner string, keys []string, leaseExpiresAt time.Time) ([]string, error) {
	rows, err := s.pool.Query(ctx, `UPDATE tasks SET lease_expires_at = $3
		WHERE task_key = ANY($2) AND runner = $1 AND status = 'working' AND expires_at > now() AND lease_expires_at >= now()
		RETURNING task_key`, runner, keys, leaseExpiresAt)
	if err != nil {
		return nil, classify(fmt.Errorf("renew task leases: %w", err))
	}
	renewed, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, classify(fmt.Errorf("renew task leases: %w", err))
	}
	held := make(map[string]bool, len(keys))
	for _, k := range renewed {
		held[k] = true
	}
	var ended []string
	for _, k := range keys {
		if !held[k] {
			ended = append(ended, k)
			held[k] = true // named once
		}
	}
	return ended, nil
}
