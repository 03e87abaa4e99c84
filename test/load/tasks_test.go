package load

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// A tasks cluster's configuration lets the one tool run as a task at its
// virtual server only, and the aggregator's credential call exactly the
// task RPCs; without tasks it carries none of it.
func TestTasksConfiguration(t *testing.T) {
	env, err := secretEnv()
	if err != nil {
		t.Fatal(err)
	}
	d := configData{
		Gateway: "127.0.0.1:1", Aggregator: "127.0.0.1:2", AggregatorHTTP: "127.0.0.1:3", Indexer: "127.0.0.1:4", IndexerHTTP: "127.0.0.1:5",
		Database: "postgres://localhost/load1", Backends: []backendAddr{{"b00", "127.0.0.1:6"}, {"b01", "127.0.0.1:7"}},
	}
	plain, err := renderConfig(d, env)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(plain); strings.Contains(s, "servers:") || strings.Contains(s, "AGGREGATOR_TOKEN") || strings.Contains(s, "tasks:") {
		t.Errorf("a configuration without tasks carries tasks keys:\n%s", s)
	}

	d.Tasks, d.TasksServer, d.TaskBackend, d.TaskTool = true, tasksServer, "b00", taskBackendTool
	d.AggregatorAllow, d.MaxTasks = aggregatorTaskMethods(), maxBenchTasks
	raw, err := renderConfig(d, env)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(raw, func(k string) (string, bool) { return lookupEnv(env, k) })
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Aggregator.ToolOverrides) != 0 {
		t.Errorf("/mcp's tools are overridden: %+v", cfg.Aggregator.ToolOverrides)
	}
	s, ok := cfg.ServerByName(tasksServer)
	if !ok || len(s.ToolOverrides) != 1 || s.ToolOverrides[0].TaskSupport != config.TaskSupportOptional ||
		!slices.Equal(s.Tools.Include, []string{TaskTool}) || !slices.Equal(s.Backends, []string{"b00"}) {
		t.Errorf("the tasks server: %+v (found %v)", s, ok)
	}
	agg, _ := lookupEnv(env, "SWITCHBOARD_AGGREGATOR_TOKEN")
	if ep := cfg.Aggregator.Indexer; ep.Address != d.Indexer || ep.Token != agg || agg == "" {
		t.Errorf("aggregator.indexer %+v", ep)
	}
	if got := cfg.Aggregator.Tasks; got.MaxPerPrincipal != maxBenchTasks || got.MaxTasks != maxBenchTasks {
		t.Errorf("aggregator.tasks %+v", got)
	}
	// Code mode: at the tasks server only, with room for a run's calls.
	if !cfg.CodeModeIn(tasksServer) || cfg.CodeModeIn("") || cfg.Aggregator.CodeMode.MaxCalls < codeCalls+1 {
		t.Errorf("code mode: at the tasks server %v, at /mcp %v, maxCalls %d", cfg.CodeModeIn(tasksServer), cfg.CodeModeIn(""), cfg.Aggregator.CodeMode.MaxCalls)
	}
	methods := aggregatorTaskMethods()
	if len(methods) != 7 || !slices.Contains(methods, "switchboard.indexer.v1.ClusterStateService/CreateTask") ||
		!slices.Contains(methods, "switchboard.indexer.v1.ClusterStateService/GetTask") {
		t.Errorf("the aggregator's task RPCs: %v", methods)
	}
	var found bool
	for _, c := range cfg.ServiceAuth.Credentials {
		if c.Name == "aggregator" {
			found = true
			if !slices.Equal(c.Allow, methods) || !c.AssertPrincipals {
				t.Errorf("the aggregator's credential: %+v", c)
			}
		}
	}
	if !found {
		t.Error("no aggregator credential")
	}
}

func TestBenchMarkdownTasks(t *testing.T) {
	ms := time.Millisecond
	run := func(calls int, rate float64, p50 time.Duration, cpu map[string]time.Duration) CallRun {
		return CallRun{CallsPerSec: rate, Calls: calls, P50: p50, P90: 2 * p50, P99: 3 * p50, CPU: cpu}
	}
	small := Topology{Backends: 5, ToolsPerBackend: 200}
	// 1,000 plain calls: 600 ms over the four roles, 0.6 ms a call; 250
	// tasks: 1.5 s, 6 ms a task, 10×; 2,000 gets: 2 s, 1 ms a get.
	row := func(n int) TaskRow {
		return TaskRow{
			Concurrency: n, Polls: 500, Held: 1234, CreateP50: 2 * ms, CreateP99: 7 * ms, LoadAvg: "1.00 0.50 0.25",
			Plain: run(1000, 500, ms, map[string]time.Duration{"gateway": 300 * ms, "aggregator": 300 * ms, "backend": 400 * ms, "client": 100 * ms}),
			RoundTrip: run(250, 125, 5*ms, map[string]time.Duration{"gateway": 300 * ms, "aggregator": 400 * ms, "indexer": 500 * ms, "postgres": 300 * ms,
				"backend": 100 * ms, "client": 50 * ms}),
			Get: run(2000, 1000, 800*time.Microsecond, map[string]time.Duration{"gateway": 500 * ms, "aggregator": 500 * ms, "indexer": 600 * ms, "postgres": 400 * ms}),
		}
	}
	tasks := TaskTable{Topology: small, Rows: []TaskRow{row(1), row(16)}}
	if r, _ := tasks.Row(16); r.PollsPerTask() != 2 {
		t.Errorf("polls per task = %v, want 2", r.PollsPerTask())
	}
	if (TaskRow{}).PollsPerTask() != 0 {
		t.Error("polls per task of no task")
	}
	res := &BenchResults{
		Options: BenchOptions{Concurrency: []int{1, 16}, Runs: 1, CallDuration: time.Second, TaskDuration: 2 * time.Second},
		Calls:   []CallTable{{Topology: small}, {Topology: Topology{Backends: 20, ToolsPerBackend: 500}}},
		Tasks:   []TaskTable{tasks},
	}
	md := BenchMarkdown(res)
	for _, want := range []string{
		"- Tasks and code mode: 2s per part, once, on the first W1 cluster.",
		// The larger catalog ran no tasks.
		"| Modern c=16, tasks: CPU per task (create, polls until completed) ÷ per plain call of the same tool, gateway + aggregator + indexer + PostgreSQL | 6.00 ÷ 0.60 ms = **10.00×**, 2.0 polls per task | – | – | reported |",
		"| Modern c=1, tasks/get of a completed task: p50 (p99) | **0.80 ms** (2.40) | – | – | reported |",
		"| 16 | 500 / 125 | 1.00 / 2.00 / 5.00 | 3.00 / 7.00 / 15.0 | 2.0 | 0.60 / 6.00 | 10.00× | 0.30, 0.30, 0.00, 0.00 | 1.20, 1.60, 2.00, 1.20 | 0.40 / 0.40 | 0.10 / 0.20 | 0 / 0 | 1,234 | 1.00 0.50 0.25 |",
		// 2 s over 2,000 gets is 1 ms, 1.67× the plain call's 0.6 ms.
		"| 1 | 1000 | 0.80 | 1.60 | 2.40 | 1.00 | 1.67× | 0.25, 0.25, 0.30, 0.20 | 0 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	// Without the measurement, no tasks rows.
	res.Tasks, res.Options.TaskDuration = nil, 0
	if md := BenchMarkdown(res); strings.Contains(md, "tasks") {
		t.Errorf("a run without tasks reports them:\n%s", md)
	}
}

func TestBenchMarkdownCodeMode(t *testing.T) {
	ms := time.Millisecond
	run := func(calls int, p50 time.Duration, gateway, aggregator time.Duration) CallRun {
		return CallRun{Calls: calls, P50: p50, CPU: map[string]time.Duration{"gateway": gateway, "aggregator": aggregator}}
	}
	// Direct: 1 ms, 0.5 ms CPU a call. Run 1: 3 ms, 1.5 ms CPU; run 11:
	// 5 ms, 3.5 ms CPU: an inner call is 0.2 ms, 0.2 ms CPU.
	table := CodeTable{Topology: Topology{Backends: 5, ToolsPerBackend: 200}, Rows: []CodeRow{{Concurrency: 1, LoadAvg: "1.00",
		Direct: run(1000, ms, 200*ms, 300*ms), One: run(100, 3*ms, 50*ms, 100*ms), Many: run(100, 5*ms, 50*ms, 300*ms)}}}
	if r := table.Rows[0]; r.InnerP50() != 200*time.Microsecond || r.InnerCPU() != 200*time.Microsecond {
		t.Fatalf("inner call %v, CPU %v", r.InnerP50(), r.InnerCPU())
	}
	var b strings.Builder
	writeCodeMode(&b, BenchOptions{TaskDuration: time.Second}, []CodeTable{table})
	if want := "| 1 | 1.00 / 3.00 / 5.00 | 0.50 / 1.50 / 3.50 | 0.20 / 0.20 | 0.20× / 0.40× | 0 / 0 / 0 | 1.00 |"; !strings.Contains(b.String(), want) {
		t.Errorf("the report lacks %q:\n%s", want, b.String())
	}
}
