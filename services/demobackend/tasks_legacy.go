package demobackend

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

// 2025-11-25's experimental tasks, for a backend whose spec sets tasks,
// on its Legacy sessions: initialize advertises capabilities.tasks, every
// tool lists execution.taskSupport "optional", a tools/call with
// params.task becomes a task ({"task": ...}), and tasks/get, tasks/result
// (which waits for the end) and tasks/cancel serve it. The task's rounds
// run in the caller's session, as the tasks of 2026-07-28 do (tasks.go).

// serveLegacy serves one Legacy request, a task's or another's.
func (tt *taskTable) serveLegacy(w http.ResponseWriter, r *http.Request, next http.Handler, id json.RawMessage, method string, params map[string]any) {
	switch {
	case method == "initialize":
		rewriteResult(w, r, next, func(res map[string]any) {
			caps, _ := res["capabilities"].(map[string]any)
			if caps != nil {
				caps["tasks"] = map[string]any{"list": map[string]any{}, "cancel": map[string]any{},
					"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}
			}
		})
	case method == "tools/list":
		rewriteResult(w, r, next, func(res map[string]any) {
			tools, _ := res["tools"].([]any)
			for _, t := range tools {
				if m, ok := t.(map[string]any); ok {
					m["execution"] = map[string]any{"taskSupport": "optional"}
				}
			}
		})
	case method == "tools/call" && params["task"] != nil:
		view := tt.create(next, r, params)
		delete(view, "resultType")
		writeRPC(w, id, map[string]any{"task": legacyView(view)}, nil)
	case method == "tasks/get" || method == "tasks/cancel":
		if method == "tasks/cancel" {
			if _, rpcErr := tt.serve(next, r, method, params); rpcErr != nil {
				writeRPC(w, id, nil, rpcErr)
				return
			}
		}
		view, rpcErr := tt.serve(next, r, "tasks/get", params)
		if rpcErr != nil {
			writeRPC(w, id, nil, rpcErr)
			return
		}
		// 2025-11-25 calls a task whose call reported a tool error
		// failed; its tasks/result is that result (isError).
		if result, _ := view["result"].(json.RawMessage); view["status"] == "completed" && bytes.Contains(result, []byte(`"isError":true`)) {
			view["status"] = "failed"
		}
		for _, k := range []string{"resultType", "result", "error", "inputRequests"} {
			delete(view, k)
		}
		writeRPC(w, id, legacyView(view), nil)
	case method == "tasks/result":
		taskID, _ := params["taskId"].(string)
		for {
			tt.mu.Lock()
			t := tt.tasks[taskID]
			var status string
			var result, errObj json.RawMessage
			if t != nil {
				status, result, errObj = t.status, t.result, t.errObj
			}
			tt.mu.Unlock()
			switch {
			case t == nil:
				writeRPC(w, id, nil, map[string]any{"code": -32602, "message": "unknown task"})
				return
			case status == "completed":
				writeRPC(w, id, result, nil)
				return
			case status == "failed":
				writeRPC(w, id, nil, map[string]any{"code": -32603, "message": "the task failed", "data": errObj})
				return
			case status == "cancelled":
				writeRPC(w, id, nil, map[string]any{"code": -32603, "message": "the task was cancelled"})
				return
			}
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	default:
		next.ServeHTTP(w, r)
	}
}

// legacyView is a 2026-07-28 task view as 2025-11-25 names its fields.
func legacyView(v map[string]any) map[string]any {
	v["ttl"], v["pollInterval"] = v["ttlMs"], v["pollIntervalMs"]
	delete(v, "ttlMs")
	delete(v, "pollIntervalMs")
	return v
}

// rewriteResult serves the request and passes its answer on with edit
// applied to its result, as JSON, keeping the headers (the session's id).
func rewriteResult(w http.ResponseWriter, r *http.Request, next http.Handler, edit func(map[string]any)) {
	rec := httptest.NewRecorder()
	next.ServeHTTP(rec, r)
	var msg map[string]any
	if json.Unmarshal(mcpspec.LastMessage(rec.Header().Get("Content-Type"), rec.Body.Bytes()), &msg) != nil {
		copyAnswer(w, rec)
		return
	}
	if res, ok := msg["result"].(map[string]any); ok {
		edit(res)
	}
	out, _ := json.Marshal(msg)
	for k, vs := range rec.Header() {
		if k != "Content-Length" && k != "Content-Type" {
			w.Header()[k] = vs
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rec.Code)
	_, _ = w.Write(out)
}

func copyAnswer(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	for k, vs := range rec.Header() {
		w.Header()[k] = vs
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(bytes.Clone(rec.Body.Bytes()))
}
