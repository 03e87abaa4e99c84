package load

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// BenchOptions sizes a benchmark run.
type BenchOptions struct {
	// CallDuration is the length of each W1 run; Concurrency lists the
	// numbers of concurrent clients; MaxCallsPerRun bounds a run's calls.
	CallDuration   time.Duration
	Concurrency    []int
	MaxCallsPerRun int
	// Runs repeats every W1 configuration; figures are medians.
	Runs int
	// Large, when it has backends, is a second W1 cluster with a larger
	// catalog (W1 at LargeConcurrency, and find_tool), to show whether a
	// call's cost depends on the catalog's size.
	Large            Topology
	LargeConcurrency []int
	// Principals is the number of API keys of the W1 clusters' gateways;
	// W1 uses the first, find_tool as many as a spec asks.
	Principals int
	// Find are the find_tool configurations run on each W1 cluster, once
	// each for FindDuration.
	Find         []FindSpec
	FindDuration time.Duration
	// TaskDuration is the length of each part of the tasks measurement
	// (tasks.go) on the first W1 cluster, at the lowest and the top of
	// Concurrency, run once; zero skips it, and leaves the tasks keys out
	// of the configuration (for binaries that predate tasks).
	TaskDuration time.Duration
	// Walks is the number of warm tools/list walks (W2) and Connects the
	// number of connects (W3) per side, era and catalog size.
	Walks    int
	Connects int
	// Catalogs are the W2/W3 catalog layouts.
	Catalogs []Topology
	// ProfileDir, when set, turns on the services' profiles and writes a
	// CPU and an allocation profile of the gateway and the aggregator
	// during an extra W1 Modern run at the highest concurrency over the
	// first W1 cluster, and of the gateway, the indexer and the aggregator
	// during an extra find_tool run, each ProfileSeconds long. Those runs
	// are not part of the figures: a profiler costs CPU.
	ProfileDir     string
	ProfileSeconds int
	// Progress receives one line per step.
	Progress io.Writer
}

// W1Topology is the W1 cluster: 5 backends of 200 tools, the first of them
// also the direct target.
var W1Topology = Topology{Backends: 5, ToolsPerBackend: 200}

// LargeTopology is the 10,000-tool W1 cluster: 20 backends of 500 tools.
var LargeTopology = Topology{Backends: 20, ToolsPerBackend: 500}

// DefaultCatalogs are the W2/W3 sizes: 1,000 tools as 5 × 200 and 10,000
// tools as 20 × 500, each against one backend serving as many tools.
var DefaultCatalogs = []Topology{
	{Backends: 5, ToolsPerBackend: 200, DirectTools: 1000},
	{Backends: 20, ToolsPerBackend: 500, DirectTools: 10000},
}

// CallRow is one W1 configuration on the three sides.
type CallRow struct {
	Era                        string
	Concurrency                int
	Switchboard, Proxy, Direct CallRun
	// The like-for-like pairs, run at the lowest and the top concurrency
	// only: SwitchboardFirstBackend is Switchboard calling only the direct
	// target's tools, on Direct's backend; DirectSpread is the client
	// calling every backend directly, the backends and calls of
	// Switchboard.
	SwitchboardFirstBackend, DirectSpread CallRun
	LoadAvg                               string
}

// CallTable is W1 over one catalog.
type CallTable struct {
	Topology Topology
	Rows     []CallRow
}

// Row is the row for era and n, if measured.
func (t CallTable) Row(era string, n int) (CallRow, bool) {
	for _, r := range t.Rows {
		if r.Era == era && r.Concurrency == n {
			return r, true
		}
	}
	return CallRow{}, false
}

// MemoryRow is the RSS of one process (or the largest of a group) at the
// moments W4 samples.
type MemoryRow struct {
	Process string
	Idle    int64
	// Peak under W1 at the highest concurrency, by era; After is once the
	// W1 runs are over.
	Peak  map[string]int64
	After int64
}

// CatalogPair is W2 and W3 for one catalog size and era.
type CatalogPair struct {
	Topology    Topology
	Era         string
	Switchboard CatalogRun
	Direct      CatalogRun
	// RSS is the RSS of the Switchboard services after the walks.
	RSS     map[string]int64
	LoadAvg string
}

// BenchResults is everything a benchmark run measured.
type BenchResults struct {
	Machine  Machine
	Options  BenchOptions
	Calls    []CallTable
	Memory   []MemoryRow
	Finds    []FindRun
	Tasks    []TaskTable
	Code     []CodeTable
	Catalogs []CatalogPair
	Profiles []ProfileFile
	Took     time.Duration
}

// RunBench runs W1, W4 and find_tool on one cluster per W1 catalog, then
// W2 and W3 on a fresh cluster per catalog size and era.
func RunBench(ctx context.Context, env *Env, opts BenchOptions) (*BenchResults, error) {
	res := &BenchResults{Machine: DescribeMachine(), Options: opts}
	began := time.Now()
	progress := func(format string, args ...any) {
		fmt.Fprintf(opts.Progress, "%s  "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
	}
	if opts.ProfileDir != "" {
		if err := os.MkdirAll(opts.ProfileDir, 0o755); err != nil {
			return nil, err
		}
		env.Profiling = true
	}
	type w1Cluster struct {
		topology    Topology
		concurrency []int
		first       bool
	}
	w1 := []w1Cluster{{W1Topology, opts.Concurrency, true}}
	if opts.Large.Backends > 0 {
		w1 = append(w1, w1Cluster{opts.Large, opts.LargeConcurrency, false})
	}
	for _, w := range w1 {
		t := w.topology
		t.Principals, t.Proxy = opts.Principals, true
		t.Tasks = w.first && opts.TaskDuration > 0
		progress("W1: starting %d backends × %d tools, the reference proxy, %d principals", t.Backends, t.ToolsPerBackend, t.Principals)
		c, err := env.Start(ctx, t)
		if err != nil {
			return nil, err
		}
		err = runW1Cluster(ctx, c, opts, w.concurrency, w.first, res, progress)
		stopErr := c.Stop()
		if err != nil {
			return nil, fmt.Errorf("W1 cluster of %d tools: %w", t.Tools(), err)
		}
		if stopErr != nil {
			return nil, fmt.Errorf("stop the W1 cluster: %w", stopErr)
		}
	}

	for _, t := range opts.Catalogs {
		for _, e := range Eras {
			progress("W2/W3: %s, %d tools (%d × %d), fresh cluster", e.Name, t.Tools(), t.Backends, t.ToolsPerBackend)
			c, err := env.Start(ctx, t)
			if err != nil {
				return nil, err
			}
			pair := CatalogPair{Topology: t, Era: e.Name, LoadAvg: LoadAverage()}
			pair.Switchboard, pair.Direct, err = RunCatalog(ctx, c, e, opts.Walks, opts.Connects)
			if err == nil {
				pair.RSS = rssByProcess(c.Procs, "gateway", "aggregator", "indexer")
				if dead := c.Exited(); dead != "" {
					err = fmt.Errorf("%s exited during the run", dead)
				}
			}
			stopErr := c.Stop()
			if err != nil {
				return nil, fmt.Errorf("W2/W3 %s at %d tools: %w", e.Name, t.Tools(), err)
			}
			if stopErr != nil {
				return nil, fmt.Errorf("stop the W2 cluster: %w", stopErr)
			}
			progress("  cold walk %s (direct %s), warm %s (direct %s), connect %s (direct %s); load client goroutines %d",
				ms(pair.Switchboard.ColdWalk.Took), ms(pair.Direct.ColdWalk.Took),
				ms(pair.Switchboard.WarmWalk()), ms(pair.Direct.WarmWalk()),
				ms(pair.Switchboard.ConnectMedian()), ms(pair.Direct.ConnectMedian()), runtime.NumGoroutine())
			res.Catalogs = append(res.Catalogs, pair)
		}
	}
	res.Took = time.Since(began)
	return res, nil
}

// runW1Cluster measures W1 (and W4 when first), find_tool, the tasks
// when the cluster runs them and, on the first cluster when asked, the
// profiles, adding them to res.
func runW1Cluster(ctx context.Context, c *Cluster, opts BenchOptions, concurrency []int, first bool, res *BenchResults, progress func(string, ...any)) error {
	table, memory, err := runCallsAndMemory(ctx, c, opts, concurrency, progress)
	if err != nil {
		return err
	}
	res.Calls = append(res.Calls, table)
	if first {
		res.Memory = memory
	}
	for _, spec := range opts.Find {
		load := LoadAverage()
		run, err := RunFinds(ctx, c, spec, opts.FindDuration, opts.MaxCallsPerRun)
		if err != nil {
			return fmt.Errorf("find_tool c=%d, %d principals: %w", spec.Concurrency, spec.Principals, err)
		}
		if dead := c.Exited(); dead != "" {
			return fmt.Errorf("%s exited during find_tool", dead)
		}
		progress("find_tool %d tools c=%d, %d principals: %.0f queries/s p50 %s p99 %s, CPU/query %s, errors %d",
			c.Topology.Tools(), spec.Concurrency, spec.Principals, run.Rate(), ms(run.P50), ms(run.P99), ms(run.CPUPerCall(findRoles...)), run.Errors)
		res.Finds = append(res.Finds, FindRun{Topology: c.Topology, Spec: spec, Run: run, LoadAvg: load})
	}
	if c.Topology.Tasks {
		levels := []int{concurrency[0]}
		if top := concurrency[len(concurrency)-1]; top != levels[0] {
			levels = append(levels, top)
		}
		tasks, err := RunTasks(ctx, c, levels, opts.TaskDuration, opts.MaxCallsPerRun, progress)
		if err != nil {
			return err
		}
		res.Tasks = append(res.Tasks, tasks)
		code, err := RunCodeMode(ctx, c, levels, opts.TaskDuration, opts.MaxCallsPerRun, progress)
		if err != nil {
			return err
		}
		res.Code = append(res.Code, code)
	}
	if opts.ProfileDir != "" {
		files, err := runProfiles(ctx, c, opts, concurrency[len(concurrency)-1], progress)
		if err != nil {
			return err
		}
		res.Profiles = append(res.Profiles, files...)
	}
	return nil
}

// runProfiles profiles the services during one extra W1 run of each era
// at n clients and one extra find_tool run, over each W1 catalog.
func runProfiles(ctx context.Context, c *Cluster, opts BenchOptions, n int, progress func(string, ...any)) ([]ProfileFile, error) {
	seconds := max(opts.ProfileSeconds, 1)
	// The run outlasts the profiles, which start with its clock.
	d := time.Duration(seconds)*time.Second + 2*time.Second
	var files []ProfileFile
	var capture *profileCapture
	for _, era := range Eras {
		label := fmt.Sprintf("w1-%s-c%d-%dtools", strings.ToLower(era.Name), n, c.Topology.Tools())
		run, err := runCalls(ctx, SwitchboardTarget(c), era, n, d, opts.MaxCallsPerRun, func() {
			capture = startProfiles(ctx, opts.ProfileDir, label, c.Ops, []string{"gateway", "aggregator"}, seconds)
		})
		if err != nil {
			return nil, fmt.Errorf("profiled W1 run: %w", err)
		}
		got, err := capture.wait()
		if err != nil {
			return nil, err
		}
		files = append(files, got...)
		progress("profiled %s over %d tools: %.0f calls/s, errors %d; %d profiles of %ds in %s", label, c.Topology.Tools(), run.Rate(), run.Errors, len(got), seconds, opts.ProfileDir)
	}
	if len(opts.Find) == 0 {
		return files, nil
	}
	spec := FindSpec{Concurrency: opts.Find[len(opts.Find)-1].Concurrency, Principals: 1}
	label := fmt.Sprintf("find-c%d-%dtools", spec.Concurrency, c.Topology.Tools())
	run, err := runFinds(ctx, c, spec, d, opts.MaxCallsPerRun, func() {
		capture = startProfiles(ctx, opts.ProfileDir, label, c.Ops, []string{"gateway", "indexer", "aggregator"}, seconds)
	})
	if err != nil {
		return nil, fmt.Errorf("profiled find_tool run: %w", err)
	}
	got, err := capture.wait()
	if err != nil {
		return nil, err
	}
	progress("profiled %s over %d tools: %.0f queries/s, errors %d; %d profiles", label, c.Topology.Tools(), run.Rate(), run.Errors, len(got))
	return append(files, got...), nil
}

// memoryRoles are the processes W4 reports.
var memoryRoles = []string{"gateway", "aggregator", "indexer", "backend", "proxy"}

// runCallsAndMemory runs W1 on c, opts.Runs times over: for each era and
// concurrency, directly, through the reference proxy and through
// Switchboard, one after the other so a change in the machine's load hits
// the three alike. It samples W4 around the runs at the highest
// concurrency.
func runCallsAndMemory(ctx context.Context, c *Cluster, opts BenchOptions, concurrency []int, progress func(string, ...any)) (CallTable, []MemoryRow, error) {
	idle := rssByProcess(c.Procs, memoryRoles...)
	peaks := map[string]map[string]int64{}
	targets := []Target{DirectTarget(c), ProxyTarget(c), SwitchboardTarget(c)}
	topConcurrency := concurrency[len(concurrency)-1]
	type key struct {
		era string
		n   int
	}
	runs := map[key][][]CallRun{}
	// The like-for-like runs by configuration, one per repetition.
	firstBackend, directSpread := map[key][]CallRun{}, map[key][]CallRun{}
	loads := map[key]string{}
	reps := max(opts.Runs, 1)
	for rep := range reps {
		for _, e := range Eras {
			for _, n := range concurrency {
				k := key{e.Name, n}
				if rep == 0 {
					loads[k] = LoadAverage()
					runs[k] = make([][]CallRun, len(targets))
				}
				var got []CallRun
				for i, t := range targets {
					// Each process's peak is under its own load: the services'
					// during the Switchboard run, the proxy's during its own.
					WaitQuiet(ctx, c.Procs)
					var sampler *RSSSampler
					if n == topConcurrency {
						sampler = SampleRSS(c.Procs, 250*time.Millisecond)
					}
					r, err := RunCalls(ctx, t, e, n, opts.CallDuration, opts.MaxCallsPerRun)
					if sampler != nil {
						if peaks[e.Name] == nil {
							peaks[e.Name] = map[string]int64{}
						}
						for name, v := range groupRSS(sampler.Stop(), memoryRoles) {
							peaks[e.Name][name] = max(peaks[e.Name][name], v)
						}
					}
					if err != nil {
						return CallTable{}, nil, fmt.Errorf("W1 %s %s c=%d: %w", t.Name, e.Name, n, err)
					}
					if dead := c.Exited(); dead != "" {
						return CallTable{}, nil, fmt.Errorf("%s exited during W1", dead)
					}
					runs[k][i] = append(runs[k][i], r)
					got = append(got, r)
				}
				if n == topConcurrency || n == concurrency[0] {
					var pair [2]CallRun
					for i, t := range []Target{SwitchboardFirstBackendTarget(c), DirectSpreadTarget(c)} {
						WaitQuiet(ctx, c.Procs)
						r, err := RunCalls(ctx, t, e, n, opts.CallDuration, opts.MaxCallsPerRun)
						if err != nil {
							return CallTable{}, nil, fmt.Errorf("W1 %s %s c=%d: %w", t.Name, e.Name, n, err)
						}
						if dead := c.Exited(); dead != "" {
							return CallTable{}, nil, fmt.Errorf("%s exited during W1", dead)
						}
						pair[i] = r
					}
					firstBackend[k], directSpread[k] = append(firstBackend[k], pair[0]), append(directSpread[k], pair[1])
					progress("W1 %d tools, run %d/%d %s c=%d like for like: calls/s Switchboard on the first backend %.0f, direct to every backend %.0f; p50 %s / %s; errors %d/%d",
						c.Topology.Tools(), rep+1, reps, e.Name, n, pair[0].Rate(), pair[1].Rate(), ms(pair[0].P50), ms(pair[1].P50), pair[0].Errors, pair[1].Errors)
				}
				d, p, s := got[0], got[1], got[2]
				progress("W1 %d tools, run %d/%d %s c=%d: calls/s direct %.0f, proxy %.0f, Switchboard %.0f; p50 %s / %s / %s; errors %d/%d/%d",
					c.Topology.Tools(), rep+1, reps, e.Name, n, d.Rate(), p.Rate(), s.Rate(), ms(d.P50), ms(p.P50), ms(s.P50), d.Errors, p.Errors, s.Errors)
			}
		}
	}
	table := CallTable{Topology: c.Topology}
	for _, e := range Eras {
		for _, n := range concurrency {
			k := key{e.Name, n}
			row := CallRow{
				Era: e.Name, Concurrency: n, LoadAvg: loads[k],
				Direct: CombineRuns(runs[k][0]), Proxy: CombineRuns(runs[k][1]), Switchboard: CombineRuns(runs[k][2]),
			}
			if len(firstBackend[k]) > 0 {
				row.SwitchboardFirstBackend, row.DirectSpread = CombineRuns(firstBackend[k]), CombineRuns(directSpread[k])
			}
			table.Rows = append(table.Rows, row)
		}
	}
	after := rssByProcess(c.Procs, memoryRoles...)
	var rows []MemoryRow
	for _, name := range memoryRoles {
		row := MemoryRow{Process: name, Idle: idle[name], After: after[name], Peak: map[string]int64{}}
		for era, p := range peaks {
			row.Peak[era] = p[name]
		}
		rows = append(rows, row)
	}
	return table, rows, nil
}

// rssByProcess samples the RSS of procs now, keyed by role; a role with
// several processes (the backends) reports its largest.
func rssByProcess(procs []*Proc, roles ...string) map[string]int64 {
	now := map[*Proc]int64{}
	for _, p := range procs {
		if v, err := RSS(p.Pid()); err == nil {
			now[p] = v
		}
	}
	return groupRSS(now, roles)
}

func groupRSS(byProc map[*Proc]int64, roles []string) map[string]int64 {
	out := map[string]int64{}
	for p, v := range byProc {
		for _, r := range roles {
			if p.Role == r && v > out[r] {
				out[r] = v
			}
		}
	}
	return out
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
