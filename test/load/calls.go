package load

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// callTimeout bounds every single request of a workload.
const callTimeout = 30 * time.Second

// Target is one side of a comparison: Switchboard's gateway, the
// reference proxy, or a backend reached directly.
type Target struct {
	// Name is "switchboard", "switchboard-first-backend", "proxy",
	// "direct" or "direct-spread".
	Name string
	URL  string
	// URLs and Route, when Route is set, replace URL and Tool: each worker
	// holds a session to every one of URLs, and Route picks the session
	// and the tool of each call.
	// It is a client calling several backends by itself, the calls
	// Switchboard makes for it.
	URLs  []string
	Route func(w, k int) (url int, tool string)
	// Key is sent as "Authorization: Bearer" on every request when set.
	// Every side of a comparison sends the same header, so the client does
	// the same work on each; only the gateway reads it.
	Key string
	// Tool names the echo tool the k-th call of worker w calls, so calls
	// spread over the catalog instead of repeating one name.
	Tool func(w, k int) string
	// Procs are the processes whose CPU time a run charges to this target.
	Procs []*Proc
}

// firstKey is the key W1 clients present: the first principal's, or none
// when the gateway runs anonymous.
func (c *Cluster) firstKey() string {
	if len(c.Keys) == 0 {
		return ""
	}
	return c.Keys[0]
}

// rotation is the k-th call of worker w over every backend of t: the
// backend's index and the tool's name on that backend.
func rotation(t Topology, w, k int) (backend int, tool string) {
	return (w + k) % t.Backends, fmt.Sprintf("tool_%04d", (37*k+w)%t.ToolsPerBackend)
}

// SwitchboardTarget is the gateway of c; calls rotate over every backend
// and tool.
func SwitchboardTarget(c *Cluster) Target {
	t := c.Topology
	procs := slices.Concat(c.Services("gateway"), c.Services("aggregator"), c.Services("backend"))
	return Target{Name: "switchboard", URL: c.GatewayURL, Key: c.firstKey(), Procs: procs, Tool: func(w, k int) string {
		b, tool := rotation(t, w, k)
		return fmt.Sprintf("b%02d_%s", b, tool)
	}}
}

// DirectSpreadTarget is every backend of c reached directly, each worker
// holding a session to each, with the calls of SwitchboardTarget: the k-th
// call of worker w goes to the backend and tool Switchboard routes it to.
// It pairs with SwitchboardTarget on the same backend processes and calls,
// which DirectTarget does not: a backend serving a fraction of the calls,
// idle in between, spends more CPU and time on each (its threads sleep and
// must be woken), and that is the topology's cost, not Switchboard's. The
// era of the backend exchange is not held equal: the client speaks its own
// era to the backends, as DirectTarget does, while the aggregator makes a
// plain call in a Legacy session of a dual-era backend (its choice, which
// costs the backend less under Modern).
func DirectSpreadTarget(c *Cluster) Target {
	t := c.Topology
	return Target{Name: "direct-spread", URLs: c.BackendURLs, Key: c.firstKey(), Procs: c.Services("backend"),
		Route: func(w, k int) (int, string) { return rotation(t, w, k) }}
}

// SwitchboardFirstBackendTarget is the gateway of c, with the calls of the
// direct target: only the first backend's tools (the catalog is still the
// whole cluster's). It holds the backend work equal to direct's, so that
// the ratio is the cost of Switchboard's hops alone; SwitchboardTarget
// spreads the calls over every backend process, each then getting a
// fraction of them, which costs the backends more per call (their
// per-process overhead is shared by fewer calls). Only the first backend
// is counted: the others serve no calls.
func SwitchboardFirstBackendTarget(c *Cluster) Target {
	t := c.Topology
	procs := slices.Concat(c.Services("gateway"), c.Services("aggregator"), c.Services("backend")[:1])
	return Target{Name: "switchboard-first-backend", URL: c.GatewayURL, Key: c.firstKey(), Procs: procs, Tool: func(w, k int) string {
		return fmt.Sprintf("b00_tool_%04d", (37*k+w)%t.ToolsPerBackend)
	}}
}

// directBackend is the process serving c.DirectURL and its tool count.
func (c *Cluster) directBackend() ([]*Proc, int) {
	t := c.Topology
	if t.DirectTools > 0 {
		return c.Services("direct"), t.DirectTools
	}
	return c.Services("backend")[:1], t.ToolsPerBackend
}

// DirectTarget is c's direct backend; calls rotate over its tools.
func DirectTarget(c *Cluster) Target {
	procs, tools := c.directBackend()
	return Target{Name: "direct", URL: c.DirectURL, Key: c.firstKey(), Procs: procs, Tool: directTool(tools)}
}

// ProxyTarget is the reference proxy in front of c's direct backend; the
// calls are the direct target's.
func ProxyTarget(c *Cluster) Target {
	procs, tools := c.directBackend()
	return Target{Name: "proxy", URL: c.ProxyURL, Key: c.firstKey(), Procs: slices.Concat(c.Services("proxy"), procs), Tool: directTool(tools)}
}

func directTool(tools int) func(w, k int) string {
	return func(w, k int) string { return fmt.Sprintf("tool_%04d", (37*k+w)%tools) }
}

// CallRun is the outcome of one closed-loop run of calls (tools/call, or
// find_tool queries).
type CallRun struct {
	// CallsPerSec is completed calls per second (the median over
	// repetitions once combined).
	CallsPerSec   float64
	Calls, Errors int
	FirstError    string
	Elapsed       time.Duration
	P50, P90, P99 time.Duration
	// CPU is the CPU time used during the run, by process role.
	CPU map[string]time.Duration
}

// Rate is completed calls per second.
func (r CallRun) Rate() float64 { return r.CallsPerSec }

// CombineRuns merges repetitions of one configuration: the median of the
// rates and of each percentile, and sums of calls, errors and CPU time (so
// CPU per call is the overall ratio).
func CombineRuns(runs []CallRun) CallRun {
	if len(runs) == 1 {
		return runs[0]
	}
	out := CallRun{CPU: map[string]time.Duration{}}
	var rates []float64
	var p50, p90, p99 []time.Duration
	for _, r := range runs {
		rates = append(rates, r.CallsPerSec)
		p50, p90, p99 = append(p50, r.P50), append(p90, r.P90), append(p99, r.P99)
		out.Calls += r.Calls
		out.Errors += r.Errors
		out.Elapsed += r.Elapsed
		if out.FirstError == "" {
			out.FirstError = r.FirstError
		}
		for role, v := range r.CPU {
			out.CPU[role] += v
		}
	}
	slices.Sort(rates)
	out.CallsPerSec = rates[(len(rates)-1)/2]
	if len(rates)%2 == 0 {
		out.CallsPerSec = (rates[len(rates)/2-1] + rates[len(rates)/2]) / 2
	}
	out.P50, out.P90, out.P99 = medianMean(p50), medianMean(p90), medianMean(p99)
	return out
}

// medianMean is the median, averaging the two middle values of an even
// count.
func medianMean(d []time.Duration) time.Duration {
	slices.Sort(d)
	n := len(d)
	if n%2 == 1 {
		return d[n/2]
	}
	return (d[n/2-1] + d[n/2]) / 2
}

// CPUPerCall is the CPU time of roles, summed, per completed call.
func (r CallRun) CPUPerCall(roles ...string) time.Duration {
	if r.Calls == 0 {
		return 0
	}
	var sum time.Duration
	for _, role := range roles {
		sum += r.CPU[role]
	}
	return sum / time.Duration(r.Calls)
}

// RunCalls runs concurrency workers, each with its own session in era e,
// calling echo tools of t back to back for d or until maxCalls calls in
// all, whichever comes first.
func RunCalls(ctx context.Context, t Target, e Era, concurrency int, d time.Duration, maxCalls int) (CallRun, error) {
	return runCalls(ctx, t, e, concurrency, d, maxCalls, nil)
}

// runCalls is RunCalls; started, when set, is called once the clock
// starts (after the warm-up), for a profile to cover the measured calls
// only.
func runCalls(ctx context.Context, t Target, e Era, concurrency int, d time.Duration, maxCalls int, started func()) (CallRun, error) {
	urls, route := []string{t.URL}, func(w, k int) (int, string) { return 0, t.Tool(w, k) }
	if t.Route != nil {
		if len(t.URLs) == 0 {
			return CallRun{}, fmt.Errorf("target %s routes its calls but has no URLs", t.Name)
		}
		urls, route = t.URLs, t.Route
	}
	// byWorker[w][u] is worker w's session to urls[u].
	byWorker := make([][]*Session, 0, concurrency)
	defer func() {
		for _, ss := range byWorker {
			for _, s := range ss {
				s.Close()
			}
		}
	}()
	for range concurrency {
		ss := make([]*Session, 0, len(urls))
		for _, u := range urls {
			s, _, err := ConnectWith(ctx, u, e, t.Key)
			if err != nil {
				for _, s := range ss {
					s.Close()
				}
				return CallRun{}, err
			}
			ss = append(ss, s)
		}
		byWorker = append(byWorker, ss)
	}
	// One call per session first, so every connection is open and every
	// lazy path warm before the clock starts: the first call Route sends
	// to that session.
	for w, ss := range byWorker {
		for u, s := range ss {
			tool, ok := firstCallTo(route, w, u, len(urls))
			if !ok {
				return CallRun{}, fmt.Errorf("worker %d never calls %s", w, urls[u])
			}
			if err := callOnce(ctx, s, tool); err != nil {
				return CallRun{}, fmt.Errorf("warm-up call: %w", err)
			}
		}
	}
	// closedLoop hands each worker a session of its own (as many as
	// workers); op picks the one Route names instead.
	sessions := make([]*Session, len(byWorker))
	for w, ss := range byWorker {
		sessions[w] = ss[0]
	}
	return closedLoop{
		sessions: sessions, workers: concurrency, duration: d, maxOps: maxCalls,
		cpu:     func() map[string]time.Duration { return cpuByRole(t.Procs, nil) },
		started: started,
		op: func(ctx context.Context, _ *Session, w, k int) error {
			u, tool := route(w, k)
			return CallEcho(ctx, byWorker[w][u], tool)
		},
	}.run(ctx), nil
}

// firstCallTo is the tool of worker w's first call that route sends to
// URL u of n, looking at as many calls as it takes a rotation over n URLs
// to come round, a hundred times over.
func firstCallTo(route func(w, k int) (int, string), w, u, n int) (string, bool) {
	for k := range 100 * n {
		if got, tool := route(w, k); got == u {
			return tool, true
		}
	}
	return "", false
}

// closedLoop is workers issuing operations back to back, each waiting for
// its previous answer, over a set of sessions.
type closedLoop struct {
	// sessions are shared round-robin: worker w's k-th operation uses
	// sessions[(w + k*workers) % len(sessions)], so with as many sessions
	// as workers each worker keeps its own, and with more the workers
	// rotate over all of them.
	sessions []*Session
	workers  int
	op       func(ctx context.Context, s *Session, w, k int) error
	// duration and maxOps end the run, whichever comes first.
	duration time.Duration
	maxOps   int
	// cpu reads the cumulative CPU time of the processes charged, by role.
	cpu     func() map[string]time.Duration
	started func()
}

func (l closedLoop) run(ctx context.Context) CallRun {
	cpuBefore := l.cpu()
	var (
		issued   atomic.Int64
		failures atomic.Int64
		firstErr atomic.Pointer[string]
		wg       sync.WaitGroup
	)
	latencies := make([][]time.Duration, l.workers)
	runCtx, cancel := context.WithTimeout(ctx, l.duration)
	defer cancel()
	if l.started != nil {
		l.started()
	}
	start := time.Now()
	for w := range l.workers {
		wg.Go(func() {
			lat := make([]time.Duration, 0, 4096)
			for k := 1; runCtx.Err() == nil && issued.Add(1) <= int64(l.maxOps); k++ {
				s := l.sessions[(w+k*l.workers)%len(l.sessions)]
				opCtx, opCancel := context.WithTimeout(runCtx, callTimeout)
				began := time.Now()
				err := l.op(opCtx, s, w, k)
				took := time.Since(began)
				opCancel()
				if err != nil {
					// An operation cut by the end of the run is not a failure.
					if runCtx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
						break
					}
					failures.Add(1)
					msg := err.Error()
					firstErr.CompareAndSwap(nil, &msg)
					continue
				}
				lat = append(lat, took)
			}
			latencies[w] = lat
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpuAfter := l.cpu()

	all := slices.Concat(latencies...)
	slices.Sort(all)
	run := CallRun{
		Calls:   len(all),
		Errors:  int(failures.Load()),
		Elapsed: elapsed,
		P50:     Percentile(all, 0.50),
		P90:     Percentile(all, 0.90),
		P99:     Percentile(all, 0.99),
		CPU:     map[string]time.Duration{},
	}
	if elapsed > 0 {
		run.CallsPerSec = float64(run.Calls) / elapsed.Seconds()
	}
	if p := firstErr.Load(); p != nil {
		run.FirstError = *p
	}
	for role, v := range cpuAfter {
		run.CPU[role] = v - cpuBefore[role]
	}
	return run
}

func callOnce(ctx context.Context, s *Session, tool string) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return CallEcho(ctx, s, tool)
}

// Quiescence: a measured run starts once the cluster's processes together
// have used at most quietCPU of CPU over one quietWindow (what a previous
// run left behind, such as sessions closing and collection, has settled),
// or after quietMax in any case. Without it, the first run after a busy one
// pays for the busy one's tail, which shows most at one client.
const (
	quietWindow = 100 * time.Millisecond
	quietCPU    = 5 * time.Millisecond
	quietMax    = 3 * time.Second
)

// WaitQuiet waits until procs are quiet, as above. It reports whether they
// were; a cluster that never settles is measured anyway.
func WaitQuiet(ctx context.Context, procs []*Proc) bool {
	total := func() time.Duration {
		var sum time.Duration
		for _, v := range cpuByRole(procs, nil) {
			sum += v
		}
		return sum
	}
	deadline := time.Now().Add(quietMax)
	prev := total()
	tick := time.NewTicker(quietWindow)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
		now := total()
		if now-prev <= quietCPU {
			return true
		}
		prev = now
	}
	return false
}

// cpuByRole sums the CPU time of procs by role, and of pg as "postgres"
// when set; the load client itself is role "client".
func cpuByRole(procs []*Proc, pg *PostgresServer) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, p := range procs {
		if v, err := CPUTime(p.Pid()); err == nil {
			out[p.Role] += v
		}
	}
	if pg != nil {
		if v, err := pg.CPUTime(); err == nil {
			out["postgres"] = v
		}
	}
	if v, err := CPUTime(selfPid); err == nil {
		out["client"] = v
	}
	return out
}
