package traffic

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestRecorderKeepsTheHourByDimension(t *testing.T) {
	now := time.Date(2026, 12, 6, 10, 0, 30, 0, time.UTC)
	r := &Recorder{now: func() time.Time { return now }}
	r.Call("", "weather_forecast", "weather", OutcomeOK, 3*time.Millisecond)
	r.Call("support", "weather_forecast", "weather", OutcomeError, 40*time.Millisecond)
	r.Call("", "nope", "", OutcomeRefused, time.Millisecond)
	r.Health(HealthEvent{Backend: "weather", State: "unhealthy", Previous: "healthy", Detail: "was healthy"})
	now = now.Add(2 * time.Minute)
	r.Call("", "notes_add", "notes", OutcomeRateLimited, time.Millisecond)

	minutes, events := r.Snapshot()
	if len(minutes) != Minutes || !minutes[Minutes-1].Start.Equal(now.Truncate(time.Minute)) {
		t.Fatalf("%d minutes ending %v", len(minutes), minutes[len(minutes)-1].Start)
	}
	first := minutes[Minutes-3]
	if c := first.Cells[DimTotal][""]; c.Calls != 3 || c.Errors != 1 || c.Refused != 1 {
		t.Errorf("total of the first minute: %+v", c)
	}
	// 3 ms in the bucket up to 4 ms, 40 ms in the one up to 64 ms.
	if c := first.Cells[DimBackend]["weather"]; c.Calls != 2 || c.Histogram()[bucketOf(4)] != 1 || c.Histogram()[bucketOf(64)] != 1 {
		t.Errorf("weather: %+v, histogram %v", c, c.Histogram())
	}
	if _, ok := first.Cells[DimTool]["nope"]; ok {
		t.Error("a refused call's tool name was kept")
	}
	if c := first.Cells[DimServer]["/mcp"]; c.Calls != 2 {
		t.Errorf("server /mcp: %+v", c)
	}
	if len(minutes[Minutes-2].Cells) != 0 {
		t.Errorf("a minute without calls has cells: %v", minutes[Minutes-2].Cells)
	}
	if c := minutes[Minutes-1].Cells[DimBackend]["notes"]; c.RateLimited != 1 {
		t.Errorf("notes: %+v", c)
	}
	if w, n := calls(minutes, DimBackend, "weather"), calls(minutes, DimBackend, "notes"); w != 2 || n != 1 {
		t.Errorf("the hour's calls: weather %d, notes %d", w, n)
	}
	if len(events) != 1 || events[0].Backend != "weather" || events[0].State != "unhealthy" || events[0].Previous != "healthy" || !events[0].Time.Equal(first.Start.Add(30*time.Second)) {
		t.Errorf("events %+v", events)
	}

	// An hour later the first minute is gone, and its slot reused.
	now = now.Add(60 * time.Minute)
	r.Call("", "weather_forecast", "weather", OutcomeOK, time.Millisecond)
	minutes, events = r.Snapshot()
	if n := calls(minutes, DimTotal, ""); n != 1 || len(events) != 0 {
		t.Errorf("an hour later: %d calls, %d events", n, len(events))
	}
}

// bucketOf is the histogram bucket whose upper bound is ms.
func bucketOf(ms float64) int {
	i, _ := slices.BinarySearch(LatencyBucketsMs(), ms)
	return i
}

// calls are the hour's calls of one name of a dimension.
func calls(minutes []Minute, dim, name string) int64 {
	var n int64
	for _, m := range minutes {
		c := m.Cells[dim][name]
		n += c.Calls
	}
	return n
}

func TestRecorderIsBounded(t *testing.T) {
	r := New()
	for i := range MaxNames + 50 {
		r.Call("", fmt.Sprintf("tool_%d", i), "b", OutcomeOK, time.Millisecond)
	}
	for i := range MaxEvents + 10 {
		r.Health(HealthEvent{Backend: "b", State: "healthy", Detail: fmt.Sprint(i)})
	}
	minutes, events := r.Snapshot()
	tools := minutes[Minutes-1].Cells[DimTool]
	if len(tools) != MaxNames+1 || tools[Other].Calls != 50 {
		t.Errorf("%d tool names, %d calls under %s", len(tools), tools[Other].Calls, Other)
	}
	if len(events) != MaxEvents || events[0].Detail != "10" {
		t.Errorf("%d events, first %+v", len(events), events[0])
	}
	var nilRecorder *Recorder
	nilRecorder.Call("", "t", "b", OutcomeOK, 0) // records nothing, does not panic
	nilRecorder.Health(HealthEvent{Backend: "b", State: "healthy"})
}

// TestRecorderCountsCallsLongerThanTheLastBucket: the console shows p50
// and p95 as the bound of the bucket holding them. A call of two minutes
// (a tool may have a ten-minute timeout) is counted as longer than the
// last bound (65,536 ms), not only in the last bucket, which counts it
// too for readers of the histogram alone; one of exactly that bound is
// not longer.
func TestRecorderCountsCallsLongerThanTheLastBucket(t *testing.T) {
	now := time.Date(2026, 12, 6, 10, 0, 30, 0, time.UTC)
	r := &Recorder{now: func() time.Time { return now }}
	last := LatencyBucketsMs()[len(LatencyBucketsMs())-1]
	r.Call("", "slow_report", "reports", OutcomeOK, 2*time.Minute)
	r.Call("", "slow_report", "reports", OutcomeOK, time.Duration(last)*time.Millisecond)
	minutes, _ := r.Snapshot()
	c := minutes[Minutes-1].Cells[DimTotal][""]
	if h := c.Histogram(); c.Overflow() != 1 || h[len(h)-1] != 2 {
		t.Errorf("calls of 2m and %v ms: %d longer than %v ms, histogram %v; want 1, and both in the last bucket", last, c.Overflow(), last, h)
	}
}
