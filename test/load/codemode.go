package load

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/test/mcpraw"
)

// The code mode measurement: what a tool call made by a run_code program
// costs against the same call made directly. On the tasks server of the
// first W1 cluster (one echo tool; code mode on there only), three closed
// loops one after the other: the direct tools/call, a program making one
// call, and a program making codeCalls+1 calls. The marginal cost of an
// inner call is the difference of the two programs over codeCalls: what
// one more call in a program adds, the run's own cost (starting the
// interpreter, the gateway's request) left out.
const codeCalls = 10

// CodeRow is the code mode measurement at one concurrency.
type CodeRow struct {
	Concurrency int
	// Direct is a tools/call of TaskTool; One and Many are run_code with
	// one call and with codeCalls+1 calls of it.
	Direct, One, Many CallRun
	LoadAvg           string
}

// InnerP50 and InnerCPU are the marginal latency and CPU of one call in a
// program (over codeRoles).
func (r CodeRow) InnerP50() time.Duration { return (r.Many.P50 - r.One.P50) / codeCalls }

// InnerCPU is the marginal CPU of one call in a program.
func (r CodeRow) InnerCPU() time.Duration {
	return (r.Many.CPUPerCall(codeRoles...) - r.One.CPUPerCall(codeRoles...)) / codeCalls
}

// codeRoles are the processes a call's CPU is charged to; a program's
// runner is a child of the aggregator and counted in it.
var codeRoles = []string{"gateway", "aggregator"}

// CodeTable is the code mode measurement over one W1 catalog.
type CodeTable struct {
	Topology Topology
	Rows     []CodeRow
}

func codeProgram(calls int) string {
	return fmt.Sprintf("for i in range(%d):\n    %s(text=\"load\")\nresult = %d\n", calls, TaskTool, calls)
}

// RunCodeMode measures code mode on c (started with Topology.Tasks, whose
// tasks server offers code mode) at each of concurrency, each part for d
// (or maxOps operations).
func RunCodeMode(ctx context.Context, c *Cluster, concurrency []int, d time.Duration, maxOps int, progress func(string, ...any)) (CodeTable, error) {
	if c.TasksURL == "" {
		return CodeTable{}, errors.New("the cluster has no tasks server (Topology.Tasks)")
	}
	authorization := ""
	if key := c.firstKey(); key != "" {
		authorization = "Bearer " + key
	}
	hc := &http.Client{Transport: sharedTransport}
	direct := &mcpraw.Client{URL: c.TasksURL, Authorization: authorization, Capabilities: mcpraw.NoCapabilities, Name: "switchboard-load", HTTP: hc}
	optimized := &mcpraw.Client{URL: c.TasksURL + "/optimized", Authorization: authorization, Capabilities: mcpraw.NoCapabilities, Name: "switchboard-load", HTTP: hc}
	one, many := codeProgram(1), codeProgram(codeCalls+1)
	procs := slices.Concat(c.Services("gateway"), c.Services("aggregator"), c.Services("backend")[:1])
	table := CodeTable{Topology: c.Topology}
	for _, n := range concurrency {
		row := CodeRow{Concurrency: n, LoadAvg: LoadAverage()}
		loop := func(op func(ctx context.Context) error) CallRun {
			WaitQuiet(ctx, c.Procs)
			return closedLoop{
				sessions: make([]*Session, n), workers: n, duration: d, maxOps: maxOps,
				cpu: func() map[string]time.Duration { return cpuWithRunners(procs) },
				op:  func(ctx context.Context, _ *Session, _, _ int) error { return op(ctx) },
			}.run(ctx)
		}
		// A warm-up of each, so every runner and connection is started.
		for _, op := range []func(context.Context) error{
			func(ctx context.Context) error { return directCall(ctx, direct) },
			func(ctx context.Context) error { return runProgram(ctx, optimized, many, codeCalls+1) },
		} {
			wctx, cancel := context.WithTimeout(ctx, callTimeout)
			err := op(wctx)
			cancel()
			if err != nil {
				return CodeTable{}, fmt.Errorf("code mode c=%d: warm-up: %w", n, err)
			}
		}
		row.Direct = loop(func(ctx context.Context) error { return directCall(ctx, direct) })
		row.One = loop(func(ctx context.Context) error { return runProgram(ctx, optimized, one, 1) })
		row.Many = loop(func(ctx context.Context) error { return runProgram(ctx, optimized, many, codeCalls+1) })
		if dead := c.Exited(); dead != "" {
			return CodeTable{}, fmt.Errorf("%s exited during the code mode runs", dead)
		}
		progress("code mode %d tools c=%d: p50 direct %s, run of 1 call %s, of %d calls %s; inner call %s (CPU %s, direct %s); errors %d/%d/%d",
			c.Topology.Tools(), n, ms(row.Direct.P50), ms(row.One.P50), codeCalls+1, ms(row.Many.P50), ms(row.InnerP50()),
			ms(row.InnerCPU()), ms(row.Direct.CPUPerCall(codeRoles...)), row.Direct.Errors, row.One.Errors, row.Many.Errors)
		table.Rows = append(table.Rows, row)
	}
	return table, nil
}

// cpuWithRunners is cpuByRole, the aggregators' children (their code
// runners, live or exited) counted as the aggregator.
func cpuWithRunners(procs []*Proc) map[string]time.Duration {
	out := cpuByRole(procs, nil)
	var aggregators time.Duration
	for _, p := range procs {
		if p.Role != "aggregator" {
			continue
		}
		if v, err := TreeCPU(p.Pid()); err == nil {
			aggregators += v
		}
	}
	out["aggregator"] = aggregators
	return out
}

func directCall(ctx context.Context, c *mcpraw.Client) error {
	_, err := sendTool(ctx, c, TaskTool, callParams())
	return err
}

// runProgram runs program through run_code; it must succeed having made
// calls calls.
func runProgram(ctx context.Context, c *mcpraw.Client, program string, calls int) error {
	res, err := sendTool(ctx, c, "run_code", map[string]any{"name": "run_code", "arguments": map[string]any{"program": program}})
	if err != nil {
		return err
	}
	var sc struct {
		Calls int    `json:"calls"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(res.StructuredContent, &sc); err != nil || sc.Calls != calls || sc.Error != "" {
		return fmt.Errorf("run_code: %d calls, want %d: %s", sc.Calls, calls, sc.Error)
	}
	return nil
}

// sendTool makes one tools/call; an error result or a JSON-RPC error is
// an error.
func sendTool(ctx context.Context, c *mcpraw.Client, name string, params map[string]any) (toolAnswer, error) {
	res, err := send[toolAnswer](ctx, c, "tools/call", name, params)
	if err == nil && res.IsError {
		err = fmt.Errorf("%s answered isError: %s", name, strings.TrimSpace(string(res.StructuredContent)))
	}
	return res, err
}

type toolAnswer struct {
	IsError           bool            `json:"isError"`
	StructuredContent json.RawMessage `json:"structuredContent"`
}

func writeCodeMode(b *strings.Builder, o BenchOptions, tables []CodeTable) {
	for _, t := range tables {
		fmt.Fprintf(b, "### Code mode: a tool call made by a program against the same call made directly, %s tools (%d × %d)\n\n", thousands(t.Topology.Tools()), t.Topology.Backends, t.Topology.ToolsPerBackend)
		fmt.Fprintf(b, "On the same cluster and virtual server as the tasks measurement (`/mcp/%s`, one echo tool `%s`, code mode on there only), three closed loops of %s, one after the other: "+
			"**direct** is a tools/call of the tool; **run 1** and **run %d** are `run_code` (at `/mcp/%s/optimized`) with a program that calls it once and %d times. "+
			"An **inner call** is what one more call in a program costs: (run %d − run 1) ÷ %d, the run's own cost (its request through the gateway, the interpreter) left out. "+
			"Latency in ms; CPU per operation in ms over gateway + aggregator (a program's runner is the aggregator's child and counted with it).\n\n",
			tasksServer, TaskTool, o.TaskDuration, codeCalls+1, tasksServer, codeCalls+1, codeCalls+1, codeCalls)
		b.WriteString("| Clients | p50: direct / run 1 / run 11 | CPU: direct / run 1 / run 11 | inner call: p50 / CPU | inner ÷ direct: p50 / CPU | errors | load avg |\n")
		b.WriteString("|---:|---|---|---|---|---|---|\n")
		for _, r := range t.Rows {
			dcpu := r.Direct.CPUPerCall(codeRoles...)
			fmt.Fprintf(b, "| %d | %s | %s / %s / %s | %s / %s | %s / %s | %d / %d / %d | %s |\n",
				r.Concurrency, triMs(r.Direct.P50, r.One.P50, r.Many.P50),
				msf(dcpu), msf(r.One.CPUPerCall(codeRoles...)), msf(r.Many.CPUPerCall(codeRoles...)),
				msf(r.InnerP50()), msf(r.InnerCPU()),
				ratio(float64(r.InnerP50()), float64(r.Direct.P50)), ratio(float64(r.InnerCPU()), float64(dcpu)),
				r.Direct.Errors, r.One.Errors, r.Many.Errors, r.LoadAvg)
		}
		for _, r := range t.Rows {
			for _, part := range []struct {
				name string
				run  CallRun
			}{{"direct", r.Direct}, {"run 1", r.One}, {"run 11", r.Many}} {
				if part.run.FirstError != "" {
					fmt.Fprintf(b, "\nFirst error, c=%d %s: `%s`\n", r.Concurrency, part.name, oneLine(part.run.FirstError))
				}
			}
		}
		b.WriteString("\n")
	}
}
