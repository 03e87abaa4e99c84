package replicas

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
	"github.com/switchboard-mcp/switchboard/test/mcpraw"
)

// withTasks lets alpha's sleep and ask, and legacy's ask, run as tasks
// Switchboard runs, kept by the indexers.
func withTasks(cfg *config.Config) {
	cfg.Aggregator.Indexer = config.Endpoint{Address: cfg.Gateway.Indexer.Address, Token: cfg.Aggregator.Peers.Token}
	cfg.Aggregator.ToolOverrides = []config.ToolOverride{
		{Backend: "alpha", Tool: "sleep", TaskSupport: config.TaskSupportOptional, Timeout: config.Duration(time.Minute)},
		{Backend: "alpha", Tool: "ask", TaskSupport: config.TaskSupportOptional},
		{Backend: "legacy", Tool: "ask", TaskSupport: config.TaskSupportOptional},
	}
	cfg.Aggregator.Tasks.PollInterval = config.Duration(200 * time.Millisecond)
}

// taskClient speaks the 2026-07-28 tasks extension through the load
// balancer, so that consecutive requests land on other gateways.
type taskClient struct {
	t *testing.T
	c mcpraw.Client
}

func newTaskClient(t *testing.T, url string) *taskClient {
	return &taskClient{t: t, c: mcpraw.Client{URL: url, Capabilities: mcpraw.AskableTasksCapabilities}}
}

// taskReply is one answer: its JSON-RPC result or error, and the gateway
// that served it.
type taskReply struct {
	Result  map[string]any
	ErrCode int
	Gateway string
}

func (tc *taskClient) send(method, name string, params map[string]any) taskReply {
	tc.t.Helper()
	a, err := tc.c.Send(tc.t.Context(), method, name, params)
	if err != nil {
		tc.t.Fatal(err)
	}
	r := taskReply{Gateway: a.Header.Get(servedByHeader)}
	if a.Error != nil {
		r.ErrCode = a.Error.Code
	} else if err := json.Unmarshal(a.Result, &r.Result); err != nil {
		tc.t.Fatalf("%s: %v", method, err)
	}
	return r
}

// call sends a tools/call and returns its task id ("" when it was
// answered without a task).
func (tc *taskClient) call(tool string, args map[string]any) (string, taskReply) {
	r := tc.send("tools/call", tool, map[string]any{"name": tool, "arguments": args})
	id, _ := r.Result["taskId"].(string)
	return id, r
}

func (tc *taskClient) get(id string) taskReply {
	return tc.send("tasks/get", id, map[string]any{"taskId": id})
}

// await polls the task until its status is want (or terminal).
func (tc *taskClient) await(id, want string, within time.Duration) taskReply {
	tc.t.Helper()
	deadline := time.Now().Add(within)
	for {
		r := tc.get(id)
		status, _ := r.Result["status"].(string)
		if status == want || status == "completed" || status == "failed" || status == "cancelled" || time.Now().After(deadline) {
			if status != want {
				tc.t.Fatalf("task %s: status %q (error %d), want %q: %v", id, status, r.ErrCode, want, r.Result)
			}
			return r
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestTasksAcrossReplicas: tasks made through one gateway and aggregator
// are polled, answered and cancelled through the others; a task whose
// aggregator dies mid-call ends failed, never working forever.
func TestTasksAcrossReplicas(t *testing.T) {
	c := startCluster(t, withTasks)
	tc := newTaskClient(t, c.MCPURL)

	t.Run("created through one, polled through another", func(t *testing.T) {
		tc.t = t
		before := []int{handledRPCs(t, c.configs[0], "GetTask"), handledRPCs(t, c.configs[1], "GetTask")}
		id, created := tc.call("alpha_sleep", map[string]any{"duration": "2s"})
		if id == "" || created.Result["resultType"] != "task" {
			t.Fatalf("no task: %v (error %d)", created.Result, created.ErrCode)
		}
		others := 0
		for range 4 {
			if r := tc.get(id); r.Gateway != created.Gateway {
				others++
			}
		}
		done := tc.await(id, "completed", 30*time.Second)
		if others == 0 {
			t.Fatalf("every tasks/get went to %s, which created the task", created.Gateway)
		}
		res, _ := done.Result["result"].(map[string]any)
		if sc, _ := res["structuredContent"].(map[string]any); sc["slept"] != "2s" {
			t.Fatalf("completed task's result %v", res)
		}
		// No stickiness: both aggregators answered for the task.
		for i, cfg := range c.configs {
			if handledRPCs(t, cfg, "GetTask") == before[i] {
				t.Fatalf("aggregator %d answered no tasks/get", i+1)
			}
		}
	})

	t.Run("cancelled through another replica reaches the backend", func(t *testing.T) {
		tc.t = t
		before := c.admin().Sleeps(t, "alpha")
		id, _ := tc.call("alpha_sleep", map[string]any{"duration": "50s"})
		if id == "" {
			t.Fatal("no task")
		}
		tc.await(id, "working", 10*time.Second)
		waitSleeping(t, c, "alpha", before.Running+1)
		if r := tc.send("tasks/cancel", id, map[string]any{"taskId": id}); r.ErrCode != 0 || r.Result["resultType"] != "complete" {
			t.Fatalf("cancel: %v (error %d)", r.Result, r.ErrCode)
		}
		tc.await(id, "cancelled", 5*time.Second)
		// The runner stops the call at once, or at its next lease renewal.
		deadline := time.Now().Add(20 * time.Second)
		for c.admin().Sleeps(t, "alpha").Cancelled == before.Cancelled {
			if time.Now().After(deadline) {
				t.Fatal("the backend's call was not cancelled")
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	for _, backend := range []string{"alpha", "legacy"} {
		t.Run(backend+" input answered through another replica", func(t *testing.T) {
			tc.t = t
			tool := backend + "_ask"
			id, first := tc.call(tool, map[string]any{})
			if id == "" {
				t.Fatalf("no task: %v (error %d)", first.Result, first.ErrCode)
			}
			waiting := tc.await(id, "input_required", 10*time.Second)
			answers := answerAll(waiting.Result["inputRequests"])
			if r := tc.send("tasks/update", id, map[string]any{"taskId": id, "inputResponses": answers}); r.ErrCode != 0 {
				t.Fatalf("update: error %d", r.ErrCode)
			}
			done := tc.await(id, "completed", 20*time.Second)
			res, _ := done.Result["result"].(map[string]any)
			if sc, _ := res["structuredContent"].(map[string]any); sc["action"] != "accept" {
				t.Fatalf("result %v", res)
			}
		})
	}

	t.Run("another principal's task is unknown", func(t *testing.T) {
		tc.t = t
		if r := tc.get("t1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"); r.ErrCode != -32602 {
			t.Fatalf("unknown task: %v (error %d)", r.Result, r.ErrCode)
		}
	})

	t.Run("the runner killed mid-call fails the task", func(t *testing.T) {
		tc.t = t
		before := []int{handledCalls(t, c.configs[0]), handledCalls(t, c.configs[1])}
		id, _ := tc.call("alpha_sleep", map[string]any{"duration": "50s"})
		if id == "" {
			t.Fatal("no task")
		}
		runner := 0
		if handledCalls(t, c.configs[1]) > before[1] {
			runner = 1
		}
		c.Aggregators[runner].Kill()
		failed := tc.await(id, "failed", 90*time.Second)
		if e, _ := failed.Result["error"].(map[string]any); !strings.Contains(fmt.Sprint(e["message"]), "stopped") {
			t.Fatalf("failed task's error %v", failed.Result["error"])
		}
		c.Aggregators[runner].Start()
		c.Aggregators[runner].WaitReady()
	})
}

// answerAll accepts every input request.
func answerAll(requests any) map[string]any {
	out := map[string]any{}
	if m, ok := requests.(map[string]any); ok {
		for k := range m {
			out[k] = map[string]any{"action": "accept", "content": map[string]any{}}
		}
	}
	return out
}

// legacyTasks speaks 2025-11-25's experimental tasks over raw HTTP on one
// Legacy session (opened by go-sdk, declaring elicitation), through the load
// balancer: any gateway serves the session.
type legacyTasks struct {
	t       *testing.T
	url     string
	session string
	id      atomic.Int64
}

// send posts one request and reads its response stream to the end,
// answering every elicitation/create the gateway sends on it with accept;
// an error answer fails the test.
func (lt *legacyTasks) send(method string, params map[string]any) map[string]any {
	lt.t.Helper()
	res, code, msg := lt.exchange(method, params)
	if code != 0 {
		lt.t.Fatalf("%s: error %d %s", method, code, msg)
	}
	return res
}

// exchange is send, an error answer returned as its code and message.
func (lt *legacyTasks) exchange(method string, params map[string]any) (result map[string]any, code int, message string) {
	lt.t.Helper()
	id := lt.id.Add(1)
	resp := lt.post(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok && !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			continue
		}
		if !ok {
			data = sc.Text()
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Result map[string]any  `json:"result"`
			Error  *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal([]byte(data), &msg) != nil {
			continue
		}
		switch {
		case msg.Method == "elicitation/create" && len(msg.ID) > 0:
			answer := lt.post(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": map[string]any{"action": "accept", "content": map[string]any{}}})
			answer.Body.Close()
			if answer.StatusCode/100 != 2 {
				lt.t.Fatalf("answering an elicitation: HTTP %d", answer.StatusCode)
			}
		case msg.Error != nil:
			return nil, msg.Error.Code, msg.Error.Message
		case msg.Result != nil:
			return msg.Result, 0, ""
		}
	}
	lt.t.Fatalf("%s: the response ended without a result (HTTP %d)", method, resp.StatusCode)
	return nil, 0, ""
}

func (lt *legacyTasks) post(msg map[string]any) *http.Response {
	lt.t.Helper()
	body, _ := json.Marshal(msg)
	req, err := http.NewRequestWithContext(lt.t.Context(), http.MethodPost, lt.url, strings.NewReader(string(body)))
	if err != nil {
		lt.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", harness.Legacy)
	req.Header.Set("Mcp-Session-Id", lt.session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		lt.t.Fatal(err)
	}
	return resp
}

// TestLegacyTasksAcrossReplicas: a 2025-11-25 client's tasks, made, listed,
// awaited (tasks/result, answering the task's question on its stream) and
// cancelled through any replica.
func TestLegacyTasksAcrossReplicas(t *testing.T) {
	c := startCluster(t, withTasks)
	cs := harness.ConnectWith(t, c.MCPURL, harness.Legacy, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	lt := &legacyTasks{t: t, url: c.MCPURL, session: cs.ID()}
	taskOf := func(res map[string]any) string {
		t.Helper()
		task, _ := res["task"].(map[string]any)
		id, _ := task["taskId"].(string)
		if id == "" {
			t.Fatalf("no task: %v", res)
		}
		return id
	}

	id := taskOf(lt.send("tools/call", map[string]any{"name": "alpha_sleep", "arguments": map[string]any{"duration": "1s"}, "task": map[string]any{"ttl": 60000}}))
	if got := lt.send("tasks/get", map[string]any{"taskId": id}); got["taskId"] != id || got["ttl"] != float64(60000) {
		t.Fatalf("tasks/get: %v", got)
	}
	// A TTL past what a Duration holds is capped, not wrapped to one
	// already expired (the call once failed as "retry later").
	huge := taskOf(lt.send("tools/call", map[string]any{"name": "alpha_sleep", "arguments": map[string]any{"duration": "10ms"}, "task": map[string]any{"ttl": 9300000000000}}))
	if got := lt.send("tasks/get", map[string]any{"taskId": huge}); got["ttl"] != float64(config.DefaultTaskMaxTTL.Milliseconds()) {
		t.Fatalf("a task asked for 9.3e12 ms: %v, want the cap's ttl", got)
	}
	// This cluster's clients are the anonymous principal, whose tasks are
	// every anonymous client's: its list is empty, on every replica.
	listed := lt.send("tasks/list", map[string]any{})
	if tasks, _ := listed["tasks"].([]any); len(tasks) != 0 {
		t.Fatalf("tasks/list of the anonymous principal: %v, want none", listed)
	}
	res := lt.send("tasks/result", map[string]any{"taskId": id})
	if sc, _ := res["structuredContent"].(map[string]any); sc["slept"] != "1s" {
		t.Fatalf("tasks/result: %v", res)
	}
	// 2025-11-25: a task that ended cannot be cancelled (it once answered
	// the completed task as if cancelled).
	if _, code, msg := lt.exchange("tasks/cancel", map[string]any{"taskId": id}); code != -32602 {
		t.Fatalf("tasks/cancel of a completed task: error %d %q, want -32602", code, msg)
	}

	// The task's question is asked on tasks/result's stream, and the
	// client's answer resumes the task, wherever it runs.
	asking := taskOf(lt.send("tools/call", map[string]any{"name": "legacy_ask", "arguments": map[string]any{}, "task": map[string]any{}}))
	res = lt.send("tasks/result", map[string]any{"taskId": asking})
	if sc, _ := res["structuredContent"].(map[string]any); sc["action"] != "accept" {
		t.Fatalf("tasks/result of the asking task: %v", res)
	}

	long := taskOf(lt.send("tools/call", map[string]any{"name": "alpha_sleep", "arguments": map[string]any{"duration": "50s"}, "task": map[string]any{}}))
	if got := lt.send("tasks/cancel", map[string]any{"taskId": long}); got["status"] != "cancelled" {
		t.Fatalf("tasks/cancel: %v", got)
	}
}

// taskySpec is a backend with tasks of its own.
const taskySpec = `
tasks: true
tools:
  - {name: sleep, description: Wait for a duration., behaviour: sleep}
  - {name: ask, description: Ask the user before acting., behaviour: ask, text: "Proceed?"}
`

// TestBackendTasksAcrossReplicas: a backend that runs tasks itself makes
// the task; Switchboard hands the client a task of its own for it, and any
// gateway and aggregator replica polls, answers and cancels it at the
// backend.
func TestBackendTasksAcrossReplicas(t *testing.T) {
	c := startClusterOf(t, []demoBackend{{"alpha", modernSpec, false}, {"tasky", taskySpec, false}, {"oldtasks", taskySpec, true}}, func(cfg *config.Config) {
		cfg.Aggregator.Indexer = config.Endpoint{Address: cfg.Gateway.Indexer.Address, Token: cfg.Aggregator.Peers.Token}
	})
	tc := newTaskClient(t, c.MCPURL)

	before := []int{handledRPCs(t, c.configs[0], "GetTask"), handledRPCs(t, c.configs[1], "GetTask")}
	id, created := tc.call("tasky_sleep", map[string]any{"duration": "2s"})
	if !strings.HasPrefix(id, "t1.") || created.Result["resultType"] != "task" {
		t.Fatalf("not a task of Switchboard's: %v (error %d)", created.Result, created.ErrCode)
	}
	done := tc.await(id, "completed", 30*time.Second)
	if sc, _ := done.Result["result"].(map[string]any)["structuredContent"].(map[string]any); sc["slept"] != "2s" || sc["backend"] != "tasky" {
		t.Fatalf("completed: %v", done.Result)
	}
	// Every aggregator replica answers tasks/get: the gateways spread them
	// over the replicas they see ready, which a loaded machine may show
	// late, so the polls go on (each answered) until both have.
	testkit.Eventually(t, "tasks/get answered by every aggregator", 20*time.Second, func() bool {
		if r := tc.send("tasks/get", id, map[string]any{"taskId": id}); r.ErrCode != 0 || r.Result["status"] != "completed" {
			t.Fatalf("tasks/get of the completed task: error %d, %v", r.ErrCode, r.Result)
		}
		for i, cfg := range c.configs {
			if handledRPCs(t, cfg, "GetTask") == before[i] {
				return false
			}
		}
		return true
	})

	id, _ = tc.call("tasky_ask", map[string]any{})
	waiting := tc.await(id, "input_required", 10*time.Second)
	if r := tc.send("tasks/update", id, map[string]any{"taskId": id, "inputResponses": answerAll(waiting.Result["inputRequests"])}); r.ErrCode != 0 {
		t.Fatalf("update: error %d", r.ErrCode)
	}
	if sc, _ := tc.await(id, "completed", 10*time.Second).Result["result"].(map[string]any)["structuredContent"].(map[string]any); sc["action"] != "accept" {
		t.Fatal("the answer did not reach the backend's task")
	}

	sleeps := c.admin().Sleeps(t, "tasky")
	id, _ = tc.call("tasky_sleep", map[string]any{"duration": "50s"})
	waitSleeping(t, c, "tasky", sleeps.Running+1)
	tc.send("tasks/cancel", id, map[string]any{"taskId": id})
	tc.await(id, "cancelled", 5*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for c.admin().Sleeps(t, "tasky").Cancelled == sleeps.Cancelled {
		if time.Now().After(deadline) {
			t.Fatal("the backend's task was not cancelled")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// A backend that forgets its task (here: restarted) fails it, rather
	// than leaving it working or unknown.
	id, _ = tc.call("tasky_sleep", map[string]any{"duration": "50s"})
	tc.await(id, "working", 5*time.Second)
	c.Backends["tasky"].Kill()
	c.Backends["tasky"].Restart()
	if e, _ := tc.await(id, "failed", 30*time.Second).Result["error"].(map[string]any); !strings.Contains(fmt.Sprint(e["message"]), "no longer has") {
		t.Fatalf("a forgotten task's error: %v", e)
	}

	// A 2025-11-25 backend's own tasks (params.task, tasks/get,
	// tasks/result, tasks/cancel) become Switchboard's the same way.
	id, created = tc.call("oldtasks_sleep", map[string]any{"duration": "1s"})
	if !strings.HasPrefix(id, "t1.") {
		t.Fatalf("a Legacy backend's task: %v (error %d)", created.Result, created.ErrCode)
	}
	if sc, _ := tc.await(id, "completed", 30*time.Second).Result["result"].(map[string]any)["structuredContent"].(map[string]any); sc["backend"] != "oldtasks" || sc["slept"] != "1s" {
		t.Fatal("the Legacy backend's task did not complete with its result")
	}
	// Its cancellation is the backend's to honour (the demo backend's
	// Legacy session does not stop the call); the task is cancelled.
	id, _ = tc.call("oldtasks_sleep", map[string]any{"duration": "50s"})
	tc.send("tasks/cancel", id, map[string]any{"taskId": id})
	tc.await(id, "cancelled", 5*time.Second)

	// A client that takes no task gets the result, from the same backend.
	r := modernRPCCall(t, c.MCPURL, 1, "tasky_sleep", `{"duration":"1ms"}`)
	if r.isError || strings.Contains(string(r.body), `"taskId"`) {
		t.Fatalf("a call without the extension: %s", r.body)
	}
}

// waitSleeping waits until backend runs n sleeps: a cancel sent before
// the backend began the call would end it before it was counted.
func waitSleeping(t *testing.T, c *cluster, backend string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.admin().Sleeps(t, backend).Running < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s runs fewer than %d sleeps", backend, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
