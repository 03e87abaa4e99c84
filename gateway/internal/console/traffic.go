package console

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
)

// The traffic page draws the last hour of tool calls as the aggregator
// replicas counted them (each the calls it admitted; clusterTraffic sums
// them), minute by minute: charts
// of calls, errors, rate-limit refusals and latency in total, a row with
// a small chart for each backend, server and busiest tool, and a health
// timeline per backend. The charts are SVG drawn here, with tables of the
// same figures beside them: nothing runs in the browser, and ?live=1
// reloads the page every 10 seconds.

// Chart geometry, in SVG user units.
const (
	chartW, chartH = 600.0, 160.0
	sparkW, sparkH = 180.0, 28.0
	// toolsShown is how many of the busiest tools get a row.
	toolsShown = 20
)

// line is one series of a chart: its points as an SVG polyline's points.
type line struct {
	Name, Class, Points string
	// Dots mark each point of a series with gaps (minutes without
	// calls have no latency), where a lone point draws no line.
	Dots []dot
	// Last is its value in the current minute, for the legend.
	Last string
}

// chart is one SVG chart over the hour.
type chart struct {
	Title, Unit string
	W, H        float64
	Lines       []line
	// Max is the value of the top edge; Ticks label the time axis.
	Max   string
	Ticks []tick
}

type dot struct{ X, Y float64 }

type tick struct {
	X     float64
	Label string
}

// trafficRow is one name of a dimension over the hour.
type trafficRow struct {
	Name                                 string
	Calls, Errors, RateLimited, Refused  int64
	P50, P95                             string
	Spark                                chart
	ErrorsPercent, PerMinute, LastMinute string
}

// healthLane is one backend's health over the hour: segments of a state,
// and marks (reloads, quarantines).
type healthLane struct {
	Backend  string
	Segments []segment
	Marks    []mark
	Now      string
}

type segment struct {
	X, W  float64
	State string
	Title string
}

type mark struct {
	X     float64
	Kind  string
	Title string
}

type trafficData struct {
	// Replicas are the aggregator replicas whose counts the page sums.
	Replicas                 []string
	Live                     bool
	LiveURL, StillURL        string
	From, To                 time.Time
	Calls, Latency           chart
	Total                    trafficRow
	Backends, Servers, Tools []trafficRow
	ToolsCut                 int
	Health                   []healthLane
	HealthW                  float64
	Events                   []*aggregatorv1.HealthEvent
	BackendsNote             string
}

// trafficPage is /console/traffic.
func (c *Console) trafficPage(w http.ResponseWriter, r *http.Request, s session) {
	ctx, cancel := rpcContext(r)
	defer cancel()
	d := trafficData{Live: r.URL.Query().Get("live") == "1", LiveURL: "/console/traffic?live=1", StillURL: "/console/traffic", HealthW: chartW}
	p := page{Title: "Traffic", Active: "traffic", Session: &s, Data: &d}
	if d.Live {
		p.Refresh = liveRefresh
	}
	resp, replicas, err := c.clusterTraffic(ctx)
	if err != nil {
		c.renderFailure(w, r, "traffic", p, "GetTraffic", err)
		return
	}
	d.Replicas = replicas
	minutes := resp.GetMinutes()
	if len(minutes) > 0 {
		d.From, d.To = minutes[0].GetStart().AsTime(), minutes[len(minutes)-1].GetStart().AsTime().Add(time.Minute)
	}
	bounds := resp.GetLatencyBucketMs()
	series := perName(minutes)
	total := series[key{"total", ""}]
	d.Total = row("all calls", total, bounds)
	d.Calls = chart{Title: "Calls per minute", Unit: "calls", W: chartW, H: chartH, Ticks: timeTicks(d.From, len(minutes))}
	d.Calls.Max, d.Calls.Lines = lines(chartW, chartH, []namedSeries{
		{"calls", "calls", counts(total, func(c *aggregatorv1.TrafficCell) int64 { return c.GetCalls() })},
		{"errors", "errors", counts(total, func(c *aggregatorv1.TrafficCell) int64 { return c.GetErrors() })},
		{"rate limited", "limited", counts(total, func(c *aggregatorv1.TrafficCell) int64 { return c.GetRateLimited() })},
	}, "")
	d.Latency = chart{Title: "Latency per minute", Unit: "ms", W: chartW, H: chartH, Ticks: timeTicks(d.From, len(minutes))}
	d.Latency.Max, d.Latency.Lines = lines(chartW, chartH, []namedSeries{
		{"p50", "p50", quantiles(total, bounds, 0.5)},
		{"p95", "p95", quantiles(total, bounds, 0.95)},
	}, " ms")
	for k, cells := range series {
		switch k.dim {
		case "backend":
			d.Backends = append(d.Backends, row(k.name, cells, bounds))
		case "server":
			d.Servers = append(d.Servers, row(k.name, cells, bounds))
		case "tool":
			d.Tools = append(d.Tools, row(k.name, cells, bounds))
		}
	}
	for _, rows := range [][]trafficRow{d.Backends, d.Servers, d.Tools} {
		slices.SortFunc(rows, func(a, b trafficRow) int {
			return cmp.Or(cmp.Compare(b.Calls, a.Calls), strings.Compare(a.Name, b.Name))
		})
	}
	if len(d.Tools) > toolsShown {
		d.ToolsCut, d.Tools = len(d.Tools)-toolsShown, d.Tools[:toolsShown]
	}
	d.Events = resp.GetHealthEvents()
	if backends, err := c.deps.Aggregator.ListBackends(ctx, &aggregatorv1.ListBackendsRequest{}); err != nil {
		_, d.BackendsNote, _ = rpcFailure("ListBackends", err)
	} else {
		d.Health = healthLanes(backends.GetBackends(), d.Events, d.From, d.To)
	}
	c.render(w, r, http.StatusOK, "traffic", p)
}

type key struct{ dim, name string }

// perName is each dimension's names' cells, one per minute (nil for a
// minute without calls).
func perName(minutes []*aggregatorv1.TrafficMinute) map[key][]*aggregatorv1.TrafficCell {
	out := map[key][]*aggregatorv1.TrafficCell{{"total", ""}: make([]*aggregatorv1.TrafficCell, len(minutes))}
	for i, m := range minutes {
		for _, c := range m.GetCells() {
			k := key{c.GetDimension(), c.GetName()}
			if out[k] == nil {
				out[k] = make([]*aggregatorv1.TrafficCell, len(minutes))
			}
			out[k][i] = c
		}
	}
	return out
}

type namedSeries struct {
	name, class string
	values      []float64
}

func counts(cells []*aggregatorv1.TrafficCell, f func(*aggregatorv1.TrafficCell) int64) []float64 {
	out := make([]float64, len(cells))
	for i, c := range cells {
		if c != nil {
			out[i] = float64(f(c))
		}
	}
	return out
}

// quantiles is each minute's q-quantile latency (NaN for a minute
// without calls): the upper bound of the bucket holding it, and the last
// bound for one longer than every bound, which the chart cannot draw
// higher.
func quantiles(cells []*aggregatorv1.TrafficCell, bounds []float64, q float64) []float64 {
	out := make([]float64, len(cells))
	for i, c := range cells {
		out[i] = math.NaN()
		if c == nil {
			continue
		}
		if b := quantileBucket(latencyCounts(c, len(bounds)), q); b >= 0 {
			out[i] = bounds[min(b, len(bounds)-1)]
		}
	}
	return out
}

// latencyCounts is c's calls per bucket of the n bounds, and one bucket
// more: the calls longer than the last bound, which the aggregator counts
// in the last bucket as well (latency_overflow), for readers that know
// no overflow.
func latencyCounts(c *aggregatorv1.TrafficCell, n int) []int64 {
	out := make([]int64, n+1)
	copy(out[:n], c.GetLatencyHistogram())
	if n > 0 {
		out[n] = min(c.GetLatencyOverflow(), out[n-1])
		out[n-1] -= out[n]
	}
	return out
}

// quantileBucket is the index of the bucket of hist holding the
// q-quantile; -1 for no calls.
func quantileBucket(hist []int64, q float64) int {
	var n int64
	for _, v := range hist {
		n += v
	}
	if n == 0 {
		return -1
	}
	rank, seen := int64(math.Ceil(q*float64(n))), int64(0)
	for i, v := range hist {
		seen += v
		if seen >= rank {
			return i
		}
	}
	return len(hist) - 1
}

// lines scales series into a w×h chart (the top edge a round number over
// their maximum) and returns that maximum's label and the lines.
func lines(w, h float64, series []namedSeries, unit string) (string, []line) {
	top := 0.0
	for _, s := range series {
		for _, v := range s.values {
			if !math.IsNaN(v) {
				top = max(top, v)
			}
		}
	}
	top = niceCeil(top)
	out := make([]line, len(series))
	for i, s := range series {
		var b strings.Builder
		var dots []dot
		gaps := slices.ContainsFunc(s.values, math.IsNaN)
		n := len(s.values)
		for j, v := range s.values {
			if math.IsNaN(v) {
				continue
			}
			x := w * (float64(j) + 0.5) / float64(max(n, 1))
			y := h - h*v/top
			fmt.Fprintf(&b, "%.1f,%.1f ", x, y)
			if gaps {
				dots = append(dots, dot{X: math.Round(x*10) / 10, Y: math.Round(y*10) / 10})
			}
		}
		last := "–"
		if n > 0 && !math.IsNaN(s.values[n-1]) {
			last = number(s.values[n-1]) + unit
		}
		out[i] = line{Name: s.name, Class: s.class, Points: strings.TrimSpace(b.String()), Last: last, Dots: dots}
	}
	return number(top) + unit, out
}

// niceCeil is the smallest of 1, 2 or 5 times a power of ten at least v
// (1 for nothing).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func number(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	if v < 10 {
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// timeTicks labels the time axis every 15 minutes of the n minutes from
// from.
func timeTicks(from time.Time, n int) []tick {
	var out []tick
	for i := 0; i < n; i++ {
		t := from.Add(time.Duration(i) * time.Minute)
		if t.Minute()%15 == 0 {
			out = append(out, tick{X: chartW * (float64(i) + 0.5) / float64(n), Label: t.UTC().Format("15:04")})
		}
	}
	return out
}

// row sums a name's hour and draws its calls per minute.
func row(name string, cells []*aggregatorv1.TrafficCell, bounds []float64) trafficRow {
	r := trafficRow{Name: name, Spark: chart{W: sparkW, H: sparkH}}
	sum := &aggregatorv1.TrafficCell{LatencyHistogram: make([]int64, len(bounds))}
	for _, c := range cells {
		if c != nil {
			addCell(sum, c)
		}
	}
	r.Calls, r.Errors, r.RateLimited, r.Refused = sum.GetCalls(), sum.GetErrors(), sum.GetRateLimited(), sum.GetRefused()
	latency := latencyCounts(sum, len(bounds))
	r.P50, r.P95 = latencyText(quantileBucket(latency, 0.5), bounds), latencyText(quantileBucket(latency, 0.95), bounds)
	if r.Calls > 0 {
		r.ErrorsPercent = fmt.Sprintf("%.1f%%", 100*float64(r.Errors)/float64(r.Calls))
	}
	r.PerMinute = strconv.FormatFloat(math.Round(10*float64(r.Calls)/float64(max(len(cells), 1)))/10, 'f', -1, 64)
	calls := counts(cells, func(c *aggregatorv1.TrafficCell) int64 { return c.GetCalls() })
	if len(calls) > 0 {
		r.LastMinute = number(calls[len(calls)-1])
	}
	r.Spark.Max, r.Spark.Lines = lines(sparkW, sparkH, []namedSeries{{"calls", "calls", calls}}, "")
	return r
}

// latencyText names bucket b of bounds (latencyCounts): at most its
// bound, or longer than the last for the bucket past them.
func latencyText(b int, bounds []float64) string {
	switch {
	case b < 0 || len(bounds) == 0:
		return "–"
	case b >= len(bounds):
		return "> " + number(bounds[len(bounds)-1]) + " ms"
	}
	return "≤ " + number(bounds[b]) + " ms"
}

// maxReplicaReads bounds the GetTraffic calls of one page.
const maxReplicaReads = 16

// clusterTraffic reads GetTraffic of every aggregator replica the
// console's channel reaches and sums them. A dns: address spreads calls
// over the healthy replicas in turn (services/rpc, balance.go), so
// consecutive calls reach new replicas; a plain address reaches one. The
// turn is the channel's, which the gateway's other calls take too, so a
// replica answering again does not mean every one was read: reading stops
// after twice as many repeats in a row as replicas were found, and two
// more. Each replica's snapshot is of its own moment.
func (c *Console) clusterTraffic(ctx context.Context) (*aggregatorv1.GetTrafficResponse, []string, error) {
	var parts []*aggregatorv1.GetTrafficResponse
	seen := map[string]bool{}
	for repeats, reads := 0, 0; reads < maxReplicaReads && repeats < 2*len(parts)+2; reads++ {
		resp, err := c.deps.Aggregator.GetTraffic(ctx, &aggregatorv1.GetTrafficRequest{})
		if err != nil {
			if len(parts) > 0 {
				break // the replicas read so far
			}
			return nil, nil, err
		}
		if seen[resp.GetReplica()] {
			repeats++
			continue
		}
		repeats = 0
		seen[resp.GetReplica()] = true
		parts = append(parts, resp)
	}
	replicas := make([]string, len(parts))
	for i, p := range parts {
		replicas[i] = p.GetReplica()
	}
	slices.Sort(replicas)
	return mergeTraffic(parts), replicas, nil
}

// trafficMinutes is the hour an aggregator reports, a minute at a time.
const trafficMinutes = 60

// addCell adds src's counts and latency histogram to dst's (whose
// histogram has the buckets of the page).
func addCell(dst, src *aggregatorv1.TrafficCell) {
	dst.Calls += src.GetCalls()
	dst.Errors += src.GetErrors()
	dst.RateLimited += src.GetRateLimited()
	dst.Refused += src.GetRefused()
	dst.LatencyOverflow += src.GetLatencyOverflow()
	for i, v := range src.GetLatencyHistogram() {
		if i < len(dst.LatencyHistogram) {
			dst.LatencyHistogram[i] += v
		}
	}
}

// mergeTraffic sums replicas' hours: minute by minute (by start), each
// name's counts and latency histograms; their health events as
// mergeHealthEvents merges them.
func mergeTraffic(parts []*aggregatorv1.GetTrafficResponse) *aggregatorv1.GetTrafficResponse {
	if len(parts) == 1 {
		return parts[0]
	}
	out := &aggregatorv1.GetTrafficResponse{LatencyBucketMs: parts[0].GetLatencyBucketMs()}
	type cellKey struct {
		start     int64
		dim, name string
	}
	cells := map[cellKey]*aggregatorv1.TrafficCell{}
	byStart := map[int64][]*aggregatorv1.TrafficCell{}
	for _, p := range parts {
		for _, m := range p.GetMinutes() {
			start := m.GetStart().AsTime().Unix()
			if byStart[start] == nil {
				byStart[start] = []*aggregatorv1.TrafficCell{}
			}
			for _, c := range m.GetCells() {
				k := cellKey{start, c.GetDimension(), c.GetName()}
				sum := cells[k]
				if sum == nil {
					sum = &aggregatorv1.TrafficCell{Dimension: c.GetDimension(), Name: c.GetName(), LatencyHistogram: make([]int64, len(out.GetLatencyBucketMs()))}
					cells[k] = sum
					byStart[start] = append(byStart[start], sum)
				}
				addCell(sum, c)
			}
		}
	}
	// The newest hour of minutes any replica reported.
	ordered := slices.Sorted(maps.Keys(byStart))
	if len(ordered) > trafficMinutes {
		ordered = ordered[len(ordered)-trafficMinutes:]
	}
	for _, start := range ordered {
		m := &aggregatorv1.TrafficMinute{Start: timestamppb.New(time.Unix(start, 0)), Cells: byStart[start]}
		slices.SortFunc(m.Cells, func(a, b *aggregatorv1.TrafficCell) int {
			return cmp.Or(strings.Compare(a.GetDimension(), b.GetDimension()), strings.Compare(a.GetName(), b.GetName()))
		})
		out.Minutes = append(out.Minutes, m)
	}
	out.HealthEvents = mergeHealthEvents(parts)
	return out
}
