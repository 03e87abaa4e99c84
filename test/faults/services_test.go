package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/devstack"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// cleanFailure is how long a call may take to fail once the process under
// it is gone: it must not hang until some distant timeout.
const cleanFailure = 10 * time.Second

// TestAggregatorKilledAndRestarted kills the aggregator while calls of
// both eras are in flight: they fail with an MCP error (no hang, no 5xx),
// as do calls made while it is down. Restarted on the same port, the
// gateway (and the indexer behind find_tool) use it again without being
// restarted, and the Legacy session carries on.
func TestAggregatorKilledAndRestarted(t *testing.T) {
	c := startCluster(t, true, "alpha")
	rt := &recordingTransport{}
	sessions := map[string]*mcp.ClientSession{}
	for _, era := range eras {
		sessions[era.name] = connect(t, c.MCPURL, era.pin, rt)
	}
	optimized := connect(t, strings.TrimSuffix(c.MCPURL, "/mcp")+"/mcp/optimized", harness.Modern, rt)
	testkit.Eventually(t, "find_tool finds alpha_echo before the fault", pollDeadline, func() error { return findsTool(t, optimized, "alpha_echo") })

	// Calls that sleep far longer than the test: they are in flight when
	// the aggregator dies.
	type inflight struct {
		era string
		out outcome
	}
	results := make(chan inflight, len(eras))
	var wg sync.WaitGroup
	for _, era := range eras {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results <- inflight{era.name, call(t.Context(), sessions[era.name], "alpha_sleep", map[string]any{"duration": "5m"}, 2*time.Minute)}
		}()
	}
	// A quick call on each session after the sleeps were sent: once it is
	// answered, the sleeps are (all but certainly) waiting at the backend.
	for _, era := range eras {
		if o := call(t.Context(), sessions[era.name], "alpha_echo", nil, cleanFailure); !o.ok {
			t.Fatalf("%s: echo before the fault: %s", era.name, o.message)
		}
	}

	sentBefore := time.Now()
	c.Aggregator.Kill()
	killedAt := time.Now()
	wg.Wait()
	close(results)
	for r := range results {
		switch {
		case r.out.ok:
			t.Errorf("%s: a call in flight when the aggregator died succeeded", r.era)
		case r.out.at.Before(sentBefore):
			t.Errorf("%s: the sleeping call failed before the aggregator was killed: %s", r.era, r.out.message)
		case r.out.at.Sub(killedAt) > cleanFailure:
			t.Errorf("%s: a call in flight took %v after the kill to fail: %s", r.era, r.out.at.Sub(killedAt), r.out.message)
		case strings.HasPrefix(r.out.message, "isError"):
			t.Errorf("%s: a call in flight failed as a tool result, want an MCP error: %s", r.era, r.out.message)
		default:
			t.Logf("%s: the call in flight failed %v after the kill: %s", r.era, r.out.at.Sub(killedAt).Round(time.Millisecond), r.out.message)
		}
	}
	// While it is down, calls and lists fail with MCP errors, promptly.
	for _, era := range eras {
		o := call(t.Context(), sessions[era.name], "alpha_echo", nil, 2*time.Minute)
		if o.ok || o.elapsed > cleanFailure || strings.HasPrefix(o.message, "isError") {
			t.Errorf("%s: a call with the aggregator down: ok=%v after %v: %q; want an MCP error within %v", era.name, o.ok, o.elapsed, o.message, cleanFailure)
		}
		start := time.Now()
		if _, err := toolNames(t.Context(), sessions[era.name]); err == nil || time.Since(start) > cleanFailure {
			t.Errorf("%s: tools/list with the aggregator down: %v after %v", era.name, err, time.Since(start))
		}
	}

	c.Aggregator.Restart()
	back := testkit.Eventually(t, "calls succeed again on the same sessions", pollDeadline, func() error {
		for _, era := range eras {
			if o := call(t.Context(), sessions[era.name], "alpha_echo", nil, cleanFailure); !o.ok {
				return fmt.Errorf("%s: %s", era.name, o.message)
			}
			names, err := toolNames(t.Context(), sessions[era.name])
			if err != nil || !slices.Contains(names, "alpha_echo") {
				return fmt.Errorf("%s: list: %v %v", era.name, names, err)
			}
		}
		return nil
	})
	t.Logf("the gateway served calls again %v after the aggregator's restart", back.Round(time.Millisecond))
	testkit.Eventually(t, "find_tool works again", pollDeadline, func() error { return findsTool(t, optimized, "alpha_echo") })
	if errs := rt.serverErrors(); len(errs) > 0 {
		t.Errorf("the gateway answered with 5xx: %v", errs)
	}
	checkNoCrash(t, procs(c), nil)
}

// TestPostgresStopped stops PostgreSQL: a find_tool the indexer can answer
// from memory (a scope it has read, words it has stemmed) still succeeds,
// one that needs the database (new words) answers with an isError result
// that says search failed, while lists, calls, call_tool and Legacy
// sessions (old and new) keep working. With PostgreSQL back, find_tool
// recovers without any restart.
func TestPostgresStopped(t *testing.T) {
	c := startCluster(t, true, "alpha")
	rt := &recordingTransport{}
	optimizedURL := strings.TrimSuffix(c.MCPURL, "/mcp") + "/mcp/optimized"
	raw := map[string]*mcp.ClientSession{}
	optimized := map[string]*mcp.ClientSession{}
	for _, era := range eras {
		raw[era.name] = connect(t, c.MCPURL, era.pin, rt)
		optimized[era.name] = connect(t, optimizedURL, era.pin, rt)
	}
	for _, era := range eras {
		testkit.Eventually(t, era.name+": find_tool finds alpha_echo before the fault", pollDeadline, func() error { return findsTool(t, optimized[era.name], "alpha_echo") })
	}

	stopCtx, cancel := context.WithTimeout(t.Context(), pollDeadline)
	defer cancel()
	if err := c.PG.StopServer(stopCtx); err != nil {
		t.Fatal(err)
	}
	t.Logf("PostgreSQL stopped")

	for _, era := range eras {
		if err := findsTool(t, optimized[era.name], "alpha_echo"); err != nil {
			t.Errorf("%s: find_tool answered before, from the indexer's memory, with PostgreSQL down: %v", era.name, err)
		}
		start := time.Now()
		res, err := findTool(t.Context(), optimized[era.name], "replay the payload verbatim "+era.name)
		elapsed := time.Since(start)
		switch {
		case err != nil:
			t.Errorf("%s: find_tool with PostgreSQL down: an MCP error %v; want an isError result", era.name, err)
		case !res.IsError:
			t.Errorf("%s: find_tool with PostgreSQL down succeeded: %s", era.name, resultText(res))
		case elapsed > cleanFailure:
			t.Errorf("%s: find_tool took %v to fail", era.name, elapsed)
		case !strings.Contains(resultText(res), "search"):
			t.Errorf("%s: find_tool's error does not say that search failed: %q", era.name, resultText(res))
		default:
			t.Logf("%s: find_tool with PostgreSQL down (%v): %s", era.name, elapsed.Round(time.Millisecond), resultText(res))
		}
		// Everything else works: lists and calls on both views, call_tool,
		// and a new Legacy session besides the open one.
		checkServing(t, era.name+" raw", raw[era.name])
		names, err := toolNames(t.Context(), optimized[era.name])
		if slices.Sort(names); err != nil || !slices.Equal(names, []string{"call_tool", "find_tool"}) {
			t.Errorf("%s: optimizer tools/list with PostgreSQL down: %v %v", era.name, names, err)
		}
		res, err = optimized[era.name].CallTool(t.Context(), &mcp.CallToolParams{Name: "call_tool",
			Arguments: map[string]any{"tool_name": "alpha_echo", "parameters": map[string]any{"x": 1}}})
		if err != nil || res.IsError || echoedBy(res) != "alpha" {
			t.Errorf("%s: call_tool with PostgreSQL down: %v %+v", era.name, err, res)
		}
	}
	checkServing(t, "new legacy session", connect(t, c.MCPURL, harness.Legacy, rt))

	startCtx, cancel2 := context.WithTimeout(t.Context(), pollDeadline)
	defer cancel2()
	if err := c.PG.StartServer(startCtx); err != nil {
		t.Fatal(err)
	}
	for _, era := range eras {
		back := testkit.Eventually(t, era.name+": find_tool recovers", pollDeadline, func() error { return findsTool(t, optimized[era.name], "alpha_echo") })
		t.Logf("%s: find_tool recovered %v after PostgreSQL started", era.name, back.Round(time.Millisecond))
	}
	if errs := rt.serverErrors(); len(errs) > 0 {
		t.Errorf("the gateway answered with 5xx: %v", errs)
	}
	checkNoCrash(t, procs(c), nil)
}

// TestGatewayKilled runs two gateways that share a session key. A Legacy
// session initialized on one carries on (list, call) on the other after
// the first is killed: the session id alone is enough.
func TestGatewayKilled(t *testing.T) {
	c := startCluster(t, true, "alpha")
	second := startSecondGateway(t, c)
	secondAddr := strings.TrimPrefix(strings.TrimSuffix(second.url, "/mcp"), "http://")
	firstAddr := c.Config.Gateway.Listen

	rt := &recordingTransport{}
	rt.target.Store(&secondAddr)
	cs := connect(t, c.MCPURL, harness.Legacy, rt)
	if cs.ID() == "" {
		t.Fatal("the Legacy session has no id")
	}
	checkServing(t, "on the second gateway", cs)

	second.proc.Kill()
	rt.target.Store(&firstAddr)
	checkServing(t, "on the first gateway after the second died", cs)
	if errs := rt.serverErrors(); len(errs) > 0 {
		t.Errorf("a gateway answered with 5xx: %v", errs)
	}
	checkNoCrash(t, procs(c, second.proc), second.proc)
}

type gatewayProc struct {
	proc *harness.Proc
	url  string
}

// startSecondGateway starts another gateway process with c's configuration
// on its own port: the same aggregator, indexer and session key.
func startSecondGateway(t *testing.T, c *harness.Cluster) gatewayProc {
	t.Helper()
	cfg := *c.Config
	cfg.Gateway.Listen = harness.FreeAddr(t)
	path := harness.WriteConfig(t, t.TempDir(), &cfg)
	proc := harness.StartProc(t, "gateway-2", devstack.GatewayBin, []string{"--config", path}, nil,
		devstack.HTTPOK("http://"+cfg.Gateway.Listen+"/readyz"))
	return gatewayProc{proc: proc, url: "http://" + cfg.Gateway.Listen + "/mcp"}
}

// checkServing lists the tools of cs and calls alpha_echo through it.
func checkServing(t *testing.T, what string, cs *mcp.ClientSession) {
	t.Helper()
	names, err := toolNames(t.Context(), cs)
	if err != nil || !slices.Contains(names, "alpha_echo") {
		t.Errorf("%s: tools/list: %v %v", what, names, err)
	}
	o := call(t.Context(), cs, "alpha_echo", map[string]any{"from": what}, cleanFailure)
	if !o.ok {
		t.Errorf("%s: tools/call: %s", what, o.message)
	}
}

func findTool(ctx context.Context, cs *mcp.ClientSession, query string) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*cleanFailure)
	defer cancel()
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: "find_tool", Arguments: map[string]any{"tool_description": query}})
}

// findsTool returns nil when find_tool succeeds and finds want.
func findsTool(t *testing.T, cs *mcp.ClientSession, want string) error {
	res, err := findTool(t.Context(), cs, "echo the arguments back")
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("isError: %s", resultText(res))
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var found struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(raw, &found); err != nil {
		return err
	}
	for _, tool := range found.Tools {
		if tool.Name == want {
			return nil
		}
	}
	return fmt.Errorf("find_tool did not find %s: %s", want, raw)
}

// TestIndexerKilled kills the indexer: find_tool answers with a clean
// isError result while lists, calls, call_tool and Legacy sessions (old
// and new; the indexer also records session revocations) keep working.
// Restarted on the same port, it serves find_tool again without a gateway
// restart.
func TestIndexerKilled(t *testing.T) {
	c := startCluster(t, true, "alpha")
	rt := &recordingTransport{}
	optimizedURL := strings.TrimSuffix(c.MCPURL, "/mcp") + "/mcp/optimized"
	raw := map[string]*mcp.ClientSession{}
	optimized := map[string]*mcp.ClientSession{}
	for _, era := range eras {
		raw[era.name] = connect(t, c.MCPURL, era.pin, rt)
		optimized[era.name] = connect(t, optimizedURL, era.pin, rt)
		testkit.Eventually(t, era.name+": find_tool finds alpha_echo before the fault", pollDeadline, func() error { return findsTool(t, optimized[era.name], "alpha_echo") })
	}

	c.Indexer.Kill()
	for _, era := range eras {
		start := time.Now()
		res, err := findTool(t.Context(), optimized[era.name], "echo the arguments back")
		switch elapsed := time.Since(start); {
		case err != nil:
			t.Errorf("%s: find_tool with the indexer down: an MCP error %v; want an isError result", era.name, err)
		case !res.IsError || !strings.Contains(resultText(res), "search"):
			t.Errorf("%s: find_tool with the indexer down: isError=%v %q; want an error result saying search failed", era.name, res.IsError, resultText(res))
		case elapsed > cleanFailure:
			t.Errorf("%s: find_tool took %v to fail", era.name, elapsed)
		}
		checkServing(t, era.name+" raw, indexer down", raw[era.name])
		res, err = optimized[era.name].CallTool(t.Context(), &mcp.CallToolParams{Name: "call_tool",
			Arguments: map[string]any{"tool_name": "alpha_echo", "parameters": map[string]any{}}})
		if err != nil || res.IsError || echoedBy(res) != "alpha" {
			t.Errorf("%s: call_tool with the indexer down: %v %+v", era.name, err, res)
		}
	}
	checkServing(t, "new legacy session, indexer down", connect(t, c.MCPURL, harness.Legacy, rt))

	c.Indexer.Restart()
	for _, era := range eras {
		back := testkit.Eventually(t, era.name+": find_tool recovers", pollDeadline, func() error { return findsTool(t, optimized[era.name], "alpha_echo") })
		t.Logf("%s: find_tool recovered %v after the indexer's restart", era.name, back.Round(time.Millisecond))
	}
	if errs := rt.serverErrors(); len(errs) > 0 {
		t.Errorf("the gateway answered with 5xx: %v", errs)
	}
	checkNoCrash(t, procs(c), nil)
}

// longOutage is how long the aggregator stays down in
// TestAggregatorLongOutage: long enough for a client's reconnect back-off
// to have grown well past the recovery bound.
const longOutage = 30 * time.Second

// recoveryBound is how soon after a restarted service is ready again the
// services that use it must serve through it again.
const recoveryBound = 5 * time.Second

// TestAggregatorLongOutage keeps the aggregator down for a while, with
// clients calling all along (each call fails cleanly). Once it is back,
// the gateway and the indexer (behind find_tool) must use it again within
// a few seconds, not after whatever their reconnect back-off has grown to.
func TestAggregatorLongOutage(t *testing.T) {
	c := startCluster(t, true, "alpha")
	rt := &recordingTransport{}
	cs := connect(t, c.MCPURL, harness.Legacy, rt)
	optimized := connect(t, strings.TrimSuffix(c.MCPURL, "/mcp")+"/mcp/optimized", harness.Modern, rt)
	testkit.Eventually(t, "find_tool finds alpha_echo before the fault", pollDeadline, func() error { return findsTool(t, optimized, "alpha_echo") })

	c.Aggregator.Kill()
	down := time.Now()
	// The indexer serves a principal's scope it validated moments ago
	// until it sees its catalog watch break (milliseconds): from then on
	// find_tool must fail, as calls do at once.
	testkit.Eventually(t, "the indexer to notice the aggregator is gone", pollDeadline, func() error {
		if res, err := findTool(t.Context(), optimized, "echo"); err == nil && !res.IsError {
			return errors.New("find_tool still served")
		}
		return nil
	})
	tick := time.NewTicker(time.Second)
	for time.Since(down) < longOutage {
		if o := call(t.Context(), cs, "alpha_echo", nil, cleanFailure); o.ok || o.elapsed > cleanFailure || strings.HasPrefix(o.message, "isError") {
			t.Errorf("a call with the aggregator down: ok=%v after %v: %q; want an MCP error within %v", o.ok, o.elapsed, o.message, cleanFailure)
		}
		if res, err := findTool(t.Context(), optimized, "echo"); err != nil || !res.IsError {
			t.Errorf("find_tool with the aggregator down: %v %+v; want an isError result", err, res)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-tick.C:
		}
	}
	tick.Stop()

	c.Aggregator.Restart()
	back := testkit.Eventually(t, "the gateway calls through the restarted aggregator", pollDeadline, func() error {
		if o := call(t.Context(), cs, "alpha_echo", nil, cleanFailure); !o.ok {
			return fmt.Errorf("%s", o.message)
		}
		return nil
	})
	searchBack := testkit.Eventually(t, "find_tool works through the restarted aggregator", pollDeadline, func() error { return findsTool(t, optimized, "alpha_echo") })
	t.Logf("after a %v outage: calls again %v, find_tool %v after the aggregator was ready", longOutage, back.Round(time.Millisecond), (back + searchBack).Round(time.Millisecond))
	if back > recoveryBound {
		t.Errorf("the gateway took %v after the aggregator was ready again to call through it (bound %v): its gRPC reconnect back-off is too long", back.Round(time.Millisecond), recoveryBound)
	}
	if back+searchBack > recoveryBound {
		t.Errorf("find_tool took %v after the aggregator was ready again to work (bound %v): the indexer's gRPC reconnect back-off is too long", (back + searchBack).Round(time.Millisecond), recoveryBound)
	}
	if errs := rt.serverErrors(); len(errs) > 0 {
		t.Errorf("the gateway answered with 5xx: %v", errs)
	}
	checkNoCrash(t, procs(c), nil)
}
