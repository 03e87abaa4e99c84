package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/demobackend"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// faultyTaskBackend is a Modern backend that runs tasks (the demo
// backend) whose answers about some tools' tasks are replaced with what a
// faulty backend sends: a task with a fractional TTL (frac), a failed task
// with an error of 2 MiB (big), a task asking for input without questions
// (noinput). It returns its URL and the ids of the tasks it was asked to
// cancel.
func faultyTaskBackend(t *testing.T) (string, func() []string) {
	t.Helper()
	demo, err := demobackend.New(demobackend.Spec{Tasks: true, Tools: []demobackend.ToolSpec{
		{Name: "big", Behaviour: demobackend.BehaviourSleep}, {Name: "noinput", Behaviour: demobackend.BehaviourSleep},
		{Name: "frac", Behaviour: demobackend.BehaviourSleep}}}, demobackend.Options{Name: "faulty"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var cancelled []string
	next := demo.Handler()
	now := time.Now().UTC().Format(time.RFC3339Nano)
	task := func(id, status string) map[string]any {
		return map[string]any{"taskId": id, "status": status, "createdAt": now, "lastUpdatedAt": now, "ttlMs": 600000, "pollIntervalMs": 1000}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params map[string]any  `json:"params"`
		}
		_ = json.Unmarshal(body, &msg)
		reply := func(result map[string]any) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": result})
		}
		name, _ := msg.Params["name"].(string)
		id, _ := msg.Params["taskId"].(string)
		switch {
		case msg.Method == "tools/call" && (name == "big" || name == "noinput"):
			res := task(name+"-backend-task", "working")
			res["resultType"] = "task"
			reply(res)
		case msg.Method == "tools/call" && name == "frac":
			res := task("frac-backend-task", "working")
			res["resultType"], res["ttlMs"] = "task", 1.5
			reply(res)
		case msg.Method == "tasks/get" && id == "big-backend-task":
			res := task(id, "failed")
			res["resultType"] = "complete"
			res["error"] = map[string]any{"code": -32000, "message": "boom", "data": strings.Repeat("x", 2<<20)}
			reply(res)
		case msg.Method == "tasks/get" && id == "noinput-backend-task":
			res := task(id, "input_required")
			res["resultType"] = "complete"
			reply(res)
		case msg.Method == "tasks/cancel":
			mu.Lock()
			cancelled = append(cancelled, id)
			mu.Unlock()
			res := task(id, "cancelled")
			res["resultType"] = "complete"
			reply(res)
		default:
			r.Body = io.NopCloser(bytes.NewReader(body))
			next.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp", func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), cancelled...)
	}
}

// TestFaultyBackendTasks: what Switchboard keeps of a backend's own task
// is bounded and checked. A task it cannot take is refused as the
// backend's fault and cancelled there, never passed on with the backend's
// id; a failed task's error is bounded as a result is; a task asking for
// input without questions fails saying so, instead of every poll of it
// failing.
func TestFaultyBackendTasks(t *testing.T) {
	url, cancelled := faultyTaskBackend(t)
	c := harness.Start(t, harness.Options{Backends: []harness.Backend{{Name: "ops", Spec: tasksSpec}},
		Configure: func(cfg *config.Config) {
			withAggregatorIndexer(t, cfg)
			cfg.Aggregator.Backends = append(cfg.Aggregator.Backends, config.Backend{Name: "faulty", URL: url})
			cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: "alice-key", Subject: "alice"}}}
		}})
	alice := rawTasks(c.MCPURL, "alice-key")
	testkit.Eventually(t, "faulty listed", 10*time.Second, func() bool {
		a, err := alice.Send(t.Context(), "tools/list", "", nil)
		return err == nil && a.Error == nil && strings.Contains(string(a.Result), "faulty_frac")
	})

	a, err := alice.Send(t.Context(), "tools/call", "faulty_frac", map[string]any{"name": "faulty_frac", "arguments": map[string]any{"duration": "1s"}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(a.Result), "frac-backend-task") || a.Error == nil || a.Error.Code != -32603 {
		t.Errorf("a task with a fractional ttlMs: result %s, error %+v; want -32603 and never the backend's id", a.Result, a.Error)
	}
	testkit.Eventually(t, "the backend's task cancelled", 10*time.Second, func() error {
		if got := cancelled(); len(got) != 1 || got[0] != "frac-backend-task" {
			return fmt.Errorf("tasks/cancel sent for %v", got)
		}
		return nil
	})

	id := createTask(t, alice, "faulty_big", map[string]any{"duration": "1s"})
	got := taskResult(t)(alice.Send(t.Context(), "tasks/get", id, map[string]any{"taskId": id}))
	e, _ := got["error"].(map[string]any)
	message, _ := e["message"].(string)
	if raw, _ := json.Marshal(got); got["status"] != "failed" || len(raw) > 1<<20 || !strings.HasPrefix(message, "boom (the error of") {
		t.Errorf("a failed task whose error is 2 MiB: %d bytes, status %v, message %.200v", len(raw), got["status"], message)
	}

	id = createTask(t, alice, "faulty_noinput", map[string]any{"duration": "1s"})
	for range 2 {
		got = taskResult(t)(alice.Send(t.Context(), "tasks/get", id, map[string]any{"taskId": id}))
		e, _ = got["error"].(map[string]any)
		message, _ = e["message"].(string)
		if got["status"] != "failed" || !strings.Contains(message, "without questions") {
			t.Errorf("a task asking for input without questions: %v", got)
		}
	}
}
