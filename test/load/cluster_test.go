package load

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/test/harness"
)

// TestMain also lets the test binary stand in for switchboard-load as the
// reference proxy: Env starts its own executable with ProxyCommand.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ProxyCommand {
		if err := RunProxy(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "proxy:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	harness.Main(m)
}

// TestWorkloadsAgainstRealCluster runs every workload briefly against a
// small real cluster, so a change in the services or the SDK that breaks
// the harness shows up in make test rather than in the next make bench.
func TestWorkloadsAgainstRealCluster(t *testing.T) {
	ctx, env := startEnv(t, 4*time.Minute)

	env.Profiling = true
	c, err := env.Start(ctx, Topology{Backends: 2, ToolsPerBackend: 10, DirectTools: 20, Principals: 3, Proxy: true, Tasks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if len(c.Keys) != 3 || c.ProxyURL == "" || len(c.Services("proxy")) != 1 {
		t.Fatalf("cluster: %d keys, proxy %q, %d proxy processes", len(c.Keys), c.ProxyURL, len(c.Services("proxy")))
	}
	// The gateway runs apiKeys: a session without a key is refused.
	if s, _, err := Connect(ctx, c.GatewayURL, Modern); err == nil {
		s.Close()
		t.Fatal("the gateway accepted a session without an API key")
	}
	for _, e := range Eras {
		for _, target := range []Target{SwitchboardTarget(c), ProxyTarget(c), DirectTarget(c), SwitchboardFirstBackendTarget(c), DirectSpreadTarget(c)} {
			backendCPU := func() []time.Duration {
				var cpu []time.Duration
				for _, p := range c.Services("backend") {
					d, err := CPUTime(p.Pid())
					if err != nil {
						t.Fatal(err)
					}
					cpu = append(cpu, d)
				}
				return cpu
			}
			before := backendCPU()
			run, err := RunCalls(ctx, target, e, 2, 300*time.Millisecond, 200)
			if err != nil {
				t.Fatalf("%s %s: %v", e.Name, target.Name, err)
			}
			// Direct to every backend reaches every one of them itself.
			if target.Name == "direct-spread" {
				for i, after := range backendCPU() {
					if after <= before[i] {
						t.Errorf("%s direct-spread: backend b%02d used no CPU (%v → %v)", e.Name, i, before[i], after)
					}
				}
			}
			if run.Calls == 0 || run.Errors != 0 || run.Calls > 200 {
				t.Errorf("%s %s: %d calls, %d errors (%s); want some calls, at most 200, no errors", e.Name, target.Name, run.Calls, run.Errors, run.FirstError)
			}
			if run.P50 <= 0 || run.P99 < run.P50 {
				t.Errorf("%s %s: p50 %v p99 %v", e.Name, target.Name, run.P50, run.P99)
			}
			for _, role := range map[string][]string{
				"switchboard": {"gateway", "aggregator", "backend"}, "proxy": {"proxy", "direct"}, "direct": {"direct"},
				"switchboard-first-backend": {"gateway", "aggregator", "backend"}, "direct-spread": {"backend"},
			}[target.Name] {
				if _, ok := run.CPU[role]; !ok {
					t.Errorf("%s %s: no CPU figure for %s (%v)", e.Name, target.Name, role, run.CPU)
				}
			}
		}
		sb, direct, err := RunCatalog(ctx, c, e, 1, 2)
		if err != nil {
			t.Fatalf("%s catalog: %v", e.Name, err)
		}
		for name, r := range map[string]CatalogRun{"switchboard": sb, "direct": direct} {
			if r.ColdWalk.Tools != 20 || r.ColdWalk.Pages != 1 || r.ColdWalk.Bytes == 0 || len(r.WarmWalks) != 1 || len(r.Connects) != 2 {
				t.Errorf("%s %s: %+v", e.Name, name, r)
			}
		}
	}
	// The proxy is a process of its own, and it did the work.
	if cpu, err := CPUTime(c.Services("proxy")[0].Pid()); err != nil || cpu <= 0 {
		t.Errorf("proxy CPU time %v, %v", cpu, err)
	}
	if !WaitQuiet(ctx, c.Procs) {
		t.Error("an idle cluster never counted as quiet")
	}

	for _, spec := range []FindSpec{{Concurrency: 1, Principals: 1}, {Concurrency: 2, Principals: 3}} {
		run, err := RunFinds(ctx, c, spec, 500*time.Millisecond, 100)
		if err != nil {
			t.Fatalf("find_tool %+v: %v", spec, err)
		}
		if run.Calls == 0 || run.Errors != 0 || run.Calls > 100 || run.P50 <= 0 {
			t.Errorf("find_tool %+v: %d queries, %d errors (%s), p50 %v", spec, run.Calls, run.Errors, run.FirstError, run.P50)
		}
		for _, role := range findRoles {
			if _, ok := run.CPU[role]; !ok {
				t.Errorf("find_tool %+v: no CPU figure for %s (%v)", spec, role, run.CPU)
			}
		}
	}
	if _, err := RunFinds(ctx, c, FindSpec{Concurrency: 1, Principals: 4}, time.Second, 1); err == nil {
		t.Error("find_tool over more principals than the cluster has keys must be refused")
	}
	tasks, err := RunTasks(ctx, c, []int{1, 2}, 300*time.Millisecond, 100, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range tasks.Rows {
		for name, run := range map[string]CallRun{"plain": r.Plain, "round trip": r.RoundTrip, "tasks/get": r.Get} {
			if run.Calls == 0 || run.Errors != 0 || run.Calls > 100 || run.P50 <= 0 {
				t.Errorf("tasks c=%d %s: %d operations, %d errors (%s), p50 %v", r.Concurrency, name, run.Calls, run.Errors, run.FirstError, run.P50)
			}
		}
		if r.PollsPerTask() < 1 || r.Held < int64(r.RoundTrip.Calls) || r.CreateP50 <= 0 || r.CreateP50 > r.RoundTrip.P50 {
			t.Errorf("tasks c=%d: %.1f polls per task, %d held, create p50 %v, round trip p50 %v", r.Concurrency, r.PollsPerTask(), r.Held, r.CreateP50, r.RoundTrip.P50)
		}
		// A task is kept by the indexer in PostgreSQL: both worked.
		for _, role := range []string{"indexer", "postgres"} {
			if r.RoundTrip.CPU[role] <= 0 {
				t.Errorf("tasks c=%d: %s used no CPU for the tasks (%v)", r.Concurrency, role, r.RoundTrip.CPU)
			}
		}
	}
	if cpu, err := c.Postgres.CPUTime(); err != nil || cpu <= 0 {
		t.Errorf("PostgreSQL CPU time %v, %v", cpu, err)
	}
	code, err := RunCodeMode(ctx, c, []int{1}, 300*time.Millisecond, 50, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range code.Rows {
		for name, run := range map[string]CallRun{"direct": r.Direct, "run 1": r.One, "run 11": r.Many} {
			if run.Calls == 0 || run.Errors != 0 || run.P50 <= 0 || run.CPU["aggregator"] <= 0 {
				t.Errorf("code mode c=%d %s: %d operations, %d errors (%s), p50 %v, CPU %v", r.Concurrency, name, run.Calls, run.Errors, run.FirstError, run.P50, run.CPU)
			}
		}
		// A program of 11 calls takes longer than one of 1.
		if r.Many.P50 <= r.One.P50 {
			t.Errorf("code mode: run 11 p50 %v, run 1 %v", r.Many.P50, r.One.P50)
		}
	}

	// Profiles: on every ops port, never on the gateway's MCP port.
	for _, role := range []string{"gateway", "aggregator", "indexer"} {
		if code := httpStatus(t, c.Ops[role]+"/debug/pprof/"); code != http.StatusOK {
			t.Errorf("%s ops /debug/pprof/ = %d, want 200 with profiling on", role, code)
		}
	}
	if code := httpStatus(t, strings.TrimSuffix(c.GatewayURL, "/mcp")+"/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("the gateway's MCP port serves /debug/pprof/: %d, want 404", code)
	}
	dir := t.TempDir()
	files, err := runProfiles(ctx, c, BenchOptions{ProfileDir: dir, ProfileSeconds: 1, MaxCallsPerRun: 100000, Find: []FindSpec{{Concurrency: 2, Principals: 1}}}, 2, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	tools := fmt.Sprintf("-%dtools-", c.Topology.Tools())
	for _, name := range []string{"w1-modern-c2" + tools + "gateway", "w1-modern-c2" + tools + "aggregator", "w1-legacy-c2" + tools + "gateway", "w1-legacy-c2" + tools + "aggregator", "find-c2" + tools + "gateway", "find-c2" + tools + "indexer", "find-c2" + tools + "aggregator"} {
		for _, kind := range []string{"cpu", "allocs"} {
			want[filepath.Join(dir, name+"-"+kind+".pprof")] = true
		}
	}
	for _, f := range files {
		if !want[f.Path] {
			t.Errorf("unexpected profile %s", f.Path)
		}
		delete(want, f.Path)
		raw, err := os.ReadFile(f.Path)
		if err != nil || len(raw) < 2 || raw[0] != 0x1f || raw[1] != 0x8b {
			t.Errorf("%s: %d bytes, %v; want a gzipped profile", f.Path, len(raw), err)
		}
	}
	for path := range want {
		t.Errorf("profile %s not written", path)
	}

	for _, p := range c.Procs {
		if rss, err := RSS(p.Pid()); err != nil || rss <= 0 {
			t.Errorf("RSS of %s: %d, %v", p.Name, rss, err)
		}
	}
	if g, err := Goroutines(ctx, c.GatewayMetrics); err != nil || g <= 0 {
		t.Errorf("gateway goroutines: %v, %v", g, err)
	}

	// Without profiling, the configuration asks for none: the ops ports
	// answer 404 and the gateway has none.
	env.Profiling = false
	plain, err := env.Start(ctx, Topology{Backends: 1, ToolsPerBackend: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Stop()
	if _, ok := plain.Ops["gateway"]; ok || plain.ProxyURL != "" || len(plain.Keys) != 0 || plain.TasksURL != "" {
		t.Errorf("plain cluster: ops %v, proxy %q, %d keys, tasks %q", plain.Ops, plain.ProxyURL, len(plain.Keys), plain.TasksURL)
	}
	for _, role := range []string{"aggregator", "indexer"} {
		if code := httpStatus(t, plain.Ops[role]+"/debug/pprof/"); code != http.StatusNotFound {
			t.Errorf("%s /debug/pprof/ = %d with profiling off, want 404", role, code)
		}
		if code := httpStatus(t, plain.Ops[role]+"/healthz"); code != http.StatusOK {
			t.Errorf("%s /healthz = %d", role, code)
		}
	}
}

func httpStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestSoakPlumbing runs a very short soak: every operation kind must
// succeed and every series must have samples.
func TestSoakPlumbing(t *testing.T) {
	ctx, env := startEnv(t, 4*time.Minute)
	res, err := RunSoak(ctx, env, SoakOptions{
		Duration: 3 * time.Second, Rate: 40, SampleEvery: 250 * time.Millisecond, RelTolerance: 0.1, Progress: io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range res.Ops {
		if op.Errors != 0 {
			t.Errorf("%s: %d errors, first %q", op.Kind, op.Errors, op.FirstError)
		}
	}
	if !res.Optimizer {
		t.Error("the gateway serves /mcp/optimized, but the soak did not use it")
	}
	for _, s := range res.Series {
		if len(s.Values) < 5 {
			t.Errorf("%s: %d samples", s.Name, len(s.Values))
		}
	}
}

// TestStartFailureStopsWhatStarted fails a start after the backends are up
// (the reference proxy's executable exits at once) and checks that Start
// returns the error with every process it started gone, where it once
// stopped a nil cluster and panicked.
func TestStartFailureStopsWhatStarted(t *testing.T) {
	ctx, env := startEnv(t, 2*time.Minute)
	env.self = "/bin/false"
	c, err := env.Start(ctx, Topology{Backends: 2, ToolsPerBackend: 1, Proxy: true})
	if err == nil {
		c.Stop()
		t.Fatal("the start succeeded with a proxy that exits at once")
	}
	if c != nil {
		t.Fatalf("a failed start returned a cluster: %+v", c)
	}
	// The postmaster is the Env's; every other child was the cluster's.
	var left []string
	err = eachProcess(func(pid int, st procStat) {
		if st.PPid == os.Getpid() && pid != env.postgres.Pid {
			left = append(left, fmt.Sprintf("%s (%d)", st.Comm, pid))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Fatalf("processes still running after a failed start: %v", left)
	}
}

// startEnv is an Env over the test's binaries and a PostgreSQL of its own,
// closed when the test ends, and a context that bounds the test.
func startEnv(t *testing.T, bound time.Duration) (context.Context, *Env) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts PostgreSQL and a cluster of processes")
	}
	bin := harness.BinDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	t.Cleanup(cancel)
	env, err := NewEnv(ctx, bin, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.Close() })
	return ctx, env
}
