package load

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// SoakOptions configures a soak run.
type SoakOptions struct {
	// Duration is the measured traffic; a warm-up of a tenth of it (at
	// most 30 s) runs first and is not analysed, so filling pools and
	// caches does not pass for growth.
	Duration time.Duration
	// Rate is operations started per second.
	Rate float64
	// SampleEvery is the sampling interval of RSS and goroutines.
	SampleEvery time.Duration
	// RelTolerance is the growth (a fraction of the first fifth's mean)
	// beyond which a series counts as growing.
	RelTolerance float64
	Progress     io.Writer
}

// soakWorkers bounds the operations in flight; a tick that finds every
// worker busy is counted as skipped, so the offered rate never piles up
// unbounded work.
const soakWorkers = 32

// Operation kinds of the soak mix, in the order of one 20-step cycle:
// 14 tools/call, 2 full tools/list walks, 2 find_tool, 1 call_tool through
// the optimizer view, 1 new session (connect, call, close). Eras alternate
// from one operation of a kind to the next.
const (
	opCall     = "tools/call"
	opList     = "tools/list walk"
	opFind     = "find_tool"
	opCallTool = "call_tool (optimizer)"
	opConnect  = "connect + call + close"
)

var soakCycle = slices.Concat(
	slices.Repeat([]string{opCall}, 14),
	[]string{opList, opList, opFind, opFind, opCallTool, opConnect},
)

// OpStats counts one kind of operation.
type OpStats struct {
	Kind       string
	Done       int64
	Errors     int64
	FirstError string
}

// Series is one sampled quantity of one process.
type Series struct {
	Name   string
	Unit   string // "MiB" or "goroutines"
	Times  []float64
	Values []float64
	// After is sampled once the traffic stopped and the sessions closed.
	After float64
	Trend Trend
}

// SoakResults is what a soak measured.
type SoakResults struct {
	Machine   Machine
	Options   SoakOptions
	Warmup    time.Duration
	Ops       []*OpStats
	Skipped   int64
	Series    []*Series
	Optimizer bool
	Took      time.Duration
}

// Grows reports whether any series grew.
func (r *SoakResults) Grows() bool {
	for _, s := range r.Series {
		if s.Trend.Grows {
			return true
		}
	}
	return false
}

// soakClients are the long-lived sessions of a soak, per era.
type soakClients struct {
	raw       map[string][]*Session
	optimized map[string]*Session
}

func (c *soakClients) close() {
	for _, ss := range c.raw {
		for _, s := range ss {
			s.Close()
		}
	}
	for _, s := range c.optimized {
		s.Close()
	}
}

// RunSoak starts the W1 cluster and runs mixed traffic at a fixed rate,
// sampling the RSS of the services and the goroutines of those that serve
// Prometheus metrics.
func RunSoak(ctx context.Context, env *Env, opts SoakOptions) (*SoakResults, error) {
	res := &SoakResults{Machine: DescribeMachine(), Options: opts}
	res.Warmup = min(opts.Duration/10, 30*time.Second)
	progress := func(format string, args ...any) {
		fmt.Fprintf(opts.Progress, "%s  "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
	}
	began := time.Now()
	progress("soak: starting %d backends × %d tools", W1Topology.Backends, W1Topology.ToolsPerBackend)
	c, err := env.Start(ctx, W1Topology)
	if err != nil {
		return nil, err
	}
	defer c.Stop()

	clients := &soakClients{raw: map[string][]*Session{}, optimized: map[string]*Session{}}
	defer clients.close()
	for _, e := range Eras {
		for range 4 {
			s, _, err := connectOnce(ctx, c.GatewayURL, e, c.firstKey())
			if err != nil {
				return nil, err
			}
			clients.raw[e.Name] = append(clients.raw[e.Name], s)
		}
		s, _, err := connectOnce(ctx, c.OptimizedURL, e, c.firstKey())
		if err != nil {
			progress("soak: no optimizer view (%v); find_tool and call_tool are replaced by tools/call", err)
			continue
		}
		clients.optimized[e.Name] = s
	}
	res.Optimizer = len(clients.optimized) == len(Eras)
	if res.Optimizer {
		if err := waitForSearch(ctx, clients.optimized[Modern.Name]); err != nil {
			return nil, err
		}
	}

	stats := map[string]*OpStats{}
	for _, k := range []string{opCall, opList, opFind, opCallTool, opConnect} {
		st := &OpStats{Kind: k}
		stats[k] = st
		res.Ops = append(res.Ops, st)
	}
	var statsMu sync.Mutex
	record := func(kind string, err error) {
		statsMu.Lock()
		defer statsMu.Unlock()
		st := stats[kind]
		st.Done++
		if err != nil {
			st.Errors++
			if st.FirstError == "" {
				st.FirstError = err.Error()
			}
		}
	}

	series := newSoakSeries(ctx, c, func(name string, err error) {
		progress("soak: no goroutine count for %s (%v)", name, err)
	})
	res.Series = series.all

	traffic, stopTraffic := context.WithCancel(ctx)
	defer stopTraffic()
	var skipped atomic.Int64
	work := make(chan int, soakWorkers)
	var workers sync.WaitGroup
	for range soakWorkers {
		workers.Go(func() {
			for i := range work {
				kind, err := soakOp(traffic, c, clients, res.Optimizer, i)
				if traffic.Err() == nil {
					record(kind, err)
				}
			}
		})
	}

	// The schedule: one operation every 1/Rate, for the warm-up and the
	// measured duration; sampling starts after the warm-up.
	total := res.Warmup + opts.Duration
	tick := time.NewTicker(time.Duration(float64(time.Second) / opts.Rate))
	sample := time.NewTicker(opts.SampleEvery)
	deadline := time.NewTimer(total)
	defer tick.Stop()
	defer sample.Stop()
	defer deadline.Stop()
	start := time.Now()
	measuredFrom := start.Add(res.Warmup)
	progress("soak: %s warm-up, then %s at %.0f operations/s (optimizer view: %v)", res.Warmup, opts.Duration, opts.Rate, res.Optimizer)
	var sampleErr error
loop:
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			break loop
		case <-deadline.C:
			break loop
		case <-tick.C:
			select {
			case work <- i:
			default:
				if time.Now().After(measuredFrom) {
					skipped.Add(1)
				}
			}
		case now := <-sample.C:
			if now.Before(measuredFrom) {
				continue
			}
			if err := series.sample(ctx, now.Sub(measuredFrom).Seconds()); err != nil && sampleErr == nil {
				sampleErr = err
			}
			if dead := c.Exited(); dead != "" {
				stopTraffic()
				close(work)
				workers.Wait()
				return nil, fmt.Errorf("%s exited during the soak", dead)
			}
			progress("soak: %s", series.line())
		}
	}
	stopTraffic()
	close(work)
	workers.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if sampleErr != nil {
		return nil, fmt.Errorf("sampling: %w", sampleErr)
	}
	res.Skipped = skipped.Load()
	clients.close()
	clients.raw, clients.optimized = nil, nil
	for _, s := range series.all {
		unitTol := 4.0 // MiB
		if s.Unit == "goroutines" {
			unitTol = 10
		}
		s.Trend = AnalyseTrend(s.Times, s.Values, opts.RelTolerance, unitTol)
	}
	series.settle(ctx)
	res.Took = time.Since(began)
	return res, nil
}

// waitForSearch polls find_tool until the indexer answers, so the soak
// does not count the indexer's first indexing as errors.
func waitForSearch(ctx context.Context, s *Session) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		err := FindTool(ctx, s, "synthetic echo tool")
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("find_tool never answered: %w", err)
		case <-tick.C:
		}
	}
}

// soakOp runs the i-th operation of the schedule and returns its kind.
func soakOp(ctx context.Context, c *Cluster, clients *soakClients, optimizer bool, i int) (string, error) {
	kind := soakCycle[i%len(soakCycle)]
	era := Eras[(i/len(soakCycle))%len(Eras)]
	if !optimizer && (kind == opFind || kind == opCallTool) {
		kind = opCall
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	t := c.Topology
	tool := fmt.Sprintf("b%02d_tool_%04d", i%t.Backends, (37*i)%t.ToolsPerBackend)
	switch kind {
	case opCall:
		pool := clients.raw[era.Name]
		return kind, CallEcho(ctx, pool[i%len(pool)], tool)
	case opList:
		pool := clients.raw[era.Name]
		_, err := TimedWalk(ctx, pool[i%len(pool)], t.Tools())
		return kind, err
	case opFind:
		return kind, FindTool(ctx, clients.optimized[era.Name], searchQueries[i%len(searchQueries)])
	case opCallTool:
		res, err := clients.optimized[era.Name].CallTool(ctx, &mcp.CallToolParams{
			Name:      "call_tool",
			Arguments: map[string]any{"tool_name": tool, "parameters": map[string]any{"text": "soak"}},
		})
		if err == nil && res.IsError {
			err = fmt.Errorf("call_tool answered isError: %s", contentText(res))
		}
		return kind, err
	case opConnect:
		s, _, err := ConnectWith(ctx, c.GatewayURL, era, c.firstKey())
		if err != nil {
			return kind, err
		}
		defer s.Close()
		return kind, CallEcho(ctx, s, tool)
	}
	return kind, fmt.Errorf("unknown operation %q", kind)
}

// searchQueries vary find_tool's text, so the indexer does not answer one
// cached plan only.
var searchQueries = []string{
	"synthetic echo tool", "echo tool number 42", "tool number 7", "echo the text back", "synthetic number 199",
}

// soakSeries samples the cluster's processes.
type soakSeries struct {
	c   *Cluster
	rss map[*Proc]*Series
	// goroutines by metrics endpoint.
	goroutines map[string]*Series
	all        []*Series
}

// newSoakSeries samples the RSS of the gateway, aggregator and indexer and
// the goroutines of each of them whose metrics endpoint answers now;
// missing reports an endpoint that does not.
func newSoakSeries(ctx context.Context, c *Cluster, missing func(name string, err error)) *soakSeries {
	s := &soakSeries{c: c, rss: map[*Proc]*Series{}, goroutines: map[string]*Series{}}
	for _, role := range []string{"gateway", "aggregator", "indexer"} {
		for _, p := range c.Services(role) {
			ser := &Series{Name: p.Name + " RSS", Unit: "MiB"}
			s.rss[p] = ser
			s.all = append(s.all, ser)
		}
	}
	for _, m := range []struct{ name, url string }{{"gateway", c.GatewayMetrics}, {"aggregator", c.AggregatorMetrics}, {"indexer", c.IndexerMetrics}} {
		if _, err := Goroutines(ctx, m.url); err != nil {
			missing(m.name, err)
			continue
		}
		ser := &Series{Name: m.name + " goroutines", Unit: "goroutines"}
		s.goroutines[m.url] = ser
		s.all = append(s.all, ser)
	}
	return s
}

func (s *soakSeries) sample(ctx context.Context, at float64) error {
	for p, ser := range s.rss {
		v, err := RSS(p.Pid())
		if err != nil {
			return fmt.Errorf("RSS of %s: %w", p.Name, err)
		}
		ser.Times = append(ser.Times, at)
		ser.Values = append(ser.Values, float64(v)/(1<<20))
	}
	for url, ser := range s.goroutines {
		v, err := Goroutines(ctx, url)
		if err != nil {
			return err
		}
		ser.Times = append(ser.Times, at)
		ser.Values = append(ser.Values, v)
	}
	return nil
}

// settle samples every series once more after the traffic stopped. The
// goroutines of closed sessions and finished requests take a moment to
// end, so goroutines are polled (for at most 15 s) until they are back
// within the growth tolerance of the first fifth's mean.
func (s *soakSeries) settle(ctx context.Context) {
	for p, ser := range s.rss {
		if v, err := RSS(p.Pid()); err == nil {
			ser.After = float64(v) / (1 << 20)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for url, ser := range s.goroutines {
		for {
			v, err := Goroutines(ctx, url)
			if err == nil {
				ser.After = v
			}
			if err != nil || v <= ser.Trend.FirstMean+10 || time.Now().After(deadline) {
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
}

func (s *soakSeries) line() string {
	var parts []string
	for _, ser := range s.all {
		if n := len(ser.Values); n > 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f", ser.Name, ser.Values[n-1]))
		}
	}
	return strings.Join(parts, ", ")
}

// SoakMarkdown renders a soak run.
func SoakMarkdown(r *SoakResults) string {
	var b strings.Builder
	o := r.Options
	b.WriteString("## Soak (`make soak`)\n\n")
	b.WriteString(MachineMarkdown(r.Machine))
	fmt.Fprintf(&b, "- Traffic: %s at %.0f operations/s after a %s warm-up, on 5 backends × 200 tools; RSS and goroutines sampled every %s; run took %s.\n",
		o.Duration, o.Rate, r.Warmup, o.SampleEvery, r.Took.Round(time.Second))
	fmt.Fprintf(&b, "- Mix per 20 operations: 14 tools/call, 2 full tools/list walks, 2 find_tool and 1 call_tool on /mcp/optimized, 1 new session (connect, one call, close); Modern and Legacy alternate. Optimizer view served: %v.\n", r.Optimizer)
	fmt.Fprintf(&b, "- A series **grows** when the mean of its last fifth exceeds the mean of its first fifth by more than %.0f %% (at least 4 MiB or 10 goroutines) and its least-squares slope is positive.\n\n", o.RelTolerance*100)
	fmt.Fprintf(&b, "Reproduce: `make soak` (builds, then runs `switchboard-load soak` with the defaults, 5m at 50 operations/s); this run was `switchboard-load soak --duration %s --rate %.0f --sample-every %s`.\n\n", o.Duration, o.Rate, o.SampleEvery)
	verdict := "**Nothing grows.**"
	if r.Grows() {
		verdict = "**Growth detected** (see the rows marked grows)."
	}
	b.WriteString(verdict + "\n\n")
	b.WriteString("| Series | first fifth mean | last fifth mean | change | slope per minute | after the traffic | verdict |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---|\n")
	for _, s := range r.Series {
		t := s.Trend
		change := "–"
		if t.FirstMean != 0 {
			change = fmt.Sprintf("%+.1f %%", 100*(t.LastMean-t.FirstMean)/t.FirstMean)
		}
		v := "stable"
		if t.Grows {
			v = "grows"
		}
		fmt.Fprintf(&b, "| %s (%s) | %.1f | %.1f | %s | %+.1f | %.1f | %s |\n", s.Name, s.Unit, t.FirstMean, t.LastMean, change, t.SlopePerMinute, s.After, v)
	}
	b.WriteString("\nOperations, warm-up included:\n\n| Operation | completed | errors | first error |\n|---|---:|---:|---|\n")
	for _, op := range r.Ops {
		fmt.Fprintf(&b, "| %s | %d | %d | %s |\n", op.Kind, op.Done, op.Errors, oneLine(op.FirstError))
	}
	fmt.Fprintf(&b, "\nTicks skipped because %d operations were already in flight: %d.\n", soakWorkers, r.Skipped)
	return b.String()
}
