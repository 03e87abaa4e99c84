package load

import (
	"fmt"
	"strings"
	"time"
)

// taskCPURatio is a task's CPU over a plain call's, both over taskRoles:
// what making the call a task adds, the polls included.
func taskCPURatio(r TaskRow) (task, plain time.Duration, x string) {
	task, plain = r.RoundTrip.CPUPerCall(taskRoles...), r.Plain.CPUPerCall(taskRoles...)
	return task, plain, ratio(float64(task), float64(plain))
}

// byTaskRole is r's CPU per call of each of taskRoles in ms, in order.
func byTaskRole(r CallRun) string {
	parts := make([]string, len(taskRoles))
	for i, role := range taskRoles {
		parts[i] = msf(r.CPUPerCall(role))
	}
	return strings.Join(parts, ", ")
}

// findTaskRow is the tasks row over catalog t at n clients.
func findTaskRow(tables []TaskTable, t Topology, n int) (TaskRow, bool) {
	for _, table := range tables {
		if table.Topology.Tools() == t.Tools() {
			return table.Row(n)
		}
	}
	return TaskRow{}, false
}

func writeTasks(b *strings.Builder, o BenchOptions, tables []TaskTable) {
	for _, t := range tables {
		fmt.Fprintf(b, "### Tasks: a tools/call that becomes a task, %s tools (%d × %d)\n\n", thousands(t.Topology.Tools()), t.Topology.Backends, t.Topology.ToolsPerBackend)
		fmt.Fprintf(b, "On the same cluster as W1, the virtual server `/mcp/%s` shows one tool, `%s` (the echo tool of the first backend that W1 calls among others), with `taskSupport: optional`; "+
			"`/mcp` and its catalog are unchanged. A raw HTTP client makes one stateless 2026-07-28 request at a time per worker, for %s per part, the parts one after the other, once. "+
			"**Plain** is a tools/call of that tool from a client that does not declare the tasks extension, answered as usual: the baseline. "+
			"**Task** declares `io.modelcontextprotocol/tasks`, gets `resultType: task`, then polls `tasks/get` at once and every %s until the task is completed "+
			"(the servers' `pollIntervalMs`, 1 s by default, is what a real client waits and would be all the figure); create is the tools/call's latency, round trip until the completed answer. "+
			"CPU per call in ms over gateway + aggregator + indexer + PostgreSQL for both, so \"÷ plain\" is what making the call a task costs: its creation and its polls, "+
			"the aggregator running the call detached and the task's writes and reads in PostgreSQL. "+
			"Held is the unexpired tasks when the round trips ended (a creation counts only the principal's, and the table's bound `aggregator.tasks.maxTasks` is a counter).\n\n",
			tasksServer, TaskTool, o.TaskDuration, taskPollPause)
		b.WriteString("| Clients | calls/s: plain / task | p50: plain / create / round trip | p99: plain / create / round trip | polls per task | CPU: plain / task | ÷ plain | plain: gateway, aggregator, indexer, PostgreSQL | task: gateway, aggregator, indexer, PostgreSQL | backend: plain / task | client: plain / task | errors: plain / task | held | load avg |\n")
		b.WriteString("|---:|---|---|---|---:|---|---:|---|---|---|---|---|---:|---|\n")
		for _, r := range t.Rows {
			p, rt := r.Plain, r.RoundTrip
			task, plain, x := taskCPURatio(r)
			fmt.Fprintf(b, "| %d | %.0f / %.0f | %s | %s | %.1f | %s / %s | %s | %s | %s | %s / %s | %s / %s | %d / %d | %s | %s |\n",
				r.Concurrency, p.Rate(), rt.Rate(), triMs(p.P50, r.CreateP50, rt.P50), triMs(p.P99, r.CreateP99, rt.P99), r.PollsPerTask(),
				msf(plain), msf(task), x, byTaskRole(p), byTaskRole(rt),
				msf(p.CPUPerCall("backend")), msf(rt.CPUPerCall("backend")), msf(p.CPUPerCall("client")), msf(rt.CPUPerCall("client")),
				p.Errors, rt.Errors, thousands(int(r.Held)), r.LoadAvg)
		}
		b.WriteString("\n`tasks/get` of a completed task (each worker reads one its warm-up made), back to back: the read path, gateway → aggregator → indexer → PostgreSQL. " +
			"Latency and CPU per get in ms; \"÷ plain call\" is over the plain call's CPU above.\n\n")
		b.WriteString("| Clients | gets/s | p50 | p90 | p99 | CPU per get | ÷ plain call | gateway, aggregator, indexer, PostgreSQL | errors |\n")
		b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---|---:|\n")
		for _, r := range t.Rows {
			g := r.Get
			get := g.CPUPerCall(taskRoles...)
			fmt.Fprintf(b, "| %d | %.0f | %s | %s | %s | %s | %s | %s | %d |\n",
				r.Concurrency, g.Rate(), msf(g.P50), msf(g.P90), msf(g.P99), msf(get), ratio(float64(get), float64(r.Plain.CPUPerCall(taskRoles...))),
				byTaskRole(g), g.Errors)
		}
		for _, r := range t.Rows {
			for _, part := range []struct {
				name string
				run  CallRun
			}{{"plain call", r.Plain}, {"task round trip", r.RoundTrip}, {"tasks/get", r.Get}} {
				if part.run.FirstError != "" {
					fmt.Fprintf(b, "\nFirst error, c=%d %s: `%s`\n", r.Concurrency, part.name, oneLine(part.run.FirstError))
				}
			}
		}
		b.WriteString("\n")
	}
}
