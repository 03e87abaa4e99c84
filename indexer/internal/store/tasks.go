package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

// Tasks keeps the MCP tasks the aggregators run for their clients, so that
// any aggregator replica answers for any task (proto/switchboard/indexer/v1
// tasks.proto is the contract). A task is keyed by the SHA-256 of its id,
// in lower-case hex. Every read or change by a client names the
// owner and server the task was created through (TaskRef); a task of
// another owner or server, one that expired, and one that does not exist
// are all ErrTaskNotFound.
//
// A task whose runner's lease lapsed (working, or input_required with a
// runner, and LeaseExpiresAt before the store's clock) is failed by the
// first operation that meets it (Task.FailLapsed), before that operation
// does anything else: a tool call may not be idempotent, so a task is
// never resumed on another replica.
type Tasks interface {
	// CreateTask stores t (its CreatedAt and UpdatedAt are the store's
	// clock) and returns it as stored. An owner holding limits.PerOwner
	// unexpired tasks, or a store holding limits.Total, is ErrTasksFull
	// (0 means no bound); the check and the insert are one step across
	// every handle. A key stored already is ErrTaskExists.
	CreateTask(ctx context.Context, t Task, limits TaskLimits) (Task, error)
	// GetTask returns the task.
	GetTask(ctx context.Context, ref TaskRef) (Task, error)
	// ListTasks returns at most limit of the owner's unexpired tasks in
	// server, newest first (CreatedAt, then Key, both descending), after
	// the position after when it is not nil.
	ListTasks(ctx context.Context, owner, server string, after *TaskPosition, limit int) ([]Task, error)
	// AdvanceTask applies a runner's change when the task is not terminal
	// and is in a.Round, run by a.Runner; otherwise it returns the task
	// unchanged and applied false. A key not stored (or expired) is
	// ErrTaskNotFound.
	AdvanceTask(ctx context.Context, a TaskAdvance) (t Task, applied bool, err error)
	// AnswerTask merges a client's answers into an input_required task
	// (see TaskAnswer). When every request of the round is answered the
	// task goes back to working in the next round, run by a.Runner until
	// a.LeaseExpiresAt, and resume is true: of concurrent callers, through
	// any handle, exactly one gets it for a round. A task that is not
	// input_required is returned unchanged.
	AnswerTask(ctx context.Context, a TaskAnswer) (t Task, resume bool, err error)
	// CancelTask cancels a task that is not terminal; a terminal one is
	// returned unchanged.
	CancelTask(ctx context.Context, ref TaskRef, statusMessage string) (Task, error)
	// RenewTaskLeases extends until leaseExpiresAt the leases runner holds
	// on the working tasks among keys, and returns the keys it holds none
	// on (any more), in the order given, each once: ended, expired,
	// waiting for input, failed when a lease lapsed, or run by another.
	RenewTaskLeases(ctx context.Context, runner string, keys []string, leaseExpiresAt time.Time) (ended []string, err error)
}

// Task statuses, as MCP names them (mcpspec).
const (
	TaskWorking       = mcpspec.TaskWorking
	TaskInputRequired = mcpspec.TaskInputRequired
	TaskCompleted     = mcpspec.TaskCompleted
	TaskFailed        = mcpspec.TaskFailed
	TaskCancelled     = mcpspec.TaskCancelled
)

// ValidTaskStatus reports whether status is one of the task statuses.
func ValidTaskStatus(status string) bool {
	return status == TaskWorking || status == TaskInputRequired || mcpspec.TaskEnded(status)
}

// What a task whose runner's lease lapsed is failed with.
const (
	LapsedTaskMessage   = "the aggregator replica running this task stopped before it ended"
	LapsedTaskErrorJSON = `{"code":-32603,"message":"the aggregator replica running this task stopped before it ended"}`
)

// Task is one task as stored (TaskRecord in tasks.proto).
type Task struct {
	Key, Owner, Server string
	Tool, Backend      string
	Status             string
	StatusMessage      string
	CreatedAt          time.Time
	UpdatedAt          time.Time
	ExpiresAt          time.Time
	PollIntervalMS     uint32
	CallJSON           string
	// InputRequestsJSON is the input_required round's requests, a JSON
	// object by request key; InputResponsesJSON the answers so far, a JSON
	// object with some of those keys ("" before the first).
	InputRequestsJSON  string
	InputResponsesJSON string
	RequestState       string
	ResultJSON         string
	ErrorJSON          string
	// Runner is the aggregator replica running the current round and
	// LeaseExpiresAt when its lease lapses; both empty when nobody runs
	// the task (waiting for input, or ended).
	Runner         string
	LeaseExpiresAt time.Time
	Round          uint32
}

// Ref is how the task's owner names it.
func (t Task) Ref() TaskRef { return TaskRef{Key: t.Key, Owner: t.Owner, Server: t.Server} }

// Position is where the task is in its owner's list.
func (t Task) Position() TaskPosition { return TaskPosition{CreatedAt: t.CreatedAt, Key: t.Key} }

// Lapsed reports whether the task's runner's lease lapsed before now while
// the task waited on that runner.
func (t Task) Lapsed(now time.Time) bool {
	return (t.Status == TaskWorking || t.Status == TaskInputRequired) && t.Runner != "" &&
		!t.LeaseExpiresAt.IsZero() && t.LeaseExpiresAt.Before(now)
}

// TaskRef names a task as its owner sees it.
type TaskRef struct {
	Key, Owner, Server string
}

// TaskPosition is a task's place in a list, newest first.
type TaskPosition struct {
	CreatedAt time.Time
	Key       string
}

// TaskLimits bound the unexpired tasks of one owner and of the store; 0:
// no bound.
type TaskLimits struct {
	PerOwner, Total int
}

// TaskAdvance is a runner's change of its task: the new status and what
// goes with it (InputRequestsJSON and RequestState for input_required,
// ResultJSON for completed, ErrorJSON for failed).
type TaskAdvance struct {
	Key, Runner       string
	Round             uint32
	Status            string
	StatusMessage     string
	InputRequestsJSON string
	RequestState      string
	ResultJSON        string
	ErrorJSON         string
}

// TaskAnswer is a client's answers to an input_required task's requests:
// a JSON object by request key. Answers to keys the round did not ask, or
// asked and got an answer already, are ignored.
type TaskAnswer struct {
	Ref                TaskRef
	InputResponsesJSON string
	Runner             string
	LeaseExpiresAt     time.Time
}

var (
	// ErrTaskNotFound: no such task for this owner and server (or it
	// expired).
	ErrTaskNotFound = errors.New("no such task")
	// ErrTaskExists: a task with this key is stored already.
	ErrTaskExists = errors.New("a task with this key exists")
	// ErrTasksFull: the owner, or the store, holds as many unexpired
	// tasks as the limits allow.
	ErrTasksFull = errors.New("as many tasks as the limits allow are held")
	// ErrAnswersTooLarge: the task's answers with these would be larger
	// than one update may carry (config.MaxTaskInputBytes).
	ErrAnswersTooLarge = errors.New("the task's answers together would be larger than a task may keep")
)

// The changes of a task, the same whatever keeps it: each takes the
// store's clock, changes t in place and reports whether it changed it.

// FailLapsed fails the task if its runner's lease lapsed before now.
func (t *Task) FailLapsed(now time.Time) bool {
	if !t.Lapsed(now) {
		return false
	}
	t.Status, t.StatusMessage, t.ErrorJSON = TaskFailed, LapsedTaskMessage, LapsedTaskErrorJSON
	t.stopRunning(now)
	return true
}

// stopRunning records a change at now after which nobody runs the task.
func (t *Task) stopRunning(now time.Time) {
	t.Runner, t.LeaseExpiresAt, t.UpdatedAt = "", time.Time{}, now
}

// Advance applies a runner's change if the task is not terminal and is in
// a.Round, run by a.Runner.
func (t *Task) Advance(a TaskAdvance, now time.Time) bool {
	if mcpspec.TaskEnded(t.Status) || t.Round != a.Round || t.Runner != a.Runner {
		return false
	}
	t.Status, t.StatusMessage, t.UpdatedAt = a.Status, a.StatusMessage, now
	switch a.Status {
	case TaskInputRequired:
		// A new round of requests: the answers to the last one are spent,
		// and nobody runs the task while it waits.
		t.InputRequestsJSON, t.RequestState, t.InputResponsesJSON = a.InputRequestsJSON, a.RequestState, ""
		t.stopRunning(now)
	case TaskCompleted:
		t.ResultJSON = a.ResultJSON
		t.stopRunning(now)
	case TaskFailed:
		t.ErrorJSON = a.ErrorJSON
		t.stopRunning(now)
	case TaskCancelled:
		t.stopRunning(now)
	}
	return true
}

// Answer merges a client's answers into an input_required task: the
// answers to requests of the round not answered yet. Once every request
// has one the task is working again, in the next round, run by a.Runner,
// and resume is true. The requests, the answers and the request state stay
// on the task: the runner of the next round reads them from it.
func (t *Task) Answer(a TaskAnswer, now time.Time) (changed, resume bool, err error) {
	if t.Status != TaskInputRequired {
		return false, false, nil
	}
	var requests, answers, given map[string]json.RawMessage
	if err := unmarshalObject(t.InputRequestsJSON, &requests); err != nil {
		return false, false, fmt.Errorf("task's input requests: %w", err)
	}
	if err := unmarshalObject(t.InputResponsesJSON, &answers); err != nil {
		return false, false, fmt.Errorf("task's input responses: %w", err)
	}
	if err := unmarshalObject(a.InputResponsesJSON, &given); err != nil {
		return false, false, fmt.Errorf("answers: %w", err)
	}
	for key, answer := range given {
		if _, asked := requests[key]; !asked {
			continue
		}
		if _, answered := answers[key]; answered {
			continue
		}
		answers[key] = answer
		changed = true
	}
	if changed {
		merged, err := json.Marshal(answers)
		if err != nil {
			return false, false, fmt.Errorf("merge answers: %w", err)
		}
		// Each update is bounded where it enters; answers given one by
		// one are bounded together alike, or the row (and the next
		// round's request, which carries them all) would grow with the
		// number of requests.
		if len(merged) > config.MaxTaskInputBytes {
			return false, false, ErrAnswersTooLarge
		}
		t.InputResponsesJSON, t.UpdatedAt = string(merged), now
	}
	for key := range requests {
		if _, answered := answers[key]; !answered {
			return changed, false, nil
		}
	}
	t.Status, t.Round = TaskWorking, t.Round+1
	t.Runner, t.LeaseExpiresAt, t.UpdatedAt = a.Runner, a.LeaseExpiresAt, now
	return true, true, nil
}

// Cancel cancels the task unless it ended.
func (t *Task) Cancel(statusMessage string, now time.Time) bool {
	if mcpspec.TaskEnded(t.Status) {
		return false
	}
	t.Status, t.StatusMessage = TaskCancelled, statusMessage
	t.stopRunning(now)
	return true
}

// unmarshalObject reads a JSON object ("" is an empty one) into *m, never
// nil.
func unmarshalObject(raw string, m *map[string]json.RawMessage) error {
	*m = map[string]json.RawMessage{}
	if raw == "" {
		return nil
	}
	if err := json.Unmarshal([]byte(raw), m); err != nil {
		return err
	}
	if *m == nil {
		return errors.New("not a JSON object")
	}
	return nil
}
