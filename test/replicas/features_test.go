package replicas

import (
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// allTools is every tool of the cluster's backends, as advertised.
var allTools = []string{"alpha_add", "alpha_ask", "alpha_chatty", "alpha_echo", "alpha_sleep", "legacy_ask", "legacy_chatty", "legacy_echo"}

// TestFeaturesAcrossReplicas runs every feature through the load balancer,
// in both eras, with one go-sdk client at a time, so consecutive requests
// of a session alternate between the two gateways (each subtest checks
// that both answered, and where a feature spans requests, that its
// requests were answered by different replicas).
func TestFeaturesAcrossReplicas(t *testing.T) {
	c := startCluster(t)
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			t.Run("tools/list pages", func(t *testing.T) { testPagination(t, c, era.pin) })
			t.Run("tools/call", func(t *testing.T) { testCalls(t, c, era.pin) })
			t.Run("resources", func(t *testing.T) { testResources(t, c, era.pin) })
			t.Run("prompts", func(t *testing.T) { testPrompts(t, c, era.pin) })
			t.Run("input requests", func(t *testing.T) { testInputRequests(t, c, era.pin) })
			t.Run("optimizer", func(t *testing.T) { testOptimizer(t, c, era.pin) })
		})
	}
	t.Run("legacy/log level", func(t *testing.T) { testLogLevel(t, c) })
	t.Run("legacy/cancellation", func(t *testing.T) { testCancellation(t, c) })
	t.Run("list_changed", func(t *testing.T) { testListChanged(t, c) })
	t.Run("aggregators share the calls", func(t *testing.T) { testAggregatorsShare(t, c) })
	t.Run("traffic of every replica", func(t *testing.T) { testTrafficOfEveryReplica(t, c) })
}

// testPagination lists the tools three to a page: every page after the
// first is asked for with the cursor another gateway returned.
func testPagination(t *testing.T, c *cluster, pin string) {
	rec := newRecorder()
	cs := connect(t, c.MCPURL, pin, rec, clientOptions{noStream: true})
	mark := rec.mark()
	names, err := toolNames(t.Context(), cs)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names, allTools) {
		t.Fatalf("tools = %v, want %v", names, allTools)
	}
	pages := servedBy(rec.since(mark), "tools/list")
	if want := (len(allTools) + pageSize - 1) / pageSize; len(pages) != want {
		t.Errorf("the listing took %d requests, want %d pages of %d", len(pages), want, pageSize)
	}
	if !alternates(pages) {
		t.Errorf("consecutive pages were answered by %v, want them to alternate between gateways", pages)
	}
}

// alternates reports whether no two consecutive entries of gs are the same
// gateway (and there are at least two).
func alternates(gs []string) bool {
	if len(gs) < 2 {
		return false
	}
	for i := 1; i < len(gs); i++ {
		if gs[i] == "" || gs[i] == gs[i-1] {
			return false
		}
	}
	return true
}

// testCalls calls each backend's echo and alpha_add, twice each, over
// both gateways.
func testCalls(t *testing.T, c *cluster, pin string) {
	rec := newRecorder()
	cs := connect(t, c.MCPURL, pin, rec, clientOptions{noStream: true})
	mark := rec.mark()
	for range 2 {
		for _, backend := range []string{"alpha", "legacy"} {
			if err := echo(t.Context(), cs, backend, pollDeadline); err != nil {
				t.Fatal(err)
			}
		}
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "alpha_add", Arguments: map[string]any{"a": 2, "b": 40}})
		if err != nil {
			t.Fatal(err)
		}
		if a, err := answer(res); err != nil || a["sum"] != 42.0 {
			t.Fatalf("alpha_add(2, 40) = %v %v", a, err)
		}
	}
	calls := servedBy(rec.since(mark), "tools/call")
	if !alternates(calls) {
		t.Errorf("consecutive calls were answered by %v, want them to alternate", calls)
	}
}
