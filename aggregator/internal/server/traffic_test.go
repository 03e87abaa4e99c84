package server_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/switchboard-mcp/switchboard/services/testkit"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// TestTrafficCountsEveryCall: GetTraffic reports the replica's calls of
// this minute by backend, tool and server, with their outcomes (a tool
// error, a refusal by a rate limit, a denied or missing tool counted but
// not named), a health change among its events, and only to operators.
func TestTrafficCountsEveryCall(t *testing.T) {
	eng := newTestBackend(t, "eng", backendOptions{tools: []string{"build"}})
	h := startAggregatorFile(t, `
aggregator:
  health: {interval: 50ms, timeout: 500ms, unhealthyThreshold: 2}
  backends:
    - {name: eng, url: `+eng.url()+`}
servers:
  - {name: ci, backends: [eng]}
rateLimits:
  limits:
    - {name: builds, per: principal, match: {tools: [eng_build]}, rate: 1/h, burst: 2, methods: [tools/call]}
`)
	ctx := context.Background()
	call := func(server, name string) {
		_, _ = h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: principal("alice"), Server: server, Name: name, ArgumentsJson: "{}"})
	}
	call("", "eng_build")
	call("ci", "eng_build")
	call("", "eng_build") // refused: the limit's burst is 2
	call("", "eng_fail")  // a tool error
	call("", "eng_nope")  // missing

	_, err := h.gateway.GetTraffic(ctx, &aggregatorv1.GetTrafficRequest{})
	wantStatus(t, err, codes.PermissionDenied, commonv1.ErrorReason_ERROR_REASON_OPERATOR_ONLY)
	resp, err := h.operator.GetTraffic(ctx, &aggregatorv1.GetTrafficRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetMinutes()) != 60 || resp.GetReplica() != "test-replica" || len(resp.GetLatencyBucketMs()) == 0 {
		t.Fatalf("%d minutes, replica %q, %d buckets", len(resp.GetMinutes()), resp.GetReplica(), len(resp.GetLatencyBucketMs()))
	}
	// The calls fall in this minute, or in the last one and this one when
	// a minute turned meanwhile: the counts are summed over the hour.
	cells := map[string]*aggregatorv1.TrafficCell{}
	for _, m := range resp.GetMinutes() {
		for _, c := range m.GetCells() {
			k := c.GetDimension() + "/" + c.GetName()
			sum := cells[k]
			if sum == nil {
				sum = &aggregatorv1.TrafficCell{LatencyHistogram: make([]int64, len(c.GetLatencyHistogram()))}
				cells[k] = sum
			}
			sum.Calls += c.GetCalls()
			sum.Errors += c.GetErrors()
			sum.RateLimited += c.GetRateLimited()
			sum.Refused += c.GetRefused()
			for i, v := range c.GetLatencyHistogram() {
				sum.LatencyHistogram[i] += v
			}
		}
	}
	for k, want := range map[string][4]int64{ // calls, errors, rate limited, refused
		"total/":         {5, 1, 1, 1},
		"backend/eng":    {4, 1, 1, 0},
		"tool/eng_build": {3, 0, 1, 0},
		"tool/eng_fail":  {1, 1, 0, 0},
		"server//mcp":    {4, 1, 1, 1},
		"server/ci":      {1, 0, 0, 0},
	} {
		c := cells[k]
		if got := [4]int64{c.GetCalls(), c.GetErrors(), c.GetRateLimited(), c.GetRefused()}; got != want {
			t.Errorf("%s: %v, want %v", k, got, want)
		}
	}
	if _, ok := cells["tool/eng_nope"]; ok {
		t.Error("a missing tool's name was counted")
	}
	var n int64
	for _, v := range cells["backend/eng"].GetLatencyHistogram() {
		n += v
	}
	if n != 4 {
		t.Errorf("the latency histogram holds %d calls, want 4", n)
	}

	eng.down.Store(true)
	// The event names the state it left in a field of its own, which the
	// console's timeline starts from.
	testkit.Eventually(t, "a health event of eng going unhealthy from up", 5*time.Second, func() bool {
		resp, err := h.operator.GetTraffic(ctx, &aggregatorv1.GetTrafficRequest{})
		if err != nil {
			return false
		}
		for _, e := range resp.GetHealthEvents() {
			if e.GetBackend() == "eng" && e.GetState() == "unhealthy" && e.GetDetail() != "" &&
				(e.GetPreviousState() == "healthy" || e.GetPreviousState() == "degraded") {
				return true
			}
		}
		return false
	})
}
