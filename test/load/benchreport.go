package load

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// BenchMarkdown renders a benchmark run.
func BenchMarkdown(r *BenchResults) string {
	var b strings.Builder
	o := r.Options
	b.WriteString("## Benchmarks (`make bench`)\n\n")
	b.WriteString(MachineMarkdown(r.Machine))
	fmt.Fprintf(&b, "- Run took %s. W1: %s per run, median of %d runs; find_tool: %s per configuration; W2: median of %d warm walks; W3: median of %d connects.\n",
		r.Took.Round(time.Second), o.CallDuration, max(o.Runs, 1), o.FindDuration, o.Walks, o.Connects)
	if o.TaskDuration > 0 {
		fmt.Fprintf(&b, "- Tasks and code mode: %s per part, once, on the first W1 cluster.\n", o.TaskDuration)
	}
	if o.Principals > 0 {
		fmt.Fprintf(&b, "- The W1 clusters' gateway authenticates API keys, %d principals; W1 presents the first key on every side (the backends ignore it), find_tool as many as a row says.\n", o.Principals)
	}
	b.WriteString("\n")
	b.WriteString("\"Direct\" is the same go-sdk client doing the same thing against one demo backend without Switchboard; \"proxy\" is the floor of one hop: " +
		"Go's `httputil.ReverseProxy` (a process of its own, parsing nothing) in front of that same backend. " +
		"Modern is go-sdk's default Connect (server/discover, 2026-07-28); Legacy pins `ProtocolVersion: \"2025-11-25\"` (initialize, session). " +
		"The harness checks the negotiated version, every tool result, every find_tool answer and every listed count. " +
		"CPU per call is the CPU time (utime + stime, from /proc) a process used during a run divided by the calls completed. " +
		"Switchboard's services run as shipped, their collector's heap goal at least `ops.heapFloorMiB` (64 MiB); " +
		"the proxy, the backends and the client run with Go's default pacing (`GOGC=100`), as a plain Go proxy ships.\n\n")
	b.WriteString("Reproduce: `make bench` (builds, then runs `switchboard-load bench --bin bin --out docs/load-results.md`). " +
		"`switchboard-load bench --call-duration 1s --runs 1 --walks 1 --connects 1 --find-duration 1s --small` is a smoke run of under a minute.\n\n")

	writeTargets(&b, r)
	for _, t := range r.Calls {
		writeCallTable(&b, o, t)
	}
	writeFinds(&b, r.Finds)
	writeTasks(&b, o, r.Tasks)
	writeCodeMode(&b, o, r.Code)
	writeCatalogs(&b, r)
	writeMemory(&b, r)
	writeProfiles(&b, r)
	return b.String()
}

// writeTargets is the summary: each figure the request path is judged by,
// over each W1 catalog, next to the floor it is compared with.
func writeTargets(b *strings.Builder, r *BenchResults) {
	if len(r.Calls) == 0 {
		return
	}
	conc := r.Options.Concurrency
	lo, hi := conc[0], conc[len(conc)-1]
	b.WriteString("### Summary\n\n")
	b.WriteString("Each figure over each W1 catalog; the last column but one is the larger catalog's figure over the smaller's (1.00× is flat in catalog size). " +
		"Bold is Switchboard; the proxy's figure beside it is the floor of one hop.\n\n")
	b.WriteString("| Figure |")
	for _, t := range r.Calls {
		fmt.Fprintf(b, " %s tools |", thousands(t.Topology.Tools()))
	}
	if len(r.Calls) > 1 {
		b.WriteString(" larger ÷ smaller |")
	}
	b.WriteString(" goal |\n|---|")
	for range r.Calls {
		b.WriteString("---|")
	}
	if len(r.Calls) > 1 {
		b.WriteString("---|")
	}
	b.WriteString("---|\n")

	type cell struct {
		text  string
		value float64 // what the larger ÷ smaller column compares; 0 = none
	}
	row := func(name, goal string, f func(t CallTable) cell) {
		fmt.Fprintf(b, "| %s |", name)
		var values []float64
		for _, t := range r.Calls {
			c := f(t)
			fmt.Fprintf(b, " %s |", c.text)
			values = append(values, c.value)
		}
		if len(r.Calls) > 1 {
			if values[0] > 0 && values[len(values)-1] > 0 {
				fmt.Fprintf(b, " %s |", ratio(values[len(values)-1], values[0]))
			} else {
				b.WriteString(" – |")
			}
		}
		fmt.Fprintf(b, " %s |\n", goal)
	}
	none := cell{text: "–"}
	row(fmt.Sprintf("Modern c=%d: gateway + aggregator CPU per call ÷ the proxy's", hi), "≤ 1.5×", func(t CallTable) cell {
		p, ok := t.Row(Modern.Name, hi)
		if !ok {
			return none
		}
		sb, px := p.Switchboard.CPUPerCall("gateway", "aggregator"), p.Proxy.CPUPerCall("proxy")
		if px == 0 {
			return none
		}
		x := float64(sb) / float64(px)
		return cell{fmt.Sprintf("%s ÷ %s ms = **%.2f×**", msf(sb), msf(px), x), x}
	})
	throughput := func(era string, n int) func(t CallTable) cell {
		return func(t CallTable) cell {
			p, ok := t.Row(era, n)
			if !ok || p.Direct.Rate() == 0 {
				return none
			}
			x := p.Switchboard.Rate() / p.Direct.Rate()
			return cell{fmt.Sprintf("**%.2f×**, proxy %s", x, ratio(p.Proxy.Rate(), p.Direct.Rate())), x}
		}
	}
	row(fmt.Sprintf("Modern c=%d: calls/s ÷ direct", hi), "≥ 0.7×", throughput(Modern.Name, hi))
	// addedP50 is Switchboard's p50 over direct's; like for like pairs
	// Switchboard on the first backend with direct on it, and Switchboard
	// over every backend with direct over every backend.
	addedP50 := func(sb, direct CallRun) (time.Duration, bool) {
		if sb.Calls == 0 || direct.Calls == 0 {
			return 0, false
		}
		return sb.P50 - direct.P50, true
	}
	// positive is what the larger ÷ smaller column compares: nothing when
	// the figure is not above zero.
	positive := func(d time.Duration) float64 { return float64(max(d, 0)) }
	likeForLikeP50 := func(era string) func(t CallTable) cell {
		return func(t CallTable) cell {
			p, ok := t.Row(era, lo)
			if !ok {
				return none
			}
			one, ok1 := addedP50(p.SwitchboardFirstBackend, p.Direct)
			every, ok2 := addedP50(p.Switchboard, p.DirectSpread)
			if !ok1 || !ok2 {
				return none
			}
			return cell{fmt.Sprintf("**%s** / **%s ms**, proxy %s ms", signedMs(one), signedMs(every), signedMs(p.Proxy.P50-p.Direct.P50)), positive(every)}
		}
	}
	row(fmt.Sprintf("Modern c=%d, like for like: p50 added over direct, one backend / every backend", lo), "≤ +0.5 ms", likeForLikeP50(Modern.Name))
	row(fmt.Sprintf("Modern c=%d, mixed: p50 added, Switchboard over every backend − direct on the first", lo), "reported", func(t CallTable) cell {
		p, ok := t.Row(Modern.Name, lo)
		if !ok {
			return none
		}
		added := p.Switchboard.P50 - p.Direct.P50
		return cell{fmt.Sprintf("%s ms", signedMs(added)), positive(added)}
	})
	row(fmt.Sprintf("Legacy c=%d, like for like: p50 added over direct, one backend / every backend (the backends in Legacy sessions on both sides)", lo), "reported", likeForLikeP50(Legacy.Name))
	row(fmt.Sprintf("Legacy c=%d: calls/s ÷ direct", hi), "≥ 0.5×", throughput(Legacy.Name, hi))
	likeForLike := func(era string) func(t CallTable) cell {
		return func(t CallTable) cell {
			p, ok := t.Row(era, hi)
			if !ok || p.Direct.Rate() == 0 || p.SwitchboardFirstBackend.Rate() == 0 || p.DirectSpread.Rate() == 0 {
				return none
			}
			one, every := p.SwitchboardFirstBackend.Rate()/p.Direct.Rate(), p.Switchboard.Rate()/p.DirectSpread.Rate()
			return cell{fmt.Sprintf("**%.2f×** / **%.2f×**", one, every), every}
		}
	}
	row(fmt.Sprintf("Modern c=%d, like for like: calls/s ÷ direct, one backend / every backend", hi), "reported", likeForLike(Modern.Name))
	row(fmt.Sprintf("Legacy c=%d, like for like: calls/s ÷ direct, one backend / every backend", hi), "reported", likeForLike(Legacy.Name))
	for _, spec := range r.Options.Find {
		if spec.Concurrency != 1 {
			continue
		}
		row(fmt.Sprintf("find_tool c=1, %d principal(s): p50 (p99)", spec.Principals), "≤ 3 ms at 1,000, ≤ 5 ms at 10,000; flat in principals", func(t CallTable) cell {
			f, ok := findRun(r.Finds, t.Topology, spec)
			if !ok {
				return none
			}
			return cell{fmt.Sprintf("**%s ms** (%s)", msf(f.Run.P50), msf(f.Run.P99)), float64(f.Run.P50)}
		})
		row(fmt.Sprintf("find_tool c=1, %d principal(s): CPU per query, gateway + indexer + aggregator + PostgreSQL", spec.Principals), "reported", func(t CallTable) cell {
			f, ok := findRun(r.Finds, t.Topology, spec)
			if !ok {
				return none
			}
			v := f.Run.CPUPerCall(findRoles...)
			return cell{msf(v) + " ms", float64(v)}
		})
	}
	if len(r.Tasks) > 0 {
		row(fmt.Sprintf("Modern c=%d, tasks: CPU per task (create, polls until completed) ÷ per plain call of the same tool, gateway + aggregator + indexer + PostgreSQL", hi), "reported", func(t CallTable) cell {
			tr, ok := findTaskRow(r.Tasks, t.Topology, hi)
			if !ok || tr.RoundTrip.Calls == 0 {
				return none
			}
			task, plain, x := taskCPURatio(tr)
			return cell{fmt.Sprintf("%s ÷ %s ms = **%s**, %.1f polls per task", msf(task), msf(plain), x, tr.PollsPerTask()), 0}
		})
		row(fmt.Sprintf("Modern c=%d, tasks/get of a completed task: p50 (p99)", lo), "reported", func(t CallTable) cell {
			tr, ok := findTaskRow(r.Tasks, t.Topology, lo)
			if !ok || tr.Get.Calls == 0 {
				return none
			}
			return cell{fmt.Sprintf("**%s ms** (%s)", msf(tr.Get.P50), msf(tr.Get.P99)), 0}
		})
	}
	b.WriteString("\n")
	if len(r.Catalogs) > 0 {
		b.WriteString("W2, warm tools/list walk through Switchboard ÷ direct (one backend serving the whole catalog); goal ≤ 1.15× at 10,000 tools: ")
		var parts []string
		for _, p := range r.Catalogs {
			parts = append(parts, fmt.Sprintf("%s tools %s **%s**", thousands(p.Topology.Tools()), p.Era,
				ratio(float64(p.Switchboard.WarmWalk()), float64(p.Direct.WarmWalk()))))
		}
		b.WriteString(strings.Join(parts, ", ") + ".\n\n")
	}
}

func findRun(runs []FindRun, t Topology, spec FindSpec) (FindRun, bool) {
	for _, f := range runs {
		if f.Topology.Tools() == t.Tools() && f.Spec == spec {
			return f, true
		}
	}
	return FindRun{}, false
}

func writeCallTable(b *strings.Builder, o BenchOptions, t CallTable) {
	top := t.Topology
	fmt.Fprintf(b, "### W1: tools/call of an echo tool, %s tools (%d × %d)\n\n", thousands(top.Tools()), top.Backends, top.ToolsPerBackend)
	fmt.Fprintf(b, "Each client has its own session and calls back to back for %s; through Switchboard the calls rotate over all %s tools of the %d backends, "+
		"direct and through the proxy over the %d tools of the first backend. Every cell is **direct / proxy / Switchboard**, the ratios to direct in parentheses; latency in ms. "+
		"Load avg is at the first run of the row.\n\n", o.CallDuration, thousands(top.Tools()), top.Backends, top.ToolsPerBackend)
	b.WriteString("| Era | Clients | calls/s | p50 | p90 | p99 | errors | load avg |\n")
	b.WriteString("|---|---:|---|---|---|---|---|---|\n")
	for _, p := range t.Rows {
		d, x, s := p.Direct, p.Proxy, p.Switchboard
		fmt.Fprintf(b, "| %s | %d | %.0f / %.0f (%s) / %.0f (%s) | %s | %s | %s | %d / %d / %d | %s |\n",
			p.Era, p.Concurrency, d.Rate(), x.Rate(), ratio(x.Rate(), d.Rate()), s.Rate(), ratio(s.Rate(), d.Rate()),
			triMs(d.P50, x.P50, s.P50), triMs(d.P90, x.P90, s.P90), triMs(d.P99, x.P99, s.P99),
			d.Errors, x.Errors, s.Errors, p.LoadAvg)
	}
	b.WriteString("\nCPU per call in ms. \"÷ proxy\" is gateway + aggregator over the proxy process alone: what Switchboard's two hops cost over one plain hop. " +
		"The backend column is the first backend directly and through the proxy, and all backends summed through Switchboard; the client is the load client itself.\n\n")
	b.WriteString("| Era | Clients | proxy | gateway + aggregator (gateway, aggregator) | ÷ proxy | backend: direct / proxy / Switchboard | client: direct / proxy / Switchboard |\n")
	b.WriteString("|---|---:|---:|---|---:|---|---|\n")
	for _, p := range t.Rows {
		d, x, s := p.Direct, p.Proxy, p.Switchboard
		px, sb := x.CPUPerCall("proxy"), s.CPUPerCall("gateway", "aggregator")
		fmt.Fprintf(b, "| %s | %d | %s | %s (%s, %s) | %s | %s | %s |\n",
			p.Era, p.Concurrency, msf(px), msf(sb), msf(s.CPUPerCall("gateway")), msf(s.CPUPerCall("aggregator")),
			ratio(float64(sb), float64(px)),
			triMs(d.CPUPerCall("backend"), x.CPUPerCall("backend"), s.CPUPerCall("backend")),
			triMs(d.CPUPerCall("client"), x.CPUPerCall("client"), s.CPUPerCall("client")))
	}
	fmt.Fprintf(b, "\nLike for like: the rows above compare Switchboard calling tools of all %d backends with direct and the proxy calling the first backend's. "+
		"A backend serving a fraction of the calls sits idle between them and spends more CPU and time on each, which is the topology's cost, not Switchboard's. "+
		"Here each pair uses the same backend processes for the same calls: on **one backend**, Switchboard calls only the first backend's tools (the catalog is unchanged), as direct does; "+
		"over **every backend**, the client holds a session to each backend and makes directly the calls Switchboard makes for it above. "+
		"The era of the backend exchange is not held equal: direct speaks the client's era to the backends, while the aggregator makes a plain call in a Legacy session of a dual-era backend, "+
		"which costs a go-sdk backend less than a stateless Modern call (the backend CPU columns). "+
		"Calls/s and p50 cells are **direct / Switchboard**, p50 in ms with what Switchboard adds; CPU per call in ms.\n\n", top.Backends)
	b.WriteString("| Era | Clients | one backend: calls/s | p50 | every backend: calls/s | p50 | gateway + aggregator CPU: on one / over every | backend CPU, one: direct / Switchboard | backend CPU, every: direct / Switchboard | errors, one: direct / Switchboard | errors, every: direct / Switchboard |\n")
	b.WriteString("|---|---:|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range t.Rows {
		f, sp := p.SwitchboardFirstBackend, p.DirectSpread
		if f.Calls+f.Errors == 0 && sp.Calls+sp.Errors == 0 {
			continue // not run at this concurrency
		}
		fmt.Fprintf(b, "| %s | %d | %.0f / %.0f (%s) | %s / %s (%s) | %.0f / %.0f (%s) | %s / %s (%s) | %s / %s | %s / %s | %s / %s | %d / %d | %d / %d |\n",
			p.Era, p.Concurrency,
			p.Direct.Rate(), f.Rate(), ratio(f.Rate(), p.Direct.Rate()), msf(p.Direct.P50), msf(f.P50), signedMs(f.P50-p.Direct.P50),
			sp.Rate(), p.Switchboard.Rate(), ratio(p.Switchboard.Rate(), sp.Rate()), msf(sp.P50), msf(p.Switchboard.P50), signedMs(p.Switchboard.P50-sp.P50),
			msf(f.CPUPerCall("gateway", "aggregator")), msf(p.Switchboard.CPUPerCall("gateway", "aggregator")),
			msf(p.Direct.CPUPerCall("backend")), msf(f.CPUPerCall("backend")), msf(sp.CPUPerCall("backend")), msf(p.Switchboard.CPUPerCall("backend")),
			p.Direct.Errors, f.Errors, sp.Errors, p.Switchboard.Errors)
	}
	for _, p := range t.Rows {
		for _, side := range []struct {
			name string
			run  CallRun
		}{{"direct", p.Direct}, {"through the proxy", p.Proxy}, {"through Switchboard", p.Switchboard}, {"through Switchboard, first backend only", p.SwitchboardFirstBackend}, {"direct to every backend", p.DirectSpread}} {
			if side.run.FirstError != "" {
				fmt.Fprintf(b, "\nFirst error, %s c=%d %s: `%s`\n", p.Era, p.Concurrency, side.name, oneLine(side.run.FirstError))
			}
		}
	}
	b.WriteString("\n")
}

func writeFinds(b *strings.Builder, finds []FindRun) {
	if len(finds) == 0 {
		return
	}
	b.WriteString("### find_tool through the stack\n\n")
	b.WriteString("go-sdk Modern clients on `/mcp/optimized` calling find_tool back to back with varied queries; every answer must hold at least one tool. " +
		"Principals are distinct API keys, one session each; the clients rotate over the sessions, and each session queried once before the clock started (its principal's scope resolved). " +
		"Latency and CPU per query in ms; PostgreSQL is every process of its server (the postmaster, its connections' processes and background workers).\n\n")
	b.WriteString("| Tools | Clients | Principals (sessions) | queries/s | p50 | p90 | p99 | CPU: gateway | indexer | aggregator | PostgreSQL | total | client | errors | load avg |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, f := range finds {
		r := f.Run
		fmt.Fprintf(b, "| %s | %d | %d (%d) | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %s |\n",
			thousands(f.Topology.Tools()), f.Spec.Concurrency, f.Spec.Principals, f.Spec.Sessions(), r.Rate(),
			msf(r.P50), msf(r.P90), msf(r.P99),
			msf(r.CPUPerCall("gateway")), msf(r.CPUPerCall("indexer")), msf(r.CPUPerCall("aggregator")), msf(r.CPUPerCall("postgres")),
			msf(r.CPUPerCall(findRoles...)), msf(r.CPUPerCall("client")), r.Errors, f.LoadAvg)
	}
	for _, f := range finds {
		if f.Run.FirstError != "" {
			fmt.Fprintf(b, "\nFirst error, %s tools c=%d %d principals: `%s`\n", thousands(f.Topology.Tools()), f.Spec.Concurrency, f.Spec.Principals, oneLine(f.Run.FirstError))
		}
	}
	b.WriteString("\n")
}

func writeCatalogs(b *strings.Builder, r *BenchResults) {
	o := r.Options
	if len(r.Catalogs) == 0 {
		return
	}
	b.WriteString("### W2: full tools/list walk over every page\n\n")
	fmt.Fprintf(b, "Every cell is **through Switchboard / direct (ratio)**. A fresh cluster per catalog size and era. Cold is the first walk after the cluster started (on the first session); warm is the median of %d walks, each on a fresh session (connect not timed). "+
		"Repeat is a second walk on the first session: go-sdk answers it from its client-side list cache when the server advertised `ttlMs` (Modern), so it is what a long-lived client pays, not server work. "+
		"Direct walks one demo backend serving the same number of tools. Times in ms.\n\n", o.Walks)
	b.WriteString("| Tools | Era | pages | bytes | cold walk | warm walk | repeat walk, same session | load avg |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, p := range r.Catalogs {
		s, d := p.Switchboard, p.Direct
		fmt.Fprintf(b, "| %s | %s | %d / %d | %s / %s | %s | %s | %s | %s |\n",
			catalogName(p.Topology), p.Era, s.ColdWalk.Pages, d.ColdWalk.Pages, kib(s.ColdWalk.Bytes), kib(d.ColdWalk.Bytes),
			pairMs(s.ColdWalk.Took, d.ColdWalk.Took), pairMs(s.WarmWalk(), d.WarmWalk()), pairMs(s.RepeatWalk, d.RepeatWalk), p.LoadAvg)
	}

	b.WriteString("\n### W3: connect cost\n\n")
	b.WriteString("Modern: `Connect` = one server/discover. Legacy: `Connect` = initialize + notifications/initialized (the session's GET stream opens after Connect returns and is not timed). " +
		"First is the first connect after the cluster started; then the median and p90 of fresh connects. Through Switchboard / direct, times in ms.\n\n")
	b.WriteString("| Tools | Era | first connect | median | p90 |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, p := range r.Catalogs {
		s, d := p.Switchboard, p.Direct
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", catalogName(p.Topology), p.Era,
			pairMs(s.ColdConnect, d.ColdConnect), pairMs(s.ConnectMedian(), d.ConnectMedian()), pairMs(s.ConnectP90(), d.ConnectP90()))
	}
	b.WriteString("\n")
}

func writeMemory(b *strings.Builder, r *BenchResults) {
	o := r.Options
	b.WriteString("### W4: resident memory (VmRSS, MiB)\n\n")
	top := o.Concurrency[len(o.Concurrency)-1]
	fmt.Fprintf(b, "The first W1 cluster: idle is right after it became ready; peak is the highest of samples every 250 ms during the W1 runs at %d clients (directly, through the proxy and through Switchboard); "+
		"after is once all W1 runs ended. \"backend\" is the largest of the demo backends; under direct and proxy load the first backend is the target.\n\n", top)
	fmt.Fprintf(b, "| Process | idle | peak, Modern c=%d | peak, Legacy c=%d | after W1 |\n", top, top)
	b.WriteString("|---|---:|---:|---:|---:|\n")
	for _, m := range r.Memory {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", m.Process, mib(m.Idle), mib(m.Peak["Modern"]), mib(m.Peak["Legacy"]), mib(m.After))
	}
	if len(r.Catalogs) > 0 {
		b.WriteString("\nThe W2/W3 clusters, after their walks and connects:\n\n")
		b.WriteString("| Tools | Era | gateway | aggregator | indexer |\n|---|---|---:|---:|---:|\n")
		for _, p := range r.Catalogs {
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", catalogName(p.Topology), p.Era, mib(p.RSS["gateway"]), mib(p.RSS["aggregator"]), mib(p.RSS["indexer"]))
		}
	}
}

func writeProfiles(b *strings.Builder, r *BenchResults) {
	if len(r.Profiles) == 0 {
		return
	}
	fmt.Fprintf(b, "\n### Profiles\n\nTaken with `--profile DIR` during extra runs that are not part of the figures above (%ds each); the files, in DIR:\n\n", r.Options.ProfileSeconds)
	for _, p := range r.Profiles {
		// Only the name: the directory is the caller's and may be private.
		fmt.Fprintf(b, "- `%s`: %s, %s profile during %s\n", filepath.Base(p.Path), p.Role, p.Kind, p.Label)
	}
	b.WriteString("\nRead one with `go tool pprof -top FILE` (allocations: `go tool pprof -sample_index=alloc_space -top FILE`); see docs/profiling.md.\n")
}

// triMs formats three durations in ms as "a / b / c".
func triMs(a, b, c time.Duration) string {
	return fmt.Sprintf("%s / %s / %s", msf(a), msf(b), msf(c))
}

// signedMs formats a duration in ms with its sign.
func signedMs(d time.Duration) string {
	if d < 0 {
		return "−" + msf(-d)
	}
	return "+" + msf(d)
}
