package demobackend

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/mcpspec"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// taskRPC sends one Modern request, declaring the tasks extension when
// tasks is set, and returns its result and error.
func taskRPC(t *testing.T, url, method string, params map[string]any, tasks bool) (map[string]any, map[string]any) {
	t.Helper()
	caps := map[string]any{"elicitation": map[string]any{}}
	if tasks {
		caps["extensions"] = map[string]any{tasksExtension: map[string]any{}}
	}
	params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientInfo": map[string]any{"name": "t", "version": "0"}, "io.modelcontextprotocol/clientCapabilities": caps}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", name)
	} else if id, ok := params["taskId"].(string); ok {
		req.Header.Set("Mcp-Name", id)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw bytes.Buffer
	if _, err := raw.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	var msg struct {
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	if err := json.Unmarshal(mcpspec.LastMessage(resp.Header.Get("Content-Type"), raw.Bytes()), &msg); err != nil {
		t.Fatalf("%s: %s", method, raw.String())
	}
	return msg.Result, msg.Error
}

// TestBackendTasks: a backend with tasks advertises the extension, makes a
// task of a call from a client that declares it (and of no other call),
// waits for input, resumes on the answers and cancels.
func TestBackendTasks(t *testing.T) {
	b, err := New(Spec{Tasks: true, Tools: []ToolSpec{
		{Name: "sleep", Behaviour: BehaviourSleep}, {Name: "ask", Behaviour: BehaviourAsk},
	}}, Options{Name: "tasky"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b.Handler())
	t.Cleanup(srv.Close)
	url := srv.URL + MCPPath

	disc, _ := taskRPC(t, url, "server/discover", map[string]any{}, false)
	if ext, _ := disc["capabilities"].(map[string]any)["extensions"].(map[string]any); ext[tasksExtension] == nil {
		t.Fatalf("discover does not advertise tasks: %v", disc["capabilities"])
	}
	if res, _ := taskRPC(t, url, "tools/call", map[string]any{"name": "sleep", "arguments": map[string]any{"duration": "1ms"}}, false); res["resultType"] == "task" {
		t.Fatal("a task for a client that did not declare the extension")
	}
	get := func(id string) map[string]any {
		res, rpcErr := taskRPC(t, url, "tasks/get", map[string]any{"taskId": id}, true)
		if rpcErr != nil {
			t.Fatalf("tasks/get: %v", rpcErr)
		}
		return res
	}
	await := func(id, status string) map[string]any {
		var last map[string]any
		testkit.Eventually(t, "task "+status, 10*time.Second, func() bool { last = get(id); return last["status"] == status })
		return last
	}

	created, _ := taskRPC(t, url, "tools/call", map[string]any{"name": "sleep", "arguments": map[string]any{"duration": "10ms"}}, true)
	id, _ := created["taskId"].(string)
	if created["resultType"] != "task" || id == "" {
		t.Fatalf("no task: %v", created)
	}
	done := await(id, "completed")
	if res, _ := done["result"].(map[string]any); res == nil || !strings.Contains(toJSON(res), "10ms") {
		t.Fatalf("result %v", done["result"])
	}

	asked, _ := taskRPC(t, url, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{}}, true)
	id, _ = asked["taskId"].(string)
	waiting := await(id, "input_required")
	if _, ok := waiting["inputRequests"].(map[string]any)["confirm"]; !ok {
		t.Fatalf("input requests %v", waiting["inputRequests"])
	}
	taskRPC(t, url, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{}}}}, true)
	if res := await(id, "completed")["result"]; !strings.Contains(toJSON(res), "accept") {
		t.Fatalf("answered task's result %v", res)
	}

	long, _ := taskRPC(t, url, "tools/call", map[string]any{"name": "sleep", "arguments": map[string]any{"duration": "30s"}}, true)
	id, _ = long["taskId"].(string)
	testkit.Eventually(t, "the sleep running", 10*time.Second, func() bool { return b.Sleeps().Running == 1 })
	taskRPC(t, url, "tasks/cancel", map[string]any{"taskId": id}, true)
	await(id, "cancelled")
	testkit.Eventually(t, "the sleep cancelled", 10*time.Second, func() bool { return b.Sleeps().Cancelled == 1 })
	if _, rpcErr := taskRPC(t, url, "tasks/get", map[string]any{"taskId": "demo-nope"}, true); rpcErr["code"] != float64(-32602) {
		t.Fatalf("unknown task: %v", rpcErr)
	}
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// legacyRPC sends one request in a Legacy session (session "" for
// initialize) and returns its result, error and the session's id.
func legacyRPC(t *testing.T, url, session, method string, params map[string]any) (map[string]any, map[string]any, string) {
	t.Helper()
	msgOut := map[string]any{"jsonrpc": "2.0", "method": method, "params": params}
	notification := strings.HasPrefix(method, "notifications/")
	if !notification {
		msgOut["id"] = 1
	}
	body, _ := json.Marshal(msgOut)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw bytes.Buffer
	_, _ = raw.ReadFrom(resp.Body)
	if notification {
		return nil, nil, ""
	}
	var msg struct {
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	if err := json.Unmarshal(mcpspec.LastMessage(resp.Header.Get("Content-Type"), raw.Bytes()), &msg); err != nil {
		t.Fatalf("%s: %s", method, raw.String())
	}
	return msg.Result, msg.Error, resp.Header.Get("Mcp-Session-Id")
}

// TestBackendLegacyTasks: in a Legacy session, the backend advertises
// 2025-11-25's tasks, lists its tools as taking them, makes a task of a
// call with params.task, and serves tasks/get, tasks/result and
// tasks/cancel.
func TestBackendLegacyTasks(t *testing.T) {
	b, err := New(Spec{Tasks: true, Tools: []ToolSpec{{Name: "sleep", Behaviour: BehaviourSleep}}}, Options{Name: "old", StatefulOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b.Handler())
	t.Cleanup(srv.Close)
	url := srv.URL + MCPPath
	init, _, session := legacyRPC(t, url, "", "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "t", "version": "0"}})
	if caps, _ := init["capabilities"].(map[string]any); caps["tasks"] == nil || session == "" {
		t.Fatalf("initialize: %v (session %q)", init, session)
	}
	legacyRPC(t, url, session, "notifications/initialized", map[string]any{})
	listed, _, _ := legacyRPC(t, url, session, "tools/list", map[string]any{})
	if !strings.Contains(toJSON(listed), `"taskSupport":"optional"`) {
		t.Fatalf("tools/list: %v", listed)
	}
	made, _, _ := legacyRPC(t, url, session, "tools/call", map[string]any{"name": "sleep", "arguments": map[string]any{"duration": "10ms"}, "task": map[string]any{"ttl": 60000}})
	task, _ := made["task"].(map[string]any)
	id, _ := task["taskId"].(string)
	if id == "" || task["ttl"] == nil || task["ttlMs"] != nil {
		t.Fatalf("tools/call with task: %v", made)
	}
	res, rpcErr, _ := legacyRPC(t, url, session, "tasks/result", map[string]any{"taskId": id})
	if rpcErr != nil || !strings.Contains(toJSON(res), "10ms") {
		t.Fatalf("tasks/result: %v %v", res, rpcErr)
	}
	got, _, _ := legacyRPC(t, url, session, "tasks/get", map[string]any{"taskId": id})
	if got["status"] != "completed" || got["result"] != nil {
		t.Fatalf("tasks/get: %v", got)
	}
}
