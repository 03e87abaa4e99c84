package wire

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/switchboard-mcp/switchboard/services/mcpspec"
	"github.com/switchboard-mcp/switchboard/services/rawjson"
)

// Tasks on the wire. A Modern client takes tasks when its request's
// clientCapabilities declare the io.modelcontextprotocol/tasks extension
// (SEP-2663): a task is a flat CreateTaskResult (resultType "task"), read
// with tasks/get, answered with tasks/update and cancelled with
// tasks/cancel, with durations named ttlMs and pollIntervalMs. A Legacy
// client asks for one with params.task (2025-11-25's experimental tasks):
// a task is {"task":{…}}, with ttl and pollInterval, read with tasks/get,
// tasks/list and tasks/result.

// TasksExtension names the tasks extension in capabilities.extensions.
const TasksExtension = mcpspec.ExtensionTasks

// MetaRelatedTask is the _meta key that ties a Legacy message to its task.
const MetaRelatedTask = "io.modelcontextprotocol/related-task"

// DeclaresTasks reports whether a client's capabilities (as it sent them)
// declare the tasks extension. They come from a message Parse accepted,
// which names no member twice, so the first member it reads is the one
// every decoder past the gateway reads.
func DeclaresTasks(caps json.RawMessage) bool {
	extensions, ok := rawjson.Get(caps, "extensions")
	if !ok || !IsObjectText(extensions) {
		return false
	}
	v, ok := rawjson.Get(extensions, TasksExtension)
	return ok && string(v) != "null"
}

// MissingTasksCapability is -32021 for a request that needs the tasks
// extension its client did not declare, naming it in data as the spec
// names required capabilities.
func MissingTasksCapability(msg string) *Error {
	e := NewError(CodeMissingCapability, msg)
	e.Data = map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{TasksExtension: struct{}{}}}}
	return e
}

// Task is a task as the gateway renders it in either era.
type Task struct {
	ID            string
	Status        string
	StatusMessage string
	CreatedAt     time.Time
	LastUpdatedAt time.Time
	TTLms         int64
	// PollIntervalMs is left out when not positive: the spec allows it
	// absent, never zero.
	PollIntervalMs int64
	// ResultIsError: completed with a result whose isError is true,
	// which 2025-11-25 calls failed ("this includes cases where the tool
	// call result has isError set to true"); tasks/result still answers
	// with the result.
	ResultIsError bool
}

// Task statuses (mcpspec's).
const (
	TaskWorking       = mcpspec.TaskWorking
	TaskInputRequired = mcpspec.TaskInputRequired
	TaskCompleted     = mcpspec.TaskCompleted
	TaskFailed        = mcpspec.TaskFailed
	TaskCancelled     = mcpspec.TaskCancelled
)

// taskTime is RFC 3339 in UTC with milliseconds, as both eras' schemas
// want ISO 8601 timestamps.
func taskTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// members renders the task's fields in era's names: ttlMs and
// pollIntervalMs for Modern, ttl and pollInterval for Legacy.
func (t Task) members(era mcpspec.Era) Object {
	ttl, poll := "ttlMs", "pollIntervalMs"
	if era != mcpspec.EraModern {
		ttl, poll = "ttl", "pollInterval"
		if t.Status == TaskCompleted && t.ResultIsError {
			t.Status = TaskFailed
		}
	}
	o := Object{}
	o.Set("taskId", t.ID)
	o.Set("status", t.Status)
	if t.StatusMessage != "" {
		o.Set("statusMessage", t.StatusMessage)
	}
	o.Set("createdAt", taskTime(t.CreatedAt))
	o.Set("lastUpdatedAt", taskTime(t.LastUpdatedAt))
	o[ttl] = strconv.AppendInt(nil, t.TTLms, 10)
	if t.PollIntervalMs > 0 {
		o[poll] = strconv.AppendInt(nil, t.PollIntervalMs, 10)
	}
	return o
}

// relatedTask is the _meta value that ties a Legacy message to task id.
func relatedTask(id string) map[string]json.RawMessage {
	b, _ := json.Marshal(map[string]string{"taskId": id})
	return map[string]json.RawMessage{MetaRelatedTask: b}
}

// CreateTaskResult is a tools/call's answer when the call became task t:
// under Modern the task's fields at the top with resultType "task" and
// nothing of a result (no result, error, inputRequests or requestState);
// under Legacy {"task":{…}} with the related task in _meta.
func CreateTaskResult(t Task, s Shaping) ([]byte, error) {
	if s.Era == mcpspec.EraModern {
		s.ResultType = "task"
		return shapeModernTask(t.members(s.Era), s)
	}
	// "Tasks MUST begin in the working status" (2025-11-25): a call
	// that ended while its task was being made (taskAfterInput) is
	// working as far as its creation says, and ended at the first
	// tasks/get.
	if t.Status != TaskWorking {
		t.Status, t.StatusMessage = TaskWorking, ""
	}
	o := Object{"task": t.members(s.Era).Encode()}
	return EditMeta(o.Encode(), relatedTask(t.ID))
}

// DetailedTask is a Modern tasks/get's answer: the task's fields and the
// details of its status (inputRequests, result or error), resultType
// "complete".
func DetailedTask(t Task, details Object, s Shaping) ([]byte, error) {
	o := t.members(mcpspec.EraModern)
	for k, v := range details {
		o[k] = v
	}
	s.ResultType = "complete"
	return shapeModernTask(o, s)
}

// shapeModernTask shapes a Modern result holding a task's fields. Its
// ttlMs is the task's, which Shape would otherwise take for a cache hint
// and drop from a result that is not cacheable.
func shapeModernTask(o Object, s Shaping) ([]byte, error) {
	s.Set = map[string]json.RawMessage{"ttlMs": o["ttlMs"]}
	delete(o, "ttlMs")
	return Shape(o.Encode(), s)
}

// LegacyTask is a task as 2025-11-25 renders it in tasks/get,
// tasks/cancel and tasks/list: its fields, flat.
func LegacyTask(t Task) json.RawMessage { return t.members(mcpspec.EraLegacy).Encode() }

// TaskCallResult is a completed task's CallToolResult for its client: a
// backend's serverInfo is dropped as from every result, and the related
// task is set in _meta for Legacy (tasks/result must name it) and dropped
// for Modern (tasks/get names the task at its top).
func TaskCallResult(result []byte, id string, era mcpspec.Era) ([]byte, error) {
	if era == mcpspec.EraModern {
		return EditMeta(result, nil, mcpspec.MetaServerInfo, MetaRelatedTask)
	}
	out, err := Shape(result, Shaping{Era: mcpspec.EraLegacy})
	if err != nil {
		return nil, err
	}
	return EditMeta(out, relatedTask(id))
}

// WithRelatedTask adds the related task to the _meta of an input
// request's params (nil params become an object), as 2025-11-25 wants of
// every request a task sends its client.
func WithRelatedTask(params json.RawMessage, id string) (json.RawMessage, error) {
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage(`{}`)
	}
	return EditMeta(params, relatedTask(id))
}
