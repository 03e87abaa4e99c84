package replicas

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// Bounds of the fault test.
const (
	// callTimeout bounds one call of the load; a call that fails must do
	// so well within it (cleanly), not be waited out.
	callTimeout = 15 * time.Second
	// failFast is how soon after the kill a call in flight on the killed
	// process must come back with its error.
	failFast = 5 * time.Second
	// recoverWithin bounds how long after a kill every client must be
	// served again by the survivors.
	recoverWithin = 20 * time.Second
	// sleepCall is how long the load's slow calls take, so some calls are
	// always in flight when a process is killed.
	sleepCall = "300ms"
)

// outcome is one request of the load.
type outcome struct {
	client     string
	what       string
	err        error // nil: answered correctly
	start, end time.Time
}

// load is a few go-sdk clients of both eras calling the healthy backends
// through the load balancer, each one call at a time, without end.
type load struct {
	mu       sync.Mutex
	outcomes []outcome
	// reconnects counts sessions a client opened again after its
	// connection was cut (a Legacy session id stays valid on the other
	// gateway, but go-sdk ends a session whose stream broke).
	reconnects int
}

func (l *load) record(o outcome) {
	l.mu.Lock()
	l.outcomes = append(l.outcomes, o)
	l.mu.Unlock()
}

func (l *load) snapshot() []outcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.outcomes)
}

// loadCall is one call a load client makes, and how its answer is checked.
type loadCall struct {
	tool  string
	args  map[string]any
	check func(*mcp.CallToolResult) error
}

// answeredBy checks that backend answered a demo tool.
func answeredBy(backend string) func(*mcp.CallToolResult) error {
	return func(res *mcp.CallToolResult) error {
		a, err := answer(res)
		if err == nil && a["backend"] != backend {
			err = fmt.Errorf("answered by %v, want %s", a["backend"], backend)
		}
		return err
	}
}

// rawCalls are the load of the MCP endpoint: both backends, and slow calls
// so some are always in flight. optimizerCalls are the load of the
// optimizer endpoint: searches (indexer) and calls through call_tool.
var (
	rawCalls = []loadCall{
		{"alpha_echo", map[string]any{"n": 1}, answeredBy("alpha")},
		{"legacy_echo", map[string]any{"n": 2}, answeredBy("legacy")},
		{"alpha_sleep", map[string]any{"duration": sleepCall}, answeredBy("alpha")},
	}
	optimizerCalls = []loadCall{
		{"find_tool", map[string]any{"tool_description": "add two numbers", "tool_keywords": []string{"add"}}, func(res *mcp.CallToolResult) error {
			if res.IsError || !strings.Contains(text(res), "alpha_add") {
				return fmt.Errorf("find_tool(add two numbers): %s", text(res))
			}
			return nil
		}},
		{"call_tool", map[string]any{"tool_name": "legacy_echo", "parameters": map[string]any{"n": 3}}, answeredBy("legacy")},
	}
)

// run is one client: it makes calls in turn until ctx ends, opening its
// session again only when go-sdk says the connection closed.
func (l *load) run(ctx context.Context, name, url, pin string, calls []loadCall, done *sync.WaitGroup) {
	defer done.Done()
	client := mcp.NewClient(&mcp.Implementation{Name: "switchboard-load-" + name, Version: "0"}, nil)
	open := func() (*mcp.ClientSession, error) {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		return client.Connect(cctx, &mcp.StreamableClientTransport{
			Endpoint: url, HTTPClient: newRecorderClient(), MaxRetries: -1, DisableStandaloneSSE: true,
		}, &mcp.ClientSessionOptions{ProtocolVersion: pin})
	}
	var cs *mcp.ClientSession
	defer func() {
		if cs != nil {
			cs.Close()
		}
	}()
	for i := 0; ctx.Err() == nil; i++ {
		call := calls[i%len(calls)]
		o := outcome{client: name, what: call.tool, start: time.Now()}
		if cs == nil {
			o.what = "connect"
			var err error
			if cs, err = open(); err != nil {
				cs = nil
			}
			o.err, o.end = err, time.Now()
		} else {
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: call.tool, Arguments: call.args})
			cancel()
			o.end = time.Now()
			switch {
			case err != nil:
				o.err = err
				if errors.Is(err, mcp.ErrConnectionClosed) {
					cs.Close()
					cs = nil
					l.mu.Lock()
					l.reconnects++
					l.mu.Unlock()
				}
			default:
				o.err = call.check(res)
			}
		}
		if ctx.Err() != nil {
			return // the test is ending: this call was cut by it
		}
		l.record(o)
	}
}

// newRecorderClient is an HTTP client of its own (its own keep-alive
// connections to the load balancer) that records nothing.
func newRecorderClient() *http.Client { return &http.Client{Transport: newRecorder()} }

// servedSince reports whether every client has had at least n correct
// answers to calls started after since.
func (l *load) servedSince(since time.Time, clients []string, n int) error {
	ok := map[string]int{}
	for _, o := range l.snapshot() {
		if o.err == nil && o.start.After(since) {
			ok[o.client]++
		}
	}
	for _, c := range clients {
		if ok[c] < n {
			return fmt.Errorf("client %s: %d correct answers since then (want %d); answers per client %v", c, ok[c], n, ok)
		}
	}
	return nil
}

// TestReplicaKilledUnderLoad kills (SIGKILL) one gateway, then one
// aggregator, then one indexer, under load from six clients through the
// load balancer (per era: two calling both backends' tools, slow ones
// among them, and one searching and calling through the optimizer view),
// restarting nothing. After each kill:
//
//   - every request that failed was in flight on the killed process when
//     it died (started before the kill), failed within failFast of it, and
//     there were no more of them than requests in flight (one per client);
//     every other request was answered, correctly;
//   - every client is served again by the survivors within recoverWithin
//     (polled, and the time it took is logged);
//   - the other features still work on fresh sessions of both eras:
//     every page of tools/list, calls to both backends, find_tool;
//   - every process but the killed ones is still running, none panicked.
func TestReplicaKilledUnderLoad(t *testing.T) {
	c := startCluster(t)
	l := &load{}
	ctx, stop := context.WithCancel(t.Context())
	var done sync.WaitGroup
	var clients []string
	for _, era := range eras {
		for _, kind := range []struct {
			name, url string
			calls     []loadCall
		}{{"raw-1", c.MCPURL, rawCalls}, {"raw-2", c.MCPURL, rawCalls}, {"optimizer", c.OptimizedURL, optimizerCalls}} {
			name := era.name + "-" + kind.name
			clients = append(clients, name)
			done.Add(1)
			go l.run(ctx, name, kind.url, era.pin, kind.calls, &done)
		}
	}
	defer func() { stop(); done.Wait() }()
	start := time.Now()
	testkit.Eventually(t, "the load is served", pollDeadline, func() error { return l.servedSince(start, clients, 3) })

	var killed []*harness.Proc
	for _, victim := range []struct {
		service string
		proc    *harness.Proc
	}{
		{"gateway", c.Gateways[0]},
		{"aggregator", c.Aggregators[0]},
		{"indexer", c.Indexers[0]},
	} {
		t.Run("kill "+victim.proc.Name, func(t *testing.T) {
			// Kill returns once the process is reaped: requests sent
			// between the signal and then may still have reached it.
			killedAt := time.Now()
			victim.proc.Kill()
			diedAt := time.Now()
			killed = append(killed, victim.proc)
			t.Logf("%s took %v to die", victim.proc.Name, diedAt.Sub(killedAt).Round(time.Microsecond))
			took := testkit.Eventually(t, "every client is served by the survivors", recoverWithin, func() error {
				return l.servedSince(killedAt, clients, 3)
			})
			t.Logf("after killing %s every client was served again within %v", victim.proc.Name, took.Round(time.Millisecond))
			checkLoad(t, l.snapshot(), killedAt, diedAt)
			checkFeatures(t, c, victim.service)
			checkNoCrash(t, c, killed)
		})
	}
	stop()
	done.Wait()
	all := l.snapshot()
	failed := 0
	for _, o := range all {
		if o.err != nil {
			failed++
		}
	}
	t.Logf("load: %d requests, %d failed, %d sessions opened again after their connection closed", len(all), failed, l.reconnects)
}

// checkLoad asserts that the requests that failed since a process was
// sent SIGKILL at killedAt were in flight on it: started before it was
// gone (diedAt, when it was reaped), ended within failFast after that, and
// no more than were in flight then (one per client at most).
func checkLoad(t *testing.T, outcomes []outcome, killedAt, diedAt time.Time) {
	t.Helper()
	inFlight, failed := 0, 0
	for _, o := range outcomes {
		if o.end.Before(killedAt) {
			continue
		}
		if o.start.Before(diedAt) {
			inFlight++
		}
		if o.err == nil {
			continue
		}
		failed++
		switch {
		case !o.start.Before(diedAt):
			t.Errorf("%s %s started %v after the killed process was gone and failed: %v", o.client, o.what, o.start.Sub(diedAt).Round(time.Millisecond), o.err)
		case o.end.Sub(diedAt) > failFast:
			t.Errorf("%s %s in flight at the kill failed only %v after it: %v", o.client, o.what, o.end.Sub(diedAt).Round(time.Millisecond), o.err)
		default:
			t.Logf("in flight at the kill: %s %s (started %v before the process was gone) failed %v after: %v", o.client, o.what,
				diedAt.Sub(o.start).Round(time.Millisecond), o.end.Sub(diedAt).Round(time.Millisecond), o.err)
		}
	}
	if failed > inFlight {
		t.Errorf("%d requests failed, more than the %d in flight while the process died", failed, inFlight)
	}
	t.Logf("%d requests in flight while the process died, %d of them failed", inFlight, failed)
}

// checkFeatures runs the features on fresh sessions of both eras after a
// kill: every page of tools/list, a call to each backend, a prompt, an
// input request answered (against the Legacy backend, whose elicitation an
// aggregator holds), find_tool.
func checkFeatures(t *testing.T, c *cluster, after string) {
	t.Helper()
	for _, era := range eras {
		rec := newRecorder()
		cs := connect(t, c.MCPURL, era.pin, rec, clientOptions{noStream: true, mcp: &mcp.ClientOptions{
			ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
			},
		}})
		fail := func(what string, err error) {
			t.Helper()
			t.Errorf("%s after the %s kill: %s: %v", era.name, after, what, err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
		defer cancel()
		if names, err := toolNames(ctx, cs); err != nil || !slices.Equal(names, allTools) {
			fail("tools/list", fmt.Errorf("%v %v, want %v", names, err, allTools))
		}
		for _, backend := range []string{"alpha", "legacy"} {
			if err := echo(ctx, cs, backend, callTimeout); err != nil {
				fail(backend+"_echo", err)
			}
		}
		if p, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "alpha_greet", Arguments: map[string]string{"who": "bob"}}); err != nil || len(p.Messages) != 1 {
			fail("prompts/get", err)
		}
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "legacy_ask"}); err != nil {
			fail("legacy_ask", err)
		} else if a, err := answer(res); err != nil || a["action"] != "accept" {
			fail("legacy_ask", fmt.Errorf("%v %v", a, err))
		}
		opt := connect(t, c.OptimizedURL, era.pin, newRecorder(), clientOptions{noStream: true})
		res, err := opt.CallTool(ctx, &mcp.CallToolParams{Name: "find_tool",
			Arguments: map[string]any{"tool_description": "add two numbers", "tool_keywords": []string{"add"}}})
		if err != nil || res.IsError || !strings.Contains(text(res), "alpha_add") {
			fail("find_tool", fmt.Errorf("%v %v", err, res))
		}
	}
}

// checkNoCrash fails the test when a process that was not killed stopped,
// or when any process logged a panic.
func checkNoCrash(t *testing.T, c *cluster, killed []*harness.Proc) {
	t.Helper()
	for _, p := range c.procs() {
		if !slices.Contains(killed, p) && !p.Running() {
			t.Errorf("%s is not running", p.Name)
		}
		if log := p.Log(8 << 20); strings.Contains(log, "panic") {
			i := strings.Index(log, "panic")
			t.Errorf("%s logged a panic:\n%s", p.Name, log[max(0, i-200):min(len(log), i+2000)])
		}
	}
}
