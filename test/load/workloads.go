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

// Target is one side of a comparison: Switchboard's gateway or a backend
// reached directly.
type Target struct {
	// Name is "switchboard" or "direct".
	Name string
	URL  string
	// Tool names the echo tool the k-th call of worker w calls, so calls
	// spread over the catalog instead of repeating one name.
	Tool func(w, k int) string
	// Procs are the processes whose CPU time a run charges to this target.
	Procs []*Proc
}

// SwitchboardTarget is the gateway of c; calls rotate over every backend
// and tool.
func SwitchboardTarget(c *Cluster) Target {
	t := c.Topology
	procs := append(c.Services("gateway"), c.Services("aggregator")...)
	procs = append(procs, c.Services("backend")...)
	return Target{Name: "switchboard", URL: c.GatewayURL, Procs: procs, Tool: func(w, k int) string {
		return fmt.Sprintf("b%02d_tool_%04d", (w+k)%t.Backends, (37*k+w)%t.ToolsPerBackend)
	}}
}

// DirectTarget is c's direct backend; calls rotate over its tools.
func DirectTarget(c *Cluster) Target {
	t := c.Topology
	tools, procs := t.ToolsPerBackend, c.Services("backend")[:1]
	if t.DirectTools > 0 {
		tools, procs = t.DirectTools, c.Services("direct")
	}
	return Target{Name: "direct", URL: c.DirectURL, Procs: procs, Tool: func(w, k int) string {
		return fmt.Sprintf("tool_%04d", (37*k+w)%tools)
	}}
}

// CallRun is the outcome of one closed-loop tools/call run.
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

// CPUPerCall is the CPU time of role per completed call.
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
	sessions := make([]*Session, 0, concurrency)
	defer func() {
		for _, s := range sessions {
			s.Close()
		}
	}()
	for range concurrency {
		s, _, err := Connect(ctx, t.URL, e)
		if err != nil {
			return CallRun{}, err
		}
		sessions = append(sessions, s)
	}
	// One call per session first, so every connection is open and every
	// lazy path warm before the clock starts.
	for w, s := range sessions {
		if err := callOnce(ctx, s, t.Tool(w, 0)); err != nil {
			return CallRun{}, fmt.Errorf("warm-up call: %w", err)
		}
	}

	cpuBefore := cpuByRole(t.Procs)
	var (
		issued   atomic.Int64
		failures atomic.Int64
		firstErr atomic.Pointer[string]
		wg       sync.WaitGroup
	)
	latencies := make([][]time.Duration, concurrency)
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	for w, s := range sessions {
		wg.Go(func() {
			lat := make([]time.Duration, 0, 4096)
			for k := 1; runCtx.Err() == nil && issued.Add(1) <= int64(maxCalls); k++ {
				began := time.Now()
				err := callOnce(runCtx, s, t.Tool(w, k))
				took := time.Since(began)
				if err != nil {
					// A call cut by the end of the run is not a failure.
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
	cpuAfter := cpuByRole(t.Procs)

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
	return run, nil
}

func callOnce(ctx context.Context, s *Session, tool string) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return CallEcho(ctx, s, tool)
}

// cpuByRole sums the CPU time of procs by role; the load client itself is
// role "client".
func cpuByRole(procs []*Proc) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, p := range procs {
		if v, err := CPUTime(p.Pid()); err == nil {
			out[p.Role] += v
		}
	}
	if v, err := CPUTime(selfPid); err == nil {
		out["client"] = v
	}
	return out
}

// WalkRun is one timed walk over every tools/list page.
type WalkRun struct {
	Took         time.Duration
	Tools, Pages int
	Bytes        int64
}

// TimedWalk walks every page of s and checks the tool count.
func TimedWalk(ctx context.Context, s *Session, wantTools int) (WalkRun, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*callTimeout)
	defer cancel()
	before := s.BytesReceived()
	start := time.Now()
	tools, pages, err := Walk(ctx, s)
	run := WalkRun{Took: time.Since(start), Tools: tools, Pages: pages, Bytes: s.BytesReceived() - before}
	if err != nil {
		return run, err
	}
	if tools != wantTools {
		return run, fmt.Errorf("listed %d tools, want %d", tools, wantTools)
	}
	return run, nil
}

// CatalogRun is W2 and W3 on one side of a fresh cluster in one era.
type CatalogRun struct {
	ColdConnect time.Duration
	ColdWalk    WalkRun
	// RepeatWalk is a second walk on the cold session. go-sdk answers it
	// from its client-side cache when the server advertised ttlMs
	// (Modern only), so it shows what a long-lived client pays.
	RepeatWalk time.Duration
	// WarmWalks are walks on fresh sessions (connect not timed), which
	// no client cache can answer: the servers' warm cost.
	WarmWalks []time.Duration
	// Connects are the connects of fresh sessions after the first.
	Connects []time.Duration
}

// WarmWalk is the median warm walk.
func (r *CatalogRun) WarmWalk() time.Duration { return Median(slices.Clone(r.WarmWalks)) }

// ConnectMedian is the median connect.
func (r *CatalogRun) ConnectMedian() time.Duration { return Median(slices.Clone(r.Connects)) }

// ConnectP90 is the 90th percentile connect.
func (r *CatalogRun) ConnectP90() time.Duration {
	d := slices.Clone(r.Connects)
	slices.Sort(d)
	return Percentile(d, 0.9)
}

// RunCatalog measures a fresh cluster c in era e: the first connect and
// walk through Switchboard and directly (cold) and a repeat walk on that
// session, then walks on walks fresh sessions and connects fresh sessions
// connects times, alternating between the two sides so that a change in
// the machine's load hits both alike.
func RunCatalog(ctx context.Context, c *Cluster, e Era, walks, connects int) (sb, direct CatalogRun, err error) {
	sides := []struct {
		url string
		run *CatalogRun
	}{{url: c.GatewayURL, run: &sb}, {url: c.DirectURL, run: &direct}}
	want := c.Topology.Tools()
	for _, s := range sides {
		sess, took, err := connectOnce(ctx, s.url, e)
		if err != nil {
			return sb, direct, err
		}
		s.run.ColdConnect = took
		s.run.ColdWalk, err = TimedWalk(ctx, sess, want)
		if err == nil {
			var repeat WalkRun
			repeat, err = TimedWalk(ctx, sess, want)
			s.run.RepeatWalk = repeat.Took
		}
		sess.Close()
		if err != nil {
			return sb, direct, fmt.Errorf("walk of %s: %w", s.url, err)
		}
	}
	for range walks {
		for _, s := range sides {
			sess, _, err := connectOnce(ctx, s.url, e)
			if err != nil {
				return sb, direct, err
			}
			w, err := TimedWalk(ctx, sess, want)
			sess.Close()
			if err != nil {
				return sb, direct, fmt.Errorf("warm walk of %s: %w", s.url, err)
			}
			s.run.WarmWalks = append(s.run.WarmWalks, w.Took)
		}
	}
	for range connects {
		for _, s := range sides {
			sess, took, err := connectOnce(ctx, s.url, e)
			if err != nil {
				return sb, direct, err
			}
			sess.Close()
			s.run.Connects = append(s.run.Connects, took)
		}
	}
	return sb, direct, nil
}

func connectOnce(ctx context.Context, url string, e Era) (*Session, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return Connect(ctx, url, e)
}
