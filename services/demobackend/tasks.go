package demobackend

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

// A backend whose spec sets tasks has tasks of its own, as 2026-07-28's
// io.modelcontextprotocol/tasks extension defines them: it advertises the
// extension, and a Modern tools/call from a client that declares it becomes
// a task the backend runs, polled with tasks/get, answered with
// tasks/update and cancelled with tasks/cancel. go-sdk has no tasks, so they
// are served on the wire, in front of it: each round of a task is the same
// tools/call sent to go-sdk's handler, detached from the client's request,
// and a round that asks for input (input_required) makes the task wait for
// tasks/update. It lets a gateway's handling of a backend's own tasks be
// tested against a real server.

const (
	tasksExtension = mcpspec.ExtensionTasks
	// taskTTL and taskPoll are what every task of the backend says.
	taskTTL  = time.Hour
	taskPoll = 200 * time.Millisecond
	// maxTaskBody bounds a request the task layer reads.
	maxTaskBody = 1 << 20
	// maxTasks bounds the tasks the backend keeps; the oldest goes first.
	maxTasks = 1024
)

// backendTask is one task and what its next round needs.
type backendTask struct {
	id, status, message string
	created, updated    time.Time
	// call is the tools/call request whose rounds the task runs.
	call           map[string]any
	inputRequests  map[string]json.RawMessage
	answers        map[string]json.RawMessage
	requestState   string
	result, errObj json.RawMessage
	cancel         context.CancelFunc
}

// taskTable is the backend's tasks.
type taskTable struct {
	mu    sync.Mutex
	tasks map[string]*backendTask
	order []string
}

// withTasks serves the task layer in front of next when the spec sets
// tasks.
func (b *Backend) withTasks(next http.Handler) http.Handler {
	if b.tasks == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxTaskBody))
		if err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params map[string]any  `json:"params"`
		}
		_ = json.Unmarshal(body, &msg)
		if r.Header.Get("Mcp-Protocol-Version") < "2026-07-28" {
			r.Body = io.NopCloser(bytes.NewReader(body))
			b.tasks.serveLegacy(w, r, next, msg.ID, msg.Method, msg.Params)
			return
		}
		switch {
		case msg.Method == "tools/call" && declaresTasks(msg.Params):
			writeRPC(w, msg.ID, b.tasks.create(next, r, msg.Params), nil)
		case msg.Method == "tasks/get" || msg.Method == "tasks/update" || msg.Method == "tasks/cancel":
			res, rpcErr := b.tasks.serve(next, r, msg.Method, msg.Params)
			writeRPC(w, msg.ID, res, rpcErr)
		default:
			r.Body = io.NopCloser(bytes.NewReader(body))
			next.ServeHTTP(w, r)
		}
	})
}

// declaresTasks reports whether a request's _meta declares the extension.
func declaresTasks(params map[string]any) bool {
	meta, _ := params["_meta"].(map[string]any)
	caps, _ := meta["io.modelcontextprotocol/clientCapabilities"].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	_, ok := ext[tasksExtension]
	return ok
}

func writeRPC(w http.ResponseWriter, id json.RawMessage, result any, rpcErr map[string]any) {
	out := map[string]any{"jsonrpc": "2.0", "id": id}
	if rpcErr != nil {
		out["error"] = rpcErr
	} else {
		out["result"] = result
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// create makes a task of a tools/call and starts its first round.
func (tt *taskTable) create(next http.Handler, r *http.Request, params map[string]any) map[string]any {
	var raw [18]byte
	_, _ = rand.Read(raw[:])
	now := time.Now().UTC()
	t := &backendTask{id: "demo-" + base64.RawURLEncoding.EncodeToString(raw[:]), status: "working", created: now, updated: now,
		call: params}
	tt.mu.Lock()
	if len(tt.order) >= maxTasks {
		delete(tt.tasks, tt.order[0])
		tt.order = tt.order[1:]
	}
	tt.tasks[t.id], tt.order = t, append(tt.order, t.id)
	tt.startLocked(next, r, t)
	view := tt.viewLocked(t, false)
	tt.mu.Unlock()
	view["resultType"] = "task"
	return view
}

// startLocked runs the task's next round: its call, with the answers and
// request state of the last round.
func (tt *taskTable) startLocked(next http.Handler, r *http.Request, t *backendTask) {
	params := map[string]any{}
	for k, v := range t.call {
		if k != "task" { // a 2025-11-25 client's task augmentation is this layer's
			params[k] = v
		}
	}
	if len(t.answers) > 0 {
		params["inputResponses"] = t.answers
		if t.requestState != "" {
			params["requestState"] = t.requestState
		}
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
	ctx, cancel := context.WithCancel(context.Background())
	t.cancel = cancel
	req := r.Clone(ctx)
	req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	req.Header.Set("Accept", "application/json, text/event-stream")
	// The round is a tools/call, whatever request started it.
	name, _ := t.call["name"].(string)
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", name)
	go func() {
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, req)
		tt.settle(t, ctx, mcpspec.LastMessage(rec.Header().Get("Content-Type"), rec.Body.Bytes()))
	}()
}

// settle records how a round ended, unless the task was cancelled.
func (tt *taskTable) settle(t *backendTask, ctx context.Context, msg []byte) {
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	_ = json.Unmarshal(msg, &resp)
	var shape struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	_ = json.Unmarshal(resp.Result, &shape)
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if ctx.Err() != nil || t.status == "cancelled" {
		return
	}
	t.updated = time.Now().UTC()
	switch {
	case len(resp.Error) > 0:
		t.status, t.errObj = "failed", resp.Error
	case shape.ResultType == "input_required" && len(shape.InputRequests) > 0:
		t.status, t.inputRequests, t.requestState, t.answers = "input_required", shape.InputRequests, shape.RequestState, map[string]json.RawMessage{}
	case len(resp.Result) > 0:
		t.status, t.result = "completed", resp.Result
	default:
		t.status, t.errObj = "failed", json.RawMessage(`{"code":-32603,"message":"the round ended without an answer"}`)
	}
}

// serve answers tasks/get, tasks/update and tasks/cancel.
func (tt *taskTable) serve(next http.Handler, r *http.Request, method string, params map[string]any) (map[string]any, map[string]any) {
	id, _ := params["taskId"].(string)
	tt.mu.Lock()
	defer tt.mu.Unlock()
	t := tt.tasks[id]
	if t == nil {
		return nil, map[string]any{"code": -32602, "message": "unknown task"}
	}
	switch method {
	case "tasks/get":
		view := tt.viewLocked(t, true)
		view["resultType"] = "complete"
		return view, nil
	case "tasks/update":
		answers, _ := params["inputResponses"].(map[string]any)
		if t.status == "input_required" {
			for k, v := range answers {
				if _, asked := t.inputRequests[k]; asked {
					t.answers[k], _ = json.Marshal(v)
				}
			}
			if len(t.answers) == len(t.inputRequests) {
				t.status, t.inputRequests, t.updated = "working", nil, time.Now().UTC()
				tt.startLocked(next, r, t)
			}
		}
	case "tasks/cancel":
		if t.status == "working" || t.status == "input_required" {
			t.status, t.message, t.updated = "cancelled", "cancelled by the client", time.Now().UTC()
			t.cancel()
		}
	}
	return map[string]any{"resultType": "complete"}, nil
}

// viewLocked is the task as the wire shows it; detailed adds what goes
// with its status.
func (tt *taskTable) viewLocked(t *backendTask, detailed bool) map[string]any {
	v := map[string]any{"taskId": t.id, "status": t.status, "createdAt": t.created.Format(time.RFC3339Nano),
		"lastUpdatedAt": t.updated.Format(time.RFC3339Nano), "ttlMs": taskTTL.Milliseconds(), "pollIntervalMs": taskPoll.Milliseconds()}
	if t.message != "" {
		v["statusMessage"] = t.message
	}
	if !detailed {
		return v
	}
	switch t.status {
	case "input_required":
		pending := map[string]json.RawMessage{}
		for k, req := range t.inputRequests {
			if _, done := t.answers[k]; !done {
				pending[k] = req
			}
		}
		v["inputRequests"] = pending
	case "completed":
		v["result"] = t.result
	case "failed":
		v["error"] = t.errObj
	}
	return v
}
