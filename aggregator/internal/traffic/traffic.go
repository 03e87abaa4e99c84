// Package traffic keeps an aggregator replica's last hour of tool calls
// (the console sums its replicas'),
// minute by minute, by backend, by tool and by server (calls, errors,
// rate-limit refusals, latency), and the events of its backends' health,
// for the operator console's traffic page (GetTraffic). It is fed where
// every call's outcome is known (the admission's audit step) and holds a
// bounded amount whatever the traffic: 60 minutes, at most MaxNames names
// per dimension and minute (the rest are counted as "(other)"), and
// MaxEvents health events.
package traffic

import (
	"slices"
	"sync"
	"time"
)

// Dimensions a call is counted under.
const (
	DimTotal   = "total"
	DimBackend = "backend"
	DimTool    = "tool"
	DimServer  = "server"
)

// Outcomes of a call as the page tells them apart.
const (
	OutcomeOK          = "ok"
	OutcomeError       = "error"
	OutcomeRateLimited = "rate_limited"
	// OutcomeRefused: denied, missing or invalid: the caller's request,
	// not a failure.
	OutcomeRefused = "refused"
)

// Bounds.
const (
	Minutes   = 60
	MaxNames  = 200
	MaxEvents = 500
	// Other names the calls of names past MaxNames in a minute.
	Other = "(other)"
)

// latencyBuckets are the upper bounds (ms) of the latency histogram: 0.25
// ms doubling to 64 s.
var latencyBuckets = func() []float64 {
	var b []float64
	for v := 0.25; v <= 65536; v *= 2 {
		b = append(b, v)
	}
	return b
}()

// Cell is one name's calls in one minute.
type Cell struct {
	Calls, Errors, RateLimited, Refused int64
	hist                                [32]int64
	// overflow counts the calls longer than the last bucket's bound.
	overflow int64
}

// Histogram is the cell's calls per latency bucket (LatencyBucketsMs),
// the last counting every longer call too (GetTraffic's histogram).
func (c *Cell) Histogram() []int64 { return slices.Clone(c.hist[:len(latencyBuckets)]) }

// Overflow is how many of the calls of the last bucket were longer than
// its bound: without it, a call of ten minutes read as at most 65.5 s.
func (c *Cell) Overflow() int64 { return c.overflow }

// LatencyBucketsMs are the histogram's upper bounds, in milliseconds.
func LatencyBucketsMs() []float64 { return slices.Clone(latencyBuckets) }

func (c *Cell) add(outcome string, latency time.Duration) {
	c.Calls++
	switch outcome {
	case OutcomeError:
		c.Errors++
	case OutcomeRateLimited:
		c.RateLimited++
	case OutcomeRefused:
		c.Refused++
	}
	ms := float64(latency) / float64(time.Millisecond)
	i, _ := slices.BinarySearch(latencyBuckets, ms)
	c.hist[min(i, len(latencyBuckets)-1)]++
	if i == len(latencyBuckets) {
		c.overflow++
	}
}

// minute is one minute's cells by dimension and name.
type minute struct {
	start time.Time
	cells map[string]map[string]*Cell
}

// HealthEvent is one change of a backend's state, or a reload.
type HealthEvent struct {
	Time    time.Time
	Backend string // "" for a reload, which concerns every backend
	State   string // unknown, healthy, degraded, unhealthy; "reload"
	// Previous is the state a health change left; "" for the others.
	Previous string
	Detail   string
}

// Recorder keeps the last hour. Safe for concurrent use.
type Recorder struct {
	mu      sync.Mutex
	now     func() time.Time
	minutes [Minutes]minute
	events  []HealthEvent
}

// New returns an empty Recorder.
func New() *Recorder { return &Recorder{now: time.Now} }

// Call counts one call of tool in server, answered by backend ("" for
// none: refused before it had one), ending with outcome after latency.
func (r *Recorder) Call(server, tool, backend, outcome string, latency time.Duration) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.current()
	r.cell(m, DimTotal, "").add(outcome, latency)
	if backend != "" {
		r.cell(m, DimBackend, backend).add(outcome, latency)
		// A tool is named only once a backend owned it: a refused call's
		// name is the client's, unbounded and possibly hostile.
		r.cell(m, DimTool, tool).add(outcome, latency)
	}
	if server == "" {
		server = "/mcp"
	}
	r.cell(m, DimServer, server).add(outcome, latency)
}

// Health records e, stamped now: a backend's change of state, the number
// of its tools held for review, or (Backend "") a reload.
func (r *Recorder) Health(e HealthEvent) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.events) == MaxEvents {
		r.events = slices.Delete(r.events, 0, 1)
	}
	e.Time = r.now()
	r.events = append(r.events, e)
}

// current is the minute now falls in, reset if it held an older one.
func (r *Recorder) current() *minute {
	start := r.now().Truncate(time.Minute)
	m := &r.minutes[start.Unix()/60%Minutes]
	if !m.start.Equal(start) {
		*m = minute{start: start, cells: map[string]map[string]*Cell{}}
	}
	return m
}

func (r *Recorder) cell(m *minute, dim, name string) *Cell {
	byName := m.cells[dim]
	if byName == nil {
		byName = map[string]*Cell{}
		m.cells[dim] = byName
	}
	c := byName[name]
	if c == nil {
		if len(byName) >= MaxNames {
			name = Other
			if c = byName[name]; c != nil {
				return c
			}
		}
		c = &Cell{}
		byName[name] = c
	}
	return c
}

// Minute is one minute of the hour as Snapshot returns it.
type Minute struct {
	Start time.Time
	// Cells by dimension and name (DimTotal's name is "").
	Cells map[string]map[string]Cell
}

// Snapshot is the last hour, oldest minute first (a minute without calls
// included, with no cells), and the health events of that hour.
func (r *Recorder) Snapshot() ([]Minute, []HealthEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now().Truncate(time.Minute)
	out := make([]Minute, Minutes)
	for i := range out {
		start := now.Add(time.Duration(i-Minutes+1) * time.Minute)
		out[i] = Minute{Start: start, Cells: map[string]map[string]Cell{}}
		m := &r.minutes[start.Unix()/60%Minutes]
		if !m.start.Equal(start) {
			continue
		}
		for dim, byName := range m.cells {
			cp := make(map[string]Cell, len(byName))
			for name, c := range byName {
				cp[name] = *c
			}
			out[i].Cells[dim] = cp
		}
	}
	since := now.Add(-(Minutes - 1) * time.Minute)
	var events []HealthEvent
	for _, e := range r.events {
		if !e.Time.Before(since) {
			events = append(events, e)
		}
	}
	return out, events
}
