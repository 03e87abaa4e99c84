package wire

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

func TestDeclaresTasks(t *testing.T) {
	for caps, want := range map[string]bool{
		`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`:      true,
		`{"extensions":{"io.modelcontextprotocol/tasks":{"x":1}}}`: true,
		`{"extensions":{"io.modelcontextprotocol/tasks":null}}`:    false,
		`{"extensions":{"io.modelcontextprotocol/other":{}}}`:      false,
		`{"extensions":[]}`:                            false,
		`{"tasks":{"requests":{"tools":{"call":{}}}}}`: false,
		`{}`: false,
		``:   false,
		`{"experimental":{"io.modelcontextprotocol/tasks":{}}}`:                false,
		`{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`: true,
	} {
		if got := DeclaresTasks(json.RawMessage(caps)); got != want {
			t.Errorf("DeclaresTasks(%s) = %v, want %v", caps, got, want)
		}
	}
}

// TestCheckModernGatesTasks: a tasks method of a client without the tasks
// extension is -32021 (400) with the extension in data, before its task id
// or Mcp-Name are looked at; with the extension, Mcp-Name must equal the
// task id (-32020).
func TestCheckModernGatesTasks(t *testing.T) {
	meta := func(caps string) Object {
		return Object{mcpspec.MetaProtocolVersion: json.RawMessage(`"2026-07-28"`), mcpspec.MetaClientCapabilities: json.RawMessage(caps)}
	}
	header := func(name string) http.Header {
		h := http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tasks/get"}}
		if name != "" {
			h.Set("Mcp-Name", name)
		}
		return h
	}
	params := Object{"taskId": json.RawMessage(`"t1.a"`)}
	_, rerr := CheckModern(header("t1.other"), "tasks/get", params, meta(`{}`))
	data, _ := json.Marshal(rerr.Data)
	if rerr == nil || rerr.Code != CodeMissingCapability || rerr.ModernStatus() != http.StatusBadRequest ||
		string(data) != `{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}` {
		t.Fatalf("without the extension: %+v (data %s)", rerr, data)
	}
	withTasks := meta(`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`)
	for name, want := range map[string]int{"t1.a": 0, "t1.other": CodeHeaderMismatch, "": CodeHeaderMismatch, "=?base64?dDEuYQ==?=": 0} {
		_, rerr := CheckModern(header(name), "tasks/get", params, withTasks)
		got := 0
		if rerr != nil {
			got = rerr.Code
		}
		if got != want {
			t.Errorf("Mcp-Name %q: code %d, want %d (0: accepted)", name, got, want)
		}
	}
	// tools/call is not gated: the aggregator decides whether it needs a
	// task.
	h := http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"x"}}
	if _, rerr := CheckModern(h, "tools/call", Object{"name": json.RawMessage(`"x"`)}, meta(`{}`)); rerr != nil {
		t.Errorf("tools/call without the extension: %v", rerr)
	}
}

func decodeObject(t *testing.T, b []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not an object: %s", b)
	}
	return m
}

func sortedKeys(m map[string]json.RawMessage) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestTaskRenderings: each era's shape of a task, with the durations in
// that era's names as integers, UTC timestamps with milliseconds, and
// none of the other era's members.
func TestTaskRenderings(t *testing.T) {
	at := time.Date(2026, 7, 28, 12, 30, 0, 5_000_000, time.FixedZone("CEST", 2*3600))
	task := Task{ID: "t1.a", Status: TaskWorking, CreatedAt: at, LastUpdatedAt: at.Add(time.Second), TTLms: 60000, PollIntervalMs: 500}
	modern := Shaping{Era: mcpspec.EraModern, ServerInfo: info}

	out, err := CreateTaskResult(task, modern)
	if err != nil {
		t.Fatal(err)
	}
	m := decodeObject(t, out)
	if got := sortedKeys(m); !slices.Equal(got, []string{"_meta", "createdAt", "lastUpdatedAt", "pollIntervalMs", "resultType", "status", "taskId", "ttlMs"}) {
		t.Errorf("Modern CreateTaskResult members %v", got)
	}
	if string(m["resultType"]) != `"task"` || string(m["createdAt"]) != `"2026-07-28T10:30:00.005Z"` || string(m["lastUpdatedAt"]) != `"2026-07-28T10:30:01.005Z"` ||
		string(m["ttlMs"]) != "60000" || string(m["pollIntervalMs"]) != "500" {
		t.Errorf("Modern CreateTaskResult %s", out)
	}

	task.StatusMessage, task.PollIntervalMs = "half way", 0
	out, _ = DetailedTask(task, Object{"inputRequests": json.RawMessage(`{"a":{}}`)}, modern)
	m = decodeObject(t, out)
	if string(m["resultType"]) != `"complete"` || string(m["statusMessage"]) != `"half way"` || m["pollIntervalMs"] != nil || string(m["ttlMs"]) != "60000" || string(m["inputRequests"]) != `{"a":{}}` {
		t.Errorf("DetailedTask %s", out)
	}

	out, _ = CreateTaskResult(task, Shaping{Era: mcpspec.EraLegacy, ServerInfo: info})
	m = decodeObject(t, out)
	inner := decodeObject(t, m["task"])
	if !slices.Equal(sortedKeys(m), []string{"_meta", "task"}) || !slices.Equal(sortedKeys(inner), []string{"createdAt", "lastUpdatedAt", "status", "statusMessage", "taskId", "ttl"}) ||
		string(m["_meta"]) != `{"io.modelcontextprotocol/related-task":{"taskId":"t1.a"}}` {
		t.Errorf("Legacy CreateTaskResult %s", out)
	}
	if got := decodeObject(t, LegacyTask(task)); !reflect.DeepEqual(got, inner) {
		t.Errorf("LegacyTask %v, want the CreateTaskResult's task %v", got, inner)
	}

	// 2025-11-25: a task begins working, whatever its call did while it
	// was made; one whose result is a tool error is failed, in Legacy's
	// renderings only.
	ended := task
	ended.Status, ended.StatusMessage, ended.ResultIsError = TaskCompleted, "done", true
	out, _ = CreateTaskResult(ended, Shaping{Era: mcpspec.EraLegacy, ServerInfo: info})
	inner = decodeObject(t, decodeObject(t, out)["task"])
	if string(inner["status"]) != `"working"` || inner["statusMessage"] != nil {
		t.Errorf("Legacy CreateTaskResult of a call that ended: %s", out)
	}
	if got := decodeObject(t, LegacyTask(ended)); string(got["status"]) != `"failed"` {
		t.Errorf("LegacyTask of a completed task whose result is an error: %s", got["status"])
	}
	out, _ = DetailedTask(ended, Object{}, modern)
	if got := decodeObject(t, out); string(got["status"]) != `"completed"` {
		t.Errorf("Modern tasks/get of a completed task whose result is an error: %s", got["status"])
	}
}

// TestTaskCallResult: a completed task's result loses the backend's
// serverInfo in both eras; Modern drops a related-task key, Legacy sets
// it; other _meta keys and members stay as they are.
func TestTaskCallResult(t *testing.T) {
	result := []byte(`{"content":[{"type":"text","text":"hi"}],"isError":false,"_meta":{"trace":"t","io.modelcontextprotocol/serverInfo":{"name":"backend"},"io.modelcontextprotocol/related-task":{"taskId":"old"}}}`)
	out, err := TaskCallResult(result, "t1.a", mcpspec.EraModern)
	if err != nil || string(out) != `{"content":[{"type":"text","text":"hi"}],"isError":false,"_meta":{"trace":"t"}}` {
		t.Errorf("Modern: %s %v", out, err)
	}
	out, err = TaskCallResult(result, "t1.a", mcpspec.EraLegacy)
	if err != nil || string(out) != `{"content":[{"type":"text","text":"hi"}],"isError":false,"_meta":{"trace":"t","io.modelcontextprotocol/related-task":{"taskId":"t1.a"}}}` {
		t.Errorf("Legacy: %s %v", out, err)
	}
	out, err = TaskCallResult([]byte(`{"content":[],"_meta":{"io.modelcontextprotocol/related-task":{}}}`), "t1.a", mcpspec.EraModern)
	if err != nil || string(out) != `{"content":[]}` {
		t.Errorf("an emptied _meta stays: %s %v", out, err)
	}
	if _, err := TaskCallResult([]byte(`[]`), "t1.a", mcpspec.EraModern); err == nil {
		t.Error("a result that is not an object was accepted")
	}
	params, err := WithRelatedTask(nil, "t1.a")
	if err != nil || string(params) != `{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t1.a"}}}` {
		t.Errorf("WithRelatedTask(nil): %s %v", params, err)
	}
}
