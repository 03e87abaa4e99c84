package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboard-mcp/switchboard/services/config"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// Bounds of a task's fields. Every field is bounded where it enters, so
// that no request can make a row (or a reply carrying one) larger than
// these add up to; a request past any is INVALID_ARGUMENT.
const (
	// maxTaskNameBytes bounds the owner (a principal's subject, bounded
	// alike by svcauth), the server, the tool, the backend and the runner.
	maxTaskNameBytes          = 1024
	maxTaskStatusMessageBytes = 64 << 10
	maxTaskCallBytes          = config.MaxTaskCallBytes
	// maxTaskInputBytes bounds input_requests_json and
	// input_responses_json.
	maxTaskInputBytes        = config.MaxTaskInputBytes
	maxTaskRequestStateBytes = config.MaxTaskRequestStateBytes
	// maxTaskResultBytes bounds result_json and error_json: the most
	// aggregator.tasks.maxResultBytes may be.
	maxTaskResultBytes = config.MaxTaskResultBytes
	// maxTaskTTL bounds how far ahead a task may expire: the most
	// aggregator.tasks.maxTTL may be.
	maxTaskTTL = config.MaxTaskTTL
	// maxTaskLease bounds how far ahead a runner's lease may lapse: a
	// runner renews its leases often, so that a replica that stops fails
	// its tasks soon, and a lease an hour long would leave them working
	// for that long.
	maxTaskLease = time.Hour
)

// validTaskKey reports whether k is a task key: the SHA-256 of a task id in
// lower-case hex, one spelling per task.
func validTaskKey(k string) bool {
	if len(k) != 64 {
		return false
	}
	for i := range len(k) {
		if c := k[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// checkTaskText refuses text PostgreSQL cannot store (not UTF-8, or NUL)
// or longer than max bytes.
func checkTaskText(field, v string, max int) error {
	switch {
	case len(v) > max:
		return invalidArgument(fmt.Sprintf("%s is longer than %d bytes", field, max))
	case !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0:
		return invalidArgument(field + " must be UTF-8 without NUL")
	}
	return nil
}

// checkTaskNames checks a task's owner and server.
func checkTaskNames(owner, server string) error {
	if err := checkTaskText("owner", owner, maxTaskNameBytes); err != nil {
		return err
	}
	return checkTaskText("server", server, maxTaskNameBytes)
}

func checkRunner(runner string) error {
	if runner == "" {
		return invalidArgument("runner is required")
	}
	return checkTaskText("runner", runner, maxTaskNameBytes)
}

// checkTaskJSON checks a field holding JSON, when set.
func checkTaskJSON(field, v string, max int) error {
	if len(v) > max {
		return invalidArgument(fmt.Sprintf("%s is longer than %d bytes", field, max))
	}
	if v != "" && !json.Valid([]byte(v)) {
		return invalidArgument(field + " must be JSON")
	}
	return nil
}

// checkInputJSON checks input_requests_json or input_responses_json: a
// JSON object when set, with at least one key when required.
func checkInputJSON(field, v string, required bool) error {
	if err := checkTaskJSON(field, v, maxTaskInputBytes); err != nil {
		return err
	}
	if v == "" && !required {
		return nil
	}
	var object map[string]json.RawMessage
	if json.Unmarshal([]byte(v), &object) != nil || object == nil {
		return invalidArgument(field + " must be a JSON object")
	}
	if required && len(object) == 0 {
		return invalidArgument(field + " must be a JSON object with at least one key")
	}
	return nil
}

// taskRef checks a client's reference to a task, and that the caller may
// act for its owner.
func (s *Server) taskRef(ctx context.Context, ref *indexerv1.TaskRef) (store.TaskRef, error) {
	if err := s.checkReady(); err != nil {
		return store.TaskRef{}, err
	}
	r := store.TaskRef{Key: ref.GetKey(), Owner: ref.GetOwner(), Server: ref.GetServer()}
	if !validTaskKey(r.Key) {
		return r, invalidArgument("ref.key must be a task key, a lower-case hex SHA-256 (64 characters)")
	}
	if err := checkTaskNames(r.Owner, r.Server); err != nil {
		return r, err
	}
	return r, ownerAllowed(ctx, r.Owner)
}

// taskLease reads a runner's lease: required, and at most maxTaskLease
// ahead (beyond clock skew).
func (s *Server) taskLease(at *timestamppb.Timestamp) (time.Time, error) {
	switch {
	case at == nil:
		return time.Time{}, invalidArgument("lease_expires_at is required")
	case at.CheckValid() != nil:
		return time.Time{}, invalidArgument("lease_expires_at is not a valid timestamp")
	case at.AsTime().After(s.now().Add(maxTaskLease + clockSkew)):
		return time.Time{}, invalidArgument("lease_expires_at is further ahead than a lease may be (" + maxTaskLease.String() + ")")
	}
	return at.AsTime(), nil
}

// newTask checks a task to create.
func (s *Server) newTask(rec *indexerv1.TaskRecord) (store.Task, error) {
	if rec == nil {
		return store.Task{}, invalidArgument("record is required")
	}
	t := store.Task{Key: rec.GetKey(), Owner: rec.GetOwner(), Server: rec.GetServer(), Tool: rec.GetTool(), Backend: rec.GetBackend(),
		Status: rec.GetStatus(), StatusMessage: rec.GetStatusMessage(), PollIntervalMS: rec.GetPollIntervalMs(),
		CallJSON: rec.GetCallJson(), InputRequestsJSON: rec.GetInputRequestsJson(), InputResponsesJSON: rec.GetInputResponsesJson(),
		RequestState: rec.GetRequestState(), ResultJSON: rec.GetResultJson(), ErrorJSON: rec.GetErrorJson(), Runner: rec.GetRunner(),
		Round: rec.GetRound()}
	if !validTaskKey(t.Key) {
		return t, invalidArgument("record.key must be a task key, a lower-case hex SHA-256 (64 characters)")
	}
	if t.Tool == "" {
		return t, invalidArgument("record.tool is required")
	}
	if !store.ValidTaskStatus(t.Status) {
		return t, invalidArgument("record.status must be working, input_required, completed, failed or cancelled")
	}
	if t.CallJSON == "" {
		return t, invalidArgument("record.call_json is required")
	}
	for _, check := range []func() error{
		func() error { return checkTaskNames(t.Owner, t.Server) },
		func() error { return checkTaskText("record.tool", t.Tool, maxTaskNameBytes) },
		func() error { return checkTaskText("record.backend", t.Backend, maxTaskNameBytes) },
		func() error {
			return checkTaskText("record.status_message", t.StatusMessage, maxTaskStatusMessageBytes)
		},
		func() error { return checkTaskJSON("record.call_json", t.CallJSON, maxTaskCallBytes) },
		func() error {
			return checkInputJSON("record.input_requests_json", t.InputRequestsJSON, t.Status == store.TaskInputRequired)
		},
		func() error { return checkInputJSON("record.input_responses_json", t.InputResponsesJSON, false) },
		func() error { return checkTaskText("record.request_state", t.RequestState, maxTaskRequestStateBytes) },
		func() error { return checkTaskJSON("record.result_json", t.ResultJSON, maxTaskResultBytes) },
		func() error { return checkTaskJSON("record.error_json", t.ErrorJSON, maxTaskResultBytes) },
		func() error { return checkTaskText("record.runner", t.Runner, maxTaskNameBytes) },
	} {
		if err := check(); err != nil {
			return t, err
		}
	}
	exp := rec.GetExpiresAt()
	switch {
	case exp == nil || exp.CheckValid() != nil:
		return t, invalidArgument("record.expires_at is required and must be a valid timestamp")
	case !exp.AsTime().After(s.now()):
		return t, invalidArgument("record.expires_at must be ahead")
	case exp.AsTime().After(s.now().Add(maxTaskTTL + clockSkew)):
		return t, invalidArgument("record.expires_at is further ahead than a task lives (" + maxTaskTTL.String() + ")")
	}
	t.ExpiresAt = exp.AsTime()
	// A runner holds a lease, or a replica that stopped would leave its
	// task working until it expired; only a task not ended has one.
	switch {
	case t.Runner == "" && rec.GetLeaseExpiresAt() != nil:
		return t, invalidArgument("record.lease_expires_at is a runner's: name the runner")
	case t.Runner != "" && mcpspec.TaskEnded(t.Status):
		return t, invalidArgument("record.runner: a task that ended has none")
	case t.Runner != "":
		lease, err := s.taskLease(rec.GetLeaseExpiresAt())
		if err != nil {
			return t, err
		}
		t.LeaseExpiresAt = lease
	}
	return t, nil
}

// taskAdvance checks a runner's change: every field within its bounds, and
// the fields that go with the new status set.
func taskAdvance(req *indexerv1.AdvanceTaskRequest) (store.TaskAdvance, error) {
	a := store.TaskAdvance{Key: req.GetKey(), Runner: req.GetRunner(), Round: req.GetRound(), Status: req.GetStatus(),
		StatusMessage: req.GetStatusMessage(), InputRequestsJSON: req.GetInputRequestsJson(), RequestState: req.GetRequestState(),
		ResultJSON: req.GetResultJson(), ErrorJSON: req.GetErrorJson()}
	if !validTaskKey(a.Key) {
		return a, invalidArgument("key must be a task key, a lower-case hex SHA-256 (64 characters)")
	}
	if !store.ValidTaskStatus(a.Status) {
		return a, invalidArgument("status must be working, input_required, completed, failed or cancelled")
	}
	for _, check := range []func() error{
		// A task nobody in the cluster runs (its backend does) is advanced
		// by whoever reads it from the backend: runner "".
		func() error { return checkTaskText("runner", a.Runner, maxTaskNameBytes) },
		func() error { return checkTaskText("status_message", a.StatusMessage, maxTaskStatusMessageBytes) },
		func() error {
			return checkInputJSON("input_requests_json", a.InputRequestsJSON, a.Status == store.TaskInputRequired)
		},
		func() error { return checkTaskText("request_state", a.RequestState, maxTaskRequestStateBytes) },
		func() error { return checkTaskJSON("result_json", a.ResultJSON, maxTaskResultBytes) },
		func() error { return checkTaskJSON("error_json", a.ErrorJSON, maxTaskResultBytes) },
	} {
		if err := check(); err != nil {
			return a, err
		}
	}
	switch {
	case a.Status == store.TaskCompleted && a.ResultJSON == "":
		return a, invalidArgument("result_json is required to complete a task")
	case a.Status == store.TaskFailed && !jsonObject(a.ErrorJSON):
		return a, invalidArgument("error_json is required to fail a task: the JSON-RPC error object")
	}
	return a, nil
}

// jsonObject reports whether v (valid JSON) is an object.
func jsonObject(v string) bool {
	return strings.HasPrefix(strings.TrimLeft(v, " \t\r\n"), "{")
}
