package edge

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// initializeEliciting runs the Legacy handshake for a client that can
// answer elicitations, and returns the session id and the initialize
// result.
func initializeEliciting(t *testing.T, url string) (string, map[string]json.RawMessage) {
	t.Helper()
	resp := send(t, http.MethodPost, url, legacyHeaders("alice-key", ""),
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"raw","version":"1"}}}`)
	_, res, rerr := resp.rpc(t)
	id := resp.header.Get("Mcp-Session-Id")
	if resp.status != http.StatusOK || rerr != nil || id == "" {
		t.Fatalf("initialize: %d %s", resp.status, resp.body)
	}
	return id, res
}

// legacyCall posts one request of the session and decodes the answer.
func legacyCall(t *testing.T, url, session, method, params string) (map[string]json.RawMessage, *wire.Error) {
	t.Helper()
	resp := send(t, http.MethodPost, url, legacyHeaders("alice-key", session), `{"jsonrpc":"2.0","id":5,"method":"`+method+`","params":`+params+`}`)
	if resp.status != http.StatusOK {
		t.Fatalf("%s: HTTP %d %s", method, resp.status, resp.body)
	}
	_, res, rerr := resp.rpc(t)
	return res, rerr
}

// createLegacyTask calls beta_job with params.task and returns the task.
func createLegacyTask(t *testing.T, url, session string) map[string]json.RawMessage {
	t.Helper()
	res, rerr := legacyCall(t, url, session, "tools/call", `{"name":"beta_job","arguments":{},"task":{"ttl":60000}}`)
	var task map[string]json.RawMessage
	if rerr != nil || json.Unmarshal(res["task"], &task) != nil {
		t.Fatalf("tools/call with params.task: %v %v", res, rerr)
	}
	return task
}

// legacyTaskMembers are the members of a 2025-11-25 Task as the fake's
// tasks have them.
var legacyTaskMembers = []string{"createdAt", "lastUpdatedAt", "pollInterval", "status", "taskId", "ttl"}

// TestLegacyTasks: 2025-11-25's experimental tasks: the capability in
// initialize, task-augmented tools/call, tasks/get, tasks/list,
// tasks/cancel and tasks/result in their shapes, and the errors.
func TestLegacyTasks(t *testing.T) {
	b := startBackends(t)
	_, srv := startGateway(t, b, testGatewayConfig(b))
	url := srv.URL + "/mcp"
	session, init := initializeEliciting(t, url)
	var caps map[string]json.RawMessage
	_ = json.Unmarshal(init["capabilities"], &caps)
	if !jsonEqual(t, caps["tasks"], json.RawMessage(`{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`)) {
		t.Fatalf("initialize capabilities.tasks = %s", caps["tasks"])
	}

	res, rerr := legacyCall(t, url, session, "tools/call", `{"name":"beta_job","arguments":{},"task":{"ttl":60000}}`)
	if rerr != nil || !slices.Equal(keysOf(res), []string{"_meta", "task"}) {
		t.Fatalf("CreateTaskResult: %v %v", res, rerr)
	}
	var task map[string]json.RawMessage
	_ = json.Unmarshal(res["task"], &task)
	id := taskIDOf(t, task)
	if !slices.Equal(keysOf(task), legacyTaskMembers) || string(task["ttl"]) != "60000" || string(task["pollInterval"]) != "20" ||
		string(task["createdAt"]) != `"2026-07-28T10:30:00.123Z"` {
		t.Errorf("task %v", task)
	}
	if !jsonEqual(t, res["_meta"], json.RawMessage(`{"io.modelcontextprotocol/related-task":{"taskId":"`+id+`"}}`)) {
		t.Errorf("CreateTaskResult _meta = %s", res["_meta"])
	}
	calls, _, _, _, _ := b.taskRequests()
	if last := calls[len(calls)-1]; last.GetTask().GetTtlMs() != 60000 || last.GetPrincipal().GetSubject() != "alice" {
		t.Errorf("the aggregator got %v", last)
	}

	t.Run("params.task and task-only tools", func(t *testing.T) {
		if _, rerr := legacyCall(t, url, session, "tools/call", `{"name":"beta_job","task":"soon"}`); rerr == nil || rerr.Code != wire.CodeInvalidParams {
			t.Errorf("a task that is not an object: %v", rerr)
		}
		if _, rerr := legacyCall(t, url, session, "tools/call", `{"name":"beta_job","task":{"ttl":-1}}`); rerr == nil || rerr.Code != wire.CodeInvalidParams {
			t.Errorf("a negative ttl: %v", rerr)
		}
		res, rerr := legacyCall(t, url, session, "tools/call", `{"name":"beta_job"}`)
		if rerr != nil || res["task"] != nil || res["content"] == nil {
			t.Errorf("without params.task: %v %v", res, rerr)
		}
		_, rerr = legacyCall(t, url, session, "tools/call", `{"name":"beta_batch"}`)
		if rerr == nil || rerr.Code != wire.CodeMethodNotFound || !strings.Contains(rerr.Message, "params.task") {
			t.Errorf("task-only tool without params.task: %v", rerr)
		}
	})

	t.Run("get, list and cancel", func(t *testing.T) {
		res, rerr := legacyCall(t, url, session, "tasks/get", `{"taskId":"`+id+`"}`)
		if rerr != nil || !slices.Equal(keysOf(res), legacyTaskMembers) || string(res["status"]) != `"working"` {
			t.Errorf("tasks/get: %v %v", res, rerr)
		}
		second := taskIDOf(t, createLegacyTask(t, url, session))
		res, rerr = legacyCall(t, url, session, "tasks/list", `{}`)
		var page []map[string]json.RawMessage
		if rerr != nil || json.Unmarshal(res["tasks"], &page) != nil || len(page) != 1 || taskIDOf(t, page[0]) != second || string(res["nextCursor"]) != `"`+id+`"` {
			t.Fatalf("tasks/list: %v %v", res, rerr)
		}
		res, rerr = legacyCall(t, url, session, "tasks/list", `{"cursor":"`+id+`"}`)
		if rerr != nil || json.Unmarshal(res["tasks"], &page) != nil || len(page) != 1 || taskIDOf(t, page[0]) != id || res["nextCursor"] != nil {
			t.Fatalf("tasks/list page two: %v %v", res, rerr)
		}
		if _, rerr := legacyCall(t, url, session, "tasks/list", `{"cursor":"bogus"}`); rerr == nil || rerr.Code != wire.CodeInvalidParams {
			t.Errorf("tasks/list with a bad cursor: %v", rerr)
		}
		res, rerr = legacyCall(t, url, session, "tasks/cancel", `{"taskId":"`+second+`"}`)
		if rerr != nil || string(res["status"]) != `"cancelled"` || string(res["statusMessage"]) != `"cancelled by request"` || res["resultType"] != nil {
			t.Errorf("tasks/cancel: %v %v", res, rerr)
		}
		_, _, _, _, lists := b.taskRequests()
		if len(lists) != 3 || lists[1].GetCursor() != id || lists[0].GetPrincipal().GetSubject() != "alice" {
			t.Errorf("ListTasks got %v", lists)
		}
	})

	t.Run("tasks/result", func(t *testing.T) {
		b.setTask(id, func(t *aggregatorv1.Task) {
			t.Status = "completed"
			t.ResultJson = `{"content":[{"type":"text","text":"42"}],"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"backend"}}}`
		})
		res, rerr := legacyCall(t, url, session, "tasks/result", `{"taskId":"`+id+`"}`)
		if rerr != nil || !slices.Equal(keysOf(res), []string{"_meta", "content"}) ||
			!jsonEqual(t, res["_meta"], json.RawMessage(`{"io.modelcontextprotocol/related-task":{"taskId":"`+id+`"}}`)) {
			t.Errorf("tasks/result of a completed task: %v %v", res, rerr)
		}
		b.setTask(id, func(t *aggregatorv1.Task) {
			t.Status, t.ResultJson, t.ErrorJson = "failed", "", `{"code":-32602,"message":"bad input","data":{"field":"a"}}`
		})
		_, rerr = legacyCall(t, url, session, "tasks/result", `{"taskId":"`+id+`"}`)
		if rerr == nil || rerr.Code != wire.CodeInvalidParams || rerr.Message != "bad input" || !jsonEqual(t, mustJSON(t, rerr.Data), json.RawMessage(`{"field":"a"}`)) {
			t.Errorf("tasks/result of a failed task: %v", rerr)
		}
		b.setTask(id, func(t *aggregatorv1.Task) { t.Status, t.ErrorJson = "cancelled", "" })
		_, rerr = legacyCall(t, url, session, "tasks/result", `{"taskId":"`+id+`"}`)
		if rerr == nil || rerr.Code != wire.CodeInternalError || !strings.Contains(rerr.Message, "cancelled") {
			t.Errorf("tasks/result of a cancelled task: %v", rerr)
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, method := range []string{"tasks/get", "tasks/cancel", "tasks/result"} {
			if _, rerr := legacyCall(t, url, session, method, `{"taskId":"t1.nosuch"}`); rerr == nil || rerr.Code != wire.CodeInvalidParams {
				t.Errorf("%s of an unknown task: %v", method, rerr)
			}
			if _, rerr := legacyCall(t, url, session, method, `{}`); rerr == nil || rerr.Code != wire.CodeInvalidParams || !strings.Contains(rerr.Message, "taskId") {
				t.Errorf("%s without taskId: %v", method, rerr)
			}
		}
		if _, rerr := legacyCall(t, url, session, "tasks/update", `{"taskId":"`+id+`","inputResponses":{}}`); rerr == nil || rerr.Code != wire.CodeMethodNotFound {
			t.Errorf("tasks/update under Legacy: %v", rerr)
		}
	})
}

// TestLegacyTaskResultWaitsAndAsks: tasks/result blocks while the task
// works, asks the client the task's input on the response stream (each
// request tied to the task in its _meta), gives the answers to the task
// with UpdateTask and answers with the result once the task completes.
func TestLegacyTaskResultWaitsAndAsks(t *testing.T) {
	b := startBackends(t)
	_, srv := startGateway(t, b, testGatewayConfig(b))
	url := srv.URL + "/mcp"
	session, _ := initializeEliciting(t, url)
	id := taskIDOf(t, createLegacyTask(t, url, session))
	b.tasks.mu.Lock()
	b.tasks.onUpdate = func(t *aggregatorv1.Task, responses string) {
		t.Status, t.InputRequestsJson = "working", ""
		t.LastUpdatedAt.Nanos++
	}
	b.tasks.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, lines := openStream(t, ctx, url, legacyHeaders("alice-key", session), `{"jsonrpc":"2.0","id":"r1","method":"tasks/result","params":{"taskId":"`+id+`"}}`)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("tasks/result: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	// The task works: tasks/result keeps reading it.
	testkit.Eventually(t, "tasks/result to poll the working task", 10*time.Second, func() bool {
		_, gets, _, _, _ := b.taskRequests()
		return len(gets) >= 2
	})
	b.setTask(id, func(t *aggregatorv1.Task) {
		t.Status = "input_required"
		t.InputRequestsJson = `{"confirm":{"method":"elicitation/create","params":{"mode":"form","message":"go on?","requestedSchema":{"type":"object","properties":{}}}}}`
	})
	var asked struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Message string                     `json:"message"`
			Meta    map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(nextEvent(t, lines)), &asked); err != nil || asked.Method != "elicitation/create" || asked.Params.Message != "go on?" ||
		!jsonEqual(t, asked.Params.Meta[wire.MetaRelatedTask], json.RawMessage(`{"taskId":"`+id+`"}`)) {
		t.Fatalf("input request: %+v %v", asked, err)
	}
	answer := send(t, http.MethodPost, url, legacyHeaders("alice-key", session), `{"jsonrpc":"2.0","id":`+string(asked.ID)+`,"result":{"action":"accept","content":{}}}`)
	if answer.status != http.StatusAccepted {
		t.Fatalf("answer: %d %s", answer.status, answer.body)
	}
	testkit.Eventually(t, "the answer to reach the task", 10*time.Second, func() bool {
		_, _, updates, _, _ := b.taskRequests()
		return len(updates) == 1
	})
	_, _, updates, _, _ := b.taskRequests()
	if updates[0].GetTaskId() != id || !jsonEqual(t, json.RawMessage(updates[0].GetInputResponsesJson()), json.RawMessage(`{"confirm":{"action":"accept","content":{}}}`)) {
		t.Fatalf("UpdateTask got %v", updates[0])
	}
	b.setTask(id, func(t *aggregatorv1.Task) {
		t.Status, t.ResultJson = "completed", `{"content":[{"type":"text","text":"went on"}]}`
	})
	var final struct {
		ID     json.RawMessage            `json:"id"`
		Result map[string]json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal([]byte(nextEvent(t, lines)), &final); err != nil || string(final.ID) != `"r1"` || !strings.Contains(string(final.Result["content"]), "went on") ||
		!jsonEqual(t, final.Result["_meta"], json.RawMessage(`{"io.modelcontextprotocol/related-task":{"taskId":"`+id+`"}}`)) {
		t.Fatalf("tasks/result: %+v %v", final, err)
	}
	_, _, updates, _, _ = b.taskRequests()
	if len(updates) != 1 {
		t.Errorf("the client was asked %d times", len(updates))
	}
}

// TestLegacyTaskResultAsksARoundOnce: a round of input the client
// answered is not asked again while the task has not moved on (a
// backend's own task reads input_required until the backend takes the
// answers). The task UpdateTask returns, which carries no input
// requests, was once taken for a new round: the next read of the task
// asked the client the same questions again, and every round counted
// twice against the bound of rounds.
func TestLegacyTaskResultAsksARoundOnce(t *testing.T) {
	b := startBackends(t)
	_, srv := startGateway(t, b, testGatewayConfig(b))
	url := srv.URL + "/mcp"
	session, _ := initializeEliciting(t, url)
	id := taskIDOf(t, createLegacyTask(t, url, session))
	b.setTask(id, func(t *aggregatorv1.Task) {
		t.Status = "input_required"
		t.InputRequestsJson = `{"confirm":{"method":"elicitation/create","params":{"mode":"form","message":"go on?","requestedSchema":{"type":"object","properties":{}}}}}`
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, lines := openStream(t, ctx, url, legacyHeaders("alice-key", session), `{"jsonrpc":"2.0","id":"r1","method":"tasks/result","params":{"taskId":"`+id+`"}}`)
	var asked struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.Unmarshal([]byte(nextEvent(t, lines)), &asked); err != nil || asked.Method != "elicitation/create" {
		t.Fatalf("input request: %+v %v", asked, err)
	}
	send(t, http.MethodPost, url, legacyHeaders("alice-key", session), `{"jsonrpc":"2.0","id":`+string(asked.ID)+`,"result":{"action":"accept","content":{}}}`)
	testkit.Eventually(t, "the answer to reach the task", 10*time.Second, func() bool {
		_, _, updates, _, _ := b.taskRequests()
		return len(updates) == 1
	})
	_, gets, _, _, _ := b.taskRequests()
	// Still input_required, as it was: read again and again, not asked.
	testkit.Eventually(t, "tasks/result to keep reading the task", 10*time.Second, func() bool {
		_, now, _, _, _ := b.taskRequests()
		return len(now) >= len(gets)+3
	})
	b.setTask(id, func(t *aggregatorv1.Task) {
		t.Status, t.InputRequestsJson, t.ResultJson = "completed", "", `{"content":[{"type":"text","text":"went on"}]}`
	})
	var final struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.Unmarshal([]byte(nextEvent(t, lines)), &final); err != nil || string(final.ID) != `"r1"` || final.Method != "" {
		t.Fatalf("after the answer: %+v %v, want the result", final, err)
	}
	if _, _, updates, _, _ := b.taskRequests(); len(updates) != 1 {
		t.Errorf("the task got %d answers, want 1", len(updates))
	}
}

// TestLegacyTaskResultEndsWithItsSession: a tasks/result waiting for its
// task ends, with an error saying why, once its session is deleted: it
// acted for the session (asking its client, answering the task) for as
// long as the task ran. The task itself goes on.
func TestLegacyTaskResultEndsWithItsSession(t *testing.T) {
	b := startBackends(t)
	_, srv := startGateway(t, b, testGatewayConfig(b))
	url := srv.URL + "/mcp"
	session, _ := initializeEliciting(t, url)
	id := taskIDOf(t, createLegacyTask(t, url, session))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, lines := openStream(t, ctx, url, legacyHeaders("alice-key", session), `{"jsonrpc":"2.0","id":"r1","method":"tasks/result","params":{"taskId":"`+id+`"}}`)
	testkit.Eventually(t, "tasks/result polls the task", 10*time.Second, func() bool {
		_, gets, _, _, _ := b.taskRequests()
		return len(gets) > 0
	})
	if resp := send(t, http.MethodDelete, url, legacyHeaders("alice-key", session), ""); resp.status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", resp.status, resp.body)
	}
	var final struct {
		Error *wire.Error `json:"error"`
	}
	if err := json.Unmarshal([]byte(nextEvent(t, lines)), &final); err != nil || final.Error == nil || !strings.Contains(final.Error.Message, "session was deleted") {
		t.Fatalf("tasks/result after its session was deleted: %+v %v", final.Error, err)
	}
	if _, _, _, cancels, _ := b.taskRequests(); len(cancels) != 0 {
		t.Fatalf("the task was cancelled: %v", cancels)
	}
}

// TestLegacyTaskResultOfAnEndedTaskTakesNoStream: only a tasks/result
// that waits for its task is one of the principal's open streams; one
// whose task has ended answers at once, even with every stream of the
// principal open (before, it was refused with 429 for a wait it never
// made).
func TestLegacyTaskResultOfAnEndedTaskTakesNoStream(t *testing.T) {
	b := startBackends(t)
	cfg := testGatewayConfig(b)
	cfg.Streams.MaxPerPrincipal = 1
	_, srv := startGateway(t, b, cfg)
	url := srv.URL + "/mcp"
	session, _ := initializeEliciting(t, url)
	id := taskIDOf(t, createLegacyTask(t, url, session))
	b.setTask(id, func(t *aggregatorv1.Task) {
		t.Status = "completed"
		t.ResultJson = `{"content":[{"type":"text","text":"42"}],"resultType":"complete"}`
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := legacyHeaders("alice-key", session)
	h["Accept"] = "text/event-stream"
	if get, _ := openRequest(t, ctx, http.MethodGet, url, h, ""); get.StatusCode != http.StatusOK {
		t.Fatalf("the principal's one stream: HTTP %d", get.StatusCode)
	}
	resp := send(t, http.MethodPost, url, legacyHeaders("alice-key", session), `{"jsonrpc":"2.0","id":5,"method":"tasks/result","params":{"taskId":"`+id+`"}}`)
	if _, res, rerr := resp.rpc(t); resp.status != http.StatusOK || rerr != nil || res["content"] == nil {
		t.Fatalf("tasks/result of a completed task with every stream open: HTTP %d %s", resp.status, resp.body)
	}
}
