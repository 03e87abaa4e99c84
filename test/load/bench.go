package load

import (
	"context"
	"fmt"
	"io"
	"runtime"
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
	// Walks is the number of warm tools/list walks (W2) and Connects the
	// number of connects (W3) per side, era and catalog size.
	Walks    int
	Connects int
	// Catalogs are the W2/W3 catalog layouts.
	Catalogs []Topology
	// Progress receives one line per step.
	Progress io.Writer
}

// W1Topology is the W1 cluster: 5 backends of 200 tools, the first of them
// also the direct target.
var W1Topology = Topology{Backends: 5, ToolsPerBackend: 200}

// DefaultCatalogs are the W2/W3 sizes: 1,000 tools as 5 × 200 and 10,000
// tools as 20 × 500, each against one backend serving as many tools.
var DefaultCatalogs = []Topology{
	{Backends: 5, ToolsPerBackend: 200, DirectTools: 1000},
	{Backends: 20, ToolsPerBackend: 500, DirectTools: 10000},
}

// CallPair is one W1 configuration on both sides.
type CallPair struct {
	Era         string
	Concurrency int
	Switchboard CallRun
	Direct      CallRun
	LoadAvg     string
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
	Calls    []CallPair
	Memory   []MemoryRow
	Catalogs []CatalogPair
	Took     time.Duration
}

// RunBench runs W1 and W4 on one cluster, then W2 and W3 on a fresh
// cluster per catalog size and era.
func RunBench(ctx context.Context, env *Env, opts BenchOptions) (*BenchResults, error) {
	res := &BenchResults{Machine: DescribeMachine(), Options: opts}
	began := time.Now()
	progress := func(format string, args ...any) {
		fmt.Fprintf(opts.Progress, "%s  "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
	}

	progress("W1/W4: starting %d backends × %d tools", W1Topology.Backends, W1Topology.ToolsPerBackend)
	c, err := env.Start(ctx, W1Topology)
	if err != nil {
		return nil, err
	}
	calls, memory, err := runCallsAndMemory(ctx, c, opts, progress)
	stopErr := c.Stop()
	if err != nil {
		return nil, err
	}
	if stopErr != nil {
		return nil, fmt.Errorf("stop the W1 cluster: %w", stopErr)
	}
	res.Calls, res.Memory = calls, memory

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

// runCallsAndMemory runs W1 on c, opts.Runs times over: for each era and
// concurrency, directly and then through Switchboard. It samples W4 around
// the runs at the highest concurrency.
func runCallsAndMemory(ctx context.Context, c *Cluster, opts BenchOptions, progress func(string, ...any)) ([]CallPair, []MemoryRow, error) {
	names := []string{"gateway", "aggregator", "indexer", "backend"}
	idle := rssByProcess(c.Procs, names...)
	peaks := map[string]map[string]int64{}
	sb, direct := SwitchboardTarget(c), DirectTarget(c)
	topConcurrency := opts.Concurrency[len(opts.Concurrency)-1]
	type key struct {
		era string
		n   int
	}
	sbRuns, directRuns, loads := map[key][]CallRun{}, map[key][]CallRun{}, map[key]string{}
	runs := max(opts.Runs, 1)
	for rep := range runs {
		for _, e := range Eras {
			for _, n := range opts.Concurrency {
				k := key{e.Name, n}
				if rep == 0 {
					loads[k] = LoadAverage()
				}
				d, err := RunCalls(ctx, direct, e, n, opts.CallDuration, opts.MaxCallsPerRun)
				if err != nil {
					return nil, nil, fmt.Errorf("W1 direct %s c=%d: %w", e.Name, n, err)
				}
				var sampler *RSSSampler
				if n == topConcurrency {
					sampler = SampleRSS(c.Procs, 250*time.Millisecond)
				}
				s, err := RunCalls(ctx, sb, e, n, opts.CallDuration, opts.MaxCallsPerRun)
				if sampler != nil {
					peak := groupRSS(sampler.Stop(), names)
					if peaks[e.Name] == nil {
						peaks[e.Name] = map[string]int64{}
					}
					for name, v := range peak {
						peaks[e.Name][name] = max(peaks[e.Name][name], v)
					}
				}
				if err != nil {
					return nil, nil, fmt.Errorf("W1 through Switchboard %s c=%d: %w", e.Name, n, err)
				}
				if dead := c.Exited(); dead != "" {
					return nil, nil, fmt.Errorf("%s exited during W1", dead)
				}
				progress("W1 run %d/%d %s c=%d: %.0f calls/s p50 %s (direct %.0f calls/s p50 %s), errors %d/%d",
					rep+1, runs, e.Name, n, s.Rate(), ms(s.P50), d.Rate(), ms(d.P50), s.Errors, d.Errors)
				sbRuns[k] = append(sbRuns[k], s)
				directRuns[k] = append(directRuns[k], d)
			}
		}
	}
	var pairs []CallPair
	for _, e := range Eras {
		for _, n := range opts.Concurrency {
			k := key{e.Name, n}
			pairs = append(pairs, CallPair{
				Era: e.Name, Concurrency: n, LoadAvg: loads[k],
				Switchboard: CombineRuns(sbRuns[k]), Direct: CombineRuns(directRuns[k]),
			})
		}
	}
	after := rssByProcess(c.Procs, names...)
	var rows []MemoryRow
	for _, name := range names {
		row := MemoryRow{Process: name, Idle: idle[name], After: after[name], Peak: map[string]int64{}}
		for era, p := range peaks {
			row.Peak[era] = p[name]
		}
		rows = append(rows, row)
	}
	return pairs, rows, nil
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
