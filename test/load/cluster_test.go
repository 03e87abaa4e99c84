package load

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

// TestWorkloadsAgainstRealCluster runs every workload briefly against a
// small real cluster, so a change in the services or the SDK that breaks
// the harness shows up in make test rather than in the next make bench.
func TestWorkloadsAgainstRealCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and a cluster of processes")
	}
	bin := harness.BinDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	env, err := NewEnv(ctx, bin, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()

	c, err := env.Start(ctx, Topology{Backends: 2, ToolsPerBackend: 10, DirectTools: 20})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	for _, e := range Eras {
		for _, target := range []Target{SwitchboardTarget(c), DirectTarget(c)} {
			run, err := RunCalls(ctx, target, e, 2, 300*time.Millisecond, 200)
			if err != nil {
				t.Fatalf("%s %s: %v", e.Name, target.Name, err)
			}
			if run.Calls == 0 || run.Errors != 0 || run.Calls > 200 {
				t.Errorf("%s %s: %d calls, %d errors (%s); want some calls, at most 200, no errors", e.Name, target.Name, run.Calls, run.Errors, run.FirstError)
			}
			if run.P50 <= 0 || run.P99 < run.P50 {
				t.Errorf("%s %s: p50 %v p99 %v", e.Name, target.Name, run.P50, run.P99)
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
	for _, p := range c.Procs {
		if rss, err := RSS(p.Pid()); err != nil || rss <= 0 {
			t.Errorf("RSS of %s: %d, %v", p.Name, rss, err)
		}
	}
	if g, err := Goroutines(ctx, c.GatewayMetrics); err != nil || g <= 0 {
		t.Errorf("gateway goroutines: %v, %v", g, err)
	}
}

// TestSoakPlumbing runs a very short soak: every operation kind must
// succeed and every series must have samples.
func TestSoakPlumbing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and a cluster of processes")
	}
	bin := harness.BinDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	env, err := NewEnv(ctx, bin, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
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
