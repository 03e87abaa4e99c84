package load

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.9, 90 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}, {0, time.Millisecond}} {
		if got := Percentile(d, tc.q); got != tc.want {
			t.Errorf("Percentile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := Percentile(nil, 0.5); got != 0 {
		t.Errorf("Percentile of nothing = %v, want 0", got)
	}
	if got := Median([]time.Duration{3, 1, 2}); got != 2 {
		t.Errorf("Median = %v, want 2", got)
	}
}

func TestAnalyseTrend(t *testing.T) {
	series := func(f func(i int) float64) ([]float64, []float64) {
		var ts, vs []float64
		for i := range 60 {
			ts = append(ts, float64(i*5))
			vs = append(vs, f(i))
		}
		return ts, vs
	}
	for _, tc := range []struct {
		name  string
		f     func(i int) float64
		grows bool
	}{
		{"flat", func(int) float64 { return 40 }, false},
		{"noise", func(i int) float64 { return 40 + float64(i%3) }, false},
		{"leak", func(i int) float64 { return 40 + float64(i) }, true},
		{"small drift within tolerance", func(i int) float64 { return 40 + float64(i)/30 }, false},
		{"spike then back", func(i int) float64 {
			if i == 30 {
				return 400
			}
			return 40
		}, false},
		{"shrinks", func(i int) float64 { return 100 - float64(i) }, false},
	} {
		ts, vs := series(tc.f)
		if got := AnalyseTrend(ts, vs, 0.10, 4); got.Grows != tc.grows {
			t.Errorf("%s: Grows = %v, want %v (%+v)", tc.name, got.Grows, tc.grows, got)
		}
	}
	if got := AnalyseTrend([]float64{1, 2}, []float64{1, 2}, 0.1, 0); got.Grows {
		t.Error("two samples must not count as growth")
	}
}

func TestReplaceSection(t *testing.T) {
	doc := ReplaceSection(resultsTitle, SectionBench, "bench one")
	doc = ReplaceSection(doc, SectionSoak, "soak one")
	doc = ReplaceSection(doc, SectionBench, "bench two\n")
	if strings.Contains(doc, "bench one") || !strings.Contains(doc, "bench two") || !strings.Contains(doc, "soak one") {
		t.Fatalf("sections not replaced in place:\n%s", doc)
	}
	if strings.Index(doc, "bench two") > strings.Index(doc, "soak one") {
		t.Errorf("bench section moved after the soak section:\n%s", doc)
	}
	if !strings.HasPrefix(doc, "# Switchboard load results") {
		t.Errorf("title lost:\n%s", doc)
	}
}

func TestMetricValue(t *testing.T) {
	text := `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines_total_fake 3
go_goroutines 42
go_threads 9
`
	v, err := metricValue(bufio.NewScanner(strings.NewReader(text)), "go_goroutines")
	if err != nil || v != 42 {
		t.Fatalf("metricValue = %v, %v; want 42", v, err)
	}
	if _, err := metricValue(bufio.NewScanner(strings.NewReader("go_threads 9\n")), "go_goroutines"); err == nil {
		t.Error("a missing metric must be an error")
	}
}

func TestProcOfSelf(t *testing.T) {
	rss, err := RSS(os.Getpid())
	if err != nil || rss <= 0 {
		t.Fatalf("RSS(self) = %d, %v", rss, err)
	}
	// Burn a little CPU so the counter has something to show.
	deadline := time.Now().Add(30 * time.Millisecond)
	for x := 0; time.Now().Before(deadline); x++ {
		_ = x * x
	}
	if _, err := CPUTime(os.Getpid()); err != nil {
		t.Fatalf("CPUTime(self): %v", err)
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 10000: "10,000", 1234567: "1,234,567"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestCombineRunsTakesMedians(t *testing.T) {
	runs := []CallRun{
		{CallsPerSec: 100, Calls: 1000, P50: 3, P90: 9, P99: 30, CPU: map[string]time.Duration{"gateway": time.Second}},
		{CallsPerSec: 300, Calls: 3000, P50: 1, P90: 7, P99: 10, Errors: 1, FirstError: "boom", CPU: map[string]time.Duration{"gateway": time.Second}},
		{CallsPerSec: 200, Calls: 2000, P50: 2, P90: 8, P99: 20, CPU: map[string]time.Duration{"gateway": time.Second}},
	}
	got := CombineRuns(runs)
	if got.Rate() != 200 || got.P50 != 2 || got.P90 != 8 || got.P99 != 20 {
		t.Errorf("medians: got rate %v p50 %v p90 %v p99 %v", got.Rate(), got.P50, got.P90, got.P99)
	}
	if got.Calls != 6000 || got.Errors != 1 || got.FirstError != "boom" {
		t.Errorf("sums: got %d calls, %d errors, first %q", got.Calls, got.Errors, got.FirstError)
	}
	if per := got.CPUPerCall("gateway"); per != 500*time.Microsecond {
		t.Errorf("CPU per call = %v, want 500µs", per)
	}
}

func TestParseStat(t *testing.T) {
	// A command name may hold spaces and parentheses; the fields after the
	// last ")" are what count.
	line := "4242 (post gres) (x)) S 17 4242 4242 0 -1 4194560 900 0 0 0 250 75 12 8 20 0 1 0 100 1000 200"
	st, err := parseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if st.Comm != "post gres) (x)" || st.PPid != 17 || st.CPU != 3250*time.Millisecond || st.Children != 200*time.Millisecond {
		t.Errorf("parseStat = %+v", st)
	}
	for _, bad := range []string{"", "4242 postgres S 1", "4242 (postgres) S 1 2 3", "4242 (p) S x 0 0 0 0 0 0 0 0 0 1 1 1 1"} {
		if _, err := parseStat(bad); err == nil {
			t.Errorf("parseStat(%q) accepted", bad)
		}
	}
}

// The PostgreSQL server is found among the children of its parent only.
func TestFindPostgresServerNeedsOneChild(t *testing.T) {
	// This test process starts no postgres.
	if pg, err := FindPostgresServer(os.Getpid()); err == nil {
		t.Errorf("found a postgres child %d of a test that started none", pg.Pid)
	}
}

func TestBenchMarkdownSummary(t *testing.T) {
	run := func(rate float64, p50 time.Duration, cpu map[string]time.Duration) CallRun {
		return CallRun{CallsPerSec: rate, Calls: 1000, P50: p50, P90: 2 * p50, P99: 3 * p50, CPU: cpu}
	}
	// failing is run with errors, distinct per side so that the report's
	// columns can be told apart.
	failing := func(r CallRun, errors int) CallRun { r.Errors = errors; return r }
	ms := time.Millisecond
	table := func(tools int, sbCPU time.Duration) CallTable {
		t := CallTable{Topology: Topology{Backends: tools / 200, ToolsPerBackend: 200}}
		for _, era := range []string{"Modern", "Legacy"} {
			for _, n := range []int{1, 16} {
				t.Rows = append(t.Rows, CallRow{
					Era: era, Concurrency: n,
					Direct:      failing(run(1000, ms, map[string]time.Duration{"backend": 500 * ms}), 1),
					Proxy:       run(800, 1300*time.Microsecond, map[string]time.Duration{"proxy": 300 * ms, "backend": 500 * ms}),
					Switchboard: failing(run(500, 2*ms, map[string]time.Duration{"gateway": sbCPU / 2, "aggregator": sbCPU / 2, "backend": 500 * ms}), 4),
					// Like for like: Switchboard on the first backend only,
					// and the client over every backend directly.
					SwitchboardFirstBackend: failing(run(600, 1700*time.Microsecond, map[string]time.Duration{"gateway": sbCPU / 4, "aggregator": sbCPU / 4, "backend": 400 * ms}), 2),
					DirectSpread:            failing(run(900, 1100*time.Microsecond, map[string]time.Duration{"backend": 600 * ms}), 3),
				})
			}
		}
		return t
	}
	finds := []FindRun{
		{Topology: Topology{Backends: 5, ToolsPerBackend: 200}, Spec: FindSpec{Concurrency: 1, Principals: 1},
			Run: run(200, 4*ms, map[string]time.Duration{"gateway": 100 * ms, "indexer": 300 * ms, "aggregator": 50 * ms, "postgres": 550 * ms})},
	}
	res := &BenchResults{
		Options: BenchOptions{Concurrency: []int{1, 16}, Runs: 1, CallDuration: time.Second, Find: []FindSpec{{Concurrency: 1, Principals: 1}}},
		Calls:   []CallTable{table(1000, 1200*ms), table(2000, 1320*ms)},
		Finds:   finds,
	}
	md := BenchMarkdown(res)
	for _, want := range []string{
		// 1.2 ms ÷ 0.3 ms, then 1.32 ÷ 0.3 and the larger catalog's over the smaller's.
		"| Modern c=16: gateway + aggregator CPU per call ÷ the proxy's | 1.20 ÷ 0.30 ms = **4.00×** | 1.32 ÷ 0.30 ms = **4.40×** | 1.10× | ≤ 1.5× |",
		"| Modern c=16: calls/s ÷ direct | **0.50×**, proxy 0.80× |",
		// 1.7 − 1.0 ms on one backend, 2.0 − 1.1 ms over every backend.
		"| Modern c=1, like for like: p50 added over direct, one backend / every backend | **+0.70** / **+0.90 ms**, proxy +0.30 ms |",
		"| Modern c=1, mixed: p50 added, Switchboard over every backend − direct on the first | +1.00 ms |",
		// 600 ÷ 1000 and 500 ÷ 900; the larger catalog's figure over the
		// smaller's compares the every-backend pair.
		"| Legacy c=16, like for like: calls/s ÷ direct, one backend / every backend | **0.60×** / **0.56×** | **0.60×** / **0.56×** | 1.00× |",
		// CPU: 1.2 s ÷ 2 on one backend and 1.2 s over every one, per 1,000
		// calls; backends 500 / 400 ms and 600 / 500 ms; errors direct 1,
		// Switchboard 2 on one, direct 3, Switchboard 4 over every.
		"| Modern | 1 | 1000 / 600 (0.60×) | 1.00 / 1.70 (+0.70) | 900 / 500 (0.56×) | 1.10 / 2.00 (+0.90) | 0.60 / 1.20 | 0.50 / 0.40 | 0.60 / 0.50 | 1 / 2 | 3 / 4 |",
		"| find_tool c=1, 1 principal(s): p50 (p99) | **4.00 ms** (12.0) | – |",
		// 100 + 300 + 50 + 550 ms over 1,000 queries.
		"| find_tool c=1, 1 principal(s): CPU per query, gateway + indexer + aggregator + PostgreSQL | 1.00 ms |",
		"| Modern | 16 | 1000 / 800 (0.80×) / 500 (0.50×) | 1.00 / 1.30 / 2.00 |",
		"| Modern | 16 | 0.30 | 1.20 (0.60, 0.60) | 4.00× | 0.50 / 0.50 / 0.50 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
}

// TestDirectSpreadMakesSwitchboardsCalls holds the like-for-like pairing:
// the k-th call of worker w goes, directly, to the backend and tool
// Switchboard routes that worker's k-th call to, and every worker reaches
// every backend.
func TestDirectSpreadMakesSwitchboardsCalls(t *testing.T) {
	c := &Cluster{Topology: Topology{Backends: 3, ToolsPerBackend: 7}, BackendURLs: []string{"b0", "b1", "b2"}}
	sb, spread := SwitchboardTarget(c), DirectSpreadTarget(c)
	if len(spread.URLs) != 3 {
		t.Fatalf("direct-spread URLs %v, want every backend's", spread.URLs)
	}
	for w := range 4 {
		reached := map[int]bool{}
		for k := range 50 {
			u, tool := spread.Route(w, k)
			reached[u] = true
			if want := sb.Tool(w, k); fmt.Sprintf("b%02d_%s", u, tool) != want {
				t.Fatalf("worker %d call %d: direct calls %s on backend %d; Switchboard calls %s", w, k, tool, u, want)
			}
		}
		if len(reached) != 3 {
			t.Errorf("worker %d reached backends %v, want all 3", w, reached)
		}
	}
}

// TestTreeCPUCountsReapedChildren runs a child that spends CPU and waits
// for it: the tree's CPU exceeds the process's own by most of the
// child's (the kernel's tick accounting and the child's rusage differ by
// a few per cent).
func TestTreeCPUCountsReapedChildren(t *testing.T) {
	child := exec.Command("sh", "-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done")
	if err := child.Run(); err != nil {
		t.Fatal(err)
	}
	used := child.ProcessState.UserTime() + child.ProcessState.SystemTime()
	tree, err := TreeCPU(selfPid)
	if err != nil {
		t.Fatal(err)
	}
	own, err := CPUTime(selfPid)
	if err != nil {
		t.Fatal(err)
	}
	if tick := time.Second / clockTicks; used < 2*tick || tree-own < used*8/10 {
		t.Errorf("the child used %v; the tree %v, the process itself %v", used, tree, own)
	}
}
