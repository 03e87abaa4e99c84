package load

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/test/mcpraw"
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
	authorization := ""
	if key := c.firstKey(); key != "" {
		authorization = "Bearer " + key
	}
	tc := newTaskClient(c.TasksURL, authorization)
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

// taskClient speaks 2026-07-28 over raw HTTP (mcpraw), one stateless
// request each, as go-sdk's Modern client does (which has no tasks
// extension): the same client, declaring the tasks extension (tasks) or
// not (plain).
type taskClient struct {
	plain, tasks *mcpraw.Client
	// created counts the tasks made through the client.
	created atomic.Int64
}

func newTaskClient(url, authorization string) *taskClient {
	hc := &http.Client{Transport: sharedTransport}
	client := func(caps json.RawMessage) *mcpraw.Client {
		return &mcpraw.Client{URL: url, Authorization: authorization, Capabilities: caps, Name: "switchboard-load", HTTP: hc}
	}
	return &taskClient{plain: client(mcpraw.NoCapabilities), tasks: client(mcpraw.TasksCapabilities)}
}

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

// send sends one request through c and decodes its result as T; a
// JSON-RPC error is an error.
func send[T any](ctx context.Context, c *mcpraw.Client, method, name string, params map[string]any) (T, error) {
	var ans T
	a, err := c.Send(ctx, method, name, params)
	if err != nil {
		// The run's end cuts requests; the caller tells that from a
		// failure by the context's error, which the transport's may not
		// wrap.
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return ans, fmt.Errorf("%s: %w", method, err)
	}
	if a.Error != nil {
		return ans, fmt.Errorf("%s: %w", method, a.Error)
	}
	if err := json.Unmarshal(a.Result, &ans); err != nil || a.HTTPStatus != http.StatusOK {
		return ans, fmt.Errorf("%s: HTTP %d: %v", method, a.HTTPStatus, err)
	}
	return ans, nil
}

// callParams are a tools/call of TaskTool, as CallEcho makes it.
func callParams() map[string]any {
	return map[string]any{"name": TaskTool, "arguments": map[string]any{"text": "load"}}
}

// plainCall calls TaskTool without the tasks extension; it must be
// answered as usual.
func (tc *taskClient) plainCall(ctx context.Context) error {
	a, err := send[taskAnswer](ctx, tc.plain, "tools/call", TaskTool, callParams())
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
	a, err := send[taskAnswer](ctx, tc.tasks, "tools/call", TaskTool, callParams())
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
	a, err := send[taskAnswer](ctx, tc.tasks, "tasks/get", id, map[string]any{"taskId": id})
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
