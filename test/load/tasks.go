package load

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// The tasks measurement: what a tools/call that becomes a task costs over
// the same call answered as usual, and what reading a completed task
// costs. It runs on a virtual server of the first W1 cluster that shows
// one echo tool of the first backend with taskSupport: optional, so /mcp,
// its catalog and every W1 figure are as without it.
const (
	tasksServer     = "tasks"
	taskBackendTool = "tool_0000"
	// TaskTool is the task tool's advertised name (the prefix strategy's
	// "{backend}_"): the same demo backend tool W1 calls among others.
	TaskTool = "b00_" + taskBackendTool
	// taskPollPause is the wait between two polls of a working task; the
	// first poll goes at once. The servers' pollIntervalMs (1 s by
	// default) is what a real client waits, and would be all the round
	// trip measured; the pause keeps polling tight without spinning.
	taskPollPause = time.Millisecond
	// maxBenchTasks is aggregator.tasks.maxPerPrincipal and maxTasks of a
	// tasks cluster, the most either may be: every task of the
	// measurement is the first principal's and lives an hour (the
	// default TTL), so the bound is the tasks one cluster may make.
	maxBenchTasks = config.MaxTasksPerPrincipalLimit
)

// aggregatorTaskMethods are the indexer RPCs an aggregator calls to run
// tasks, from the built-in allow list of the aggregators' credential.
func aggregatorTaskMethods() []string {
	var out []string
	for _, m := range config.AggregatorMethods {
		if strings.Contains(m, ".ClusterStateService/") && strings.Contains(m, "Task") {
			out = append(out, m)
		}
	}
	return out
}

// TaskRow is the tasks measurement at one concurrency, each part a
// closed loop of its own, one after the other.
type TaskRow struct {
	Concurrency int
	// Plain is a tools/call of TaskTool from a client that does not
	// declare the tasks extension: answered as usual, the baseline.
	Plain CallRun
	// RoundTrip is a tools/call that becomes a task, then tasks/get
	// until the task is completed; its latencies are the whole round
	// trip's and each of its calls is one task.
	RoundTrip CallRun
	// CreateP50 and CreateP99 are those of the tools/call that made each
	// task of RoundTrip, the answer a client waits for before it polls.
	CreateP50, CreateP99 time.Duration
	// Polls is the tasks/get requests RoundTrip's tasks took in all.
	Polls int
	// Held is the tasks the cluster held (all unexpired) when RoundTrip
	// ended: every creation counts them, up to maxTasks.
	Held int64
	// Get is tasks/get of a completed task, back to back.
	Get     CallRun
	LoadAvg string
}

// PollsPerTask is the mean number of tasks/get a task took to be seen
// completed.
func (r TaskRow) PollsPerTask() float64 {
	if r.RoundTrip.Calls == 0 {
		return 0
	}
	return float64(r.Polls) / float64(r.RoundTrip.Calls)
}

// taskRoles are the processes a task's CPU is charged to: the gateway,
// the aggregator that runs it and the indexer and PostgreSQL that keep
// it. A plain call is charged to the same, for the ratio.
var taskRoles = []string{"gateway", "aggregator", "indexer", "postgres"}

// TaskTable is the tasks measurement over one W1 catalog.
type TaskTable struct {
	Topology Topology
	Rows     []TaskRow
}

// Row is the row for n clients, if measured.
func (t TaskTable) Row(n int) (TaskRow, bool) {
	for _, r := range t.Rows {
		if r.Concurrency == n {
			return r, true
		}
	}
	return TaskRow{}, false
}

// RunTasks measures tasks on c (started with Topology.Tasks) at each of
// concurrency, each part for d (or maxOps operations).
func RunTasks(ctx context.Context, c *Cluster, concurrency []int, d time.Duration, maxOps int, progress func(string, ...any)) (TaskTable, error) {
	if c.TasksURL == "" {
		return TaskTable{}, errors.New("the cluster runs no tasks (Topology.Tasks)")
	}
	tc := &taskClient{url: c.TasksURL}
	if key := c.firstKey(); key != "" {
		tc.authorization = "Bearer " + key
	}
	procs := slices.Concat(c.Services("gateway"), c.Services("aggregator"), c.Services("indexer"), c.Services("backend")[:1])
	table := TaskTable{Topology: c.Topology}
	for _, n := range concurrency {
		row := TaskRow{Concurrency: n, LoadAvg: LoadAverage()}
		loop := func(ops int, op func(ctx context.Context, w, k int) error) CallRun {
			WaitQuiet(ctx, c.Procs)
			return closedLoop{
				sessions: make([]*Session, n), workers: n, duration: d, maxOps: ops,
				cpu: func() map[string]time.Duration { return cpuByRole(procs, c.Postgres) },
				op:  func(ctx context.Context, _ *Session, w, k int) error { return op(ctx, w, k) },
			}.run(ctx)
		}
		// Every worker makes a plain call and a task before the clocks
		// start, all at once, so as many connections are open as the runs
		// use and every lazy path is warm; the tasks, completed, are what
		// the tasks/get part reads.
		ids, errs := make([]string, n), make([]error, n)
		var wg sync.WaitGroup
		for w := range n {
			wg.Go(func() {
				wctx, cancel := context.WithTimeout(ctx, callTimeout)
				defer cancel()
				if errs[w] = tc.plainCall(wctx); errs[w] != nil {
					return
				}
				ids[w], errs[w] = tc.createTask(wctx)
				if errs[w] == nil {
					_, errs[w] = tc.awaitTask(wctx, ids[w])
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return TaskTable{}, fmt.Errorf("tasks c=%d: warm-up: %w", n, err)
		}
		row.Plain = loop(maxOps, func(ctx context.Context, _, _ int) error { return tc.plainCall(ctx) })

		creates := make([][]time.Duration, n)
		var polls atomic.Int64
		// Past maxBenchTasks creations are refused: stop short of it, with
		// room for a warm-up at the top concurrency.
		budget := maxBenchTasks - int(tc.created.Load()) - concurrency[len(concurrency)-1]
		row.RoundTrip = loop(min(maxOps, budget), func(ctx context.Context, w, _ int) error {
			began := time.Now()
			id, err := tc.createTask(ctx)
			if err != nil {
				return err
			}
			created := time.Since(began)
			p, err := tc.awaitTask(ctx, id)
			if err != nil {
				return err
			}
			creates[w] = append(creates[w], created)
			polls.Add(int64(p))
			return nil
		})
		all := slices.Concat(creates...)
		slices.Sort(all)
		row.CreateP50, row.CreateP99 = Percentile(all, 0.50), Percentile(all, 0.99)
		row.Polls, row.Held = int(polls.Load()), tc.created.Load()

		// The tasks made in the warm-up are completed: each worker reads
		// its own.
		row.Get = loop(maxOps, func(ctx context.Context, w, _ int) error {
			status, err := tc.getTask(ctx, ids[w])
			if err == nil && status != taskCompleted {
				err = fmt.Errorf("task %s is %s, was completed", ids[w], status)
			}
			return err
		})
		if dead := c.Exited(); dead != "" {
			return TaskTable{}, fmt.Errorf("%s exited during the tasks runs", dead)
		}
		progress("tasks %d tools c=%d: calls/s plain %.0f, tasks %.0f; p50 plain %s, create %s, round trip %s, %.1f polls per task; CPU per call %s, per task %s; tasks/get p50 %s; errors %d/%d/%d",
			c.Topology.Tools(), n, row.Plain.Rate(), row.RoundTrip.Rate(), ms(row.Plain.P50), ms(row.CreateP50), ms(row.RoundTrip.P50), row.PollsPerTask(),
			ms(row.Plain.CPUPerCall(taskRoles...)), ms(row.RoundTrip.CPUPerCall(taskRoles...)), ms(row.Get.P50),
			row.Plain.Errors, row.RoundTrip.Errors, row.Get.Errors)
		table.Rows = append(table.Rows, row)
	}
	return table, nil
}

// taskClient speaks 2026-07-28 over raw HTTP, one stateless request each,
// as go-sdk's Modern client does (which has no tasks extension).
type taskClient struct {
	url string
	// authorization is the Authorization header value, or "".
	authorization string
	ids           atomic.Int64
	// created counts the tasks made through the client.
	created atomic.Int64
}

// The _meta of every request: the same client, declaring the tasks
// extension or not.
var (
	plainMeta = json.RawMessage(`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"switchboard-load","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`)
	tasksMeta = json.RawMessage(`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"switchboard-load","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`)
)

const taskCompleted = "completed"

// taskAnswer is what the measurement reads of a result: a tools/call's
// (a CallToolResult, or a task) or a tasks/get's.
type taskAnswer struct {
	ResultType string `json:"resultType"`
	TaskID     string `json:"taskId"`
	Status     string `json:"status"`
	IsError    bool   `json:"isError"`
	// Result is a completed task's CallToolResult.
	Result *struct {
		IsError bool `json:"isError"`
	} `json:"result"`
	StatusMessage string          `json:"statusMessage"`
	Error         json.RawMessage `json:"error"`
}

// send posts one request and decodes its answer.
func (tc *taskClient) send(ctx context.Context, method, name string, meta json.RawMessage, params map[string]any) (taskAnswer, error) {
	params["_meta"] = meta
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": tc.ids.Add(1), "method": method, "params": params})
	if err != nil {
		return taskAnswer{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tc.url, bytes.NewReader(body))
	if err != nil {
		return taskAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Mcp-Name", name)
	if tc.authorization != "" {
		req.Header.Set("Authorization", tc.authorization)
	}
	resp, err := sharedTransport.RoundTrip(req)
	if err == nil {
		defer resp.Body.Close()
		var raw []byte
		if raw, err = io.ReadAll(resp.Body); err == nil {
			a, err := decodeTaskAnswer(resp.Header.Get("Content-Type"), raw)
			if err != nil || resp.StatusCode != http.StatusOK {
				return taskAnswer{}, fmt.Errorf("%s: HTTP %d: %v; %s", method, resp.StatusCode, err, oneLine(string(raw)))
			}
			return a, nil
		}
	}
	// The run's end cuts requests; the caller tells that from a failure
	// by the context's error, which the transport's may not wrap.
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	return taskAnswer{}, fmt.Errorf("%s: %w", method, err)
}

// decodeTaskAnswer reads a JSON-RPC answer, as JSON or as the last message
// of an event stream: its result, or its error as an error.
func decodeTaskAnswer(contentType string, body []byte) (taskAnswer, error) {
	if strings.HasPrefix(contentType, "text/event-stream") {
		var last []byte
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data:")); ok {
				last = append(last[:0], bytes.TrimSpace(d)...)
			}
		}
		if err := sc.Err(); err != nil {
			return taskAnswer{}, err
		}
		body = last
	}
	var msg struct {
		Result *taskAnswer `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		return taskAnswer{}, fmt.Errorf("undecodable answer: %w", err)
	}
	switch {
	case msg.Error != nil:
		return taskAnswer{}, fmt.Errorf("error %d: %s", msg.Error.Code, msg.Error.Message)
	case msg.Result == nil:
		return taskAnswer{}, errors.New("an answer with neither result nor error")
	}
	return *msg.Result, nil
}

// callParams are a tools/call of TaskTool, as CallEcho makes it.
func callParams() map[string]any {
	return map[string]any{"name": TaskTool, "arguments": map[string]any{"text": "load"}}
}

// plainCall calls TaskTool without the tasks extension; it must be
// answered as usual.
func (tc *taskClient) plainCall(ctx context.Context) error {
	a, err := tc.send(ctx, "tools/call", TaskTool, plainMeta, callParams())
	switch {
	case err != nil:
		return err
	case a.ResultType == "task" || a.TaskID != "":
		return errors.New("a client without the tasks extension got a task")
	case a.IsError:
		return fmt.Errorf("%s answered isError", TaskTool)
	}
	return nil
}

// createTask calls TaskTool declaring the tasks extension and returns the
// task it became.
func (tc *taskClient) createTask(ctx context.Context) (string, error) {
	a, err := tc.send(ctx, "tools/call", TaskTool, tasksMeta, callParams())
	if err != nil {
		return "", err
	}
	if a.ResultType != "task" || a.TaskID == "" {
		return "", fmt.Errorf("the call did not become a task (resultType %q)", a.ResultType)
	}
	tc.created.Add(1)
	return a.TaskID, nil
}

// getTask is tasks/get of task id: its status, and an error for a task
// that ended otherwise than completed or whose result is an error.
func (tc *taskClient) getTask(ctx context.Context, id string) (string, error) {
	a, err := tc.send(ctx, "tasks/get", id, tasksMeta, map[string]any{"taskId": id})
	switch {
	case err != nil:
		return "", err
	case a.Status == "failed" || a.Status == "cancelled":
		return a.Status, fmt.Errorf("task %s %s: %s %s", id, a.Status, a.StatusMessage, a.Error)
	case a.Status == taskCompleted && (a.Result == nil || a.Result.IsError):
		return a.Status, fmt.Errorf("task %s completed without a successful result", id)
	}
	return a.Status, nil
}

// awaitTask polls task id until it is completed (at once, then every
// taskPollPause) and returns the polls it took.
func (tc *taskClient) awaitTask(ctx context.Context, id string) (int, error) {
	for polls := 1; ; polls++ {
		status, err := tc.getTask(ctx, id)
		if err != nil {
			return polls, err
		}
		if status == taskCompleted {
			return polls, nil
		}
		select {
		case <-ctx.Done():
			return polls, ctx.Err()
		case <-time.After(taskPollPause):
		}
	}
}
