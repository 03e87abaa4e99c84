package faults

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// loadCaller calls one backend's echo tool in one era, paced, until
// stopped or maxCalls, and keeps every outcome.
type loadCaller struct {
	era, backend string
	mu           sync.Mutex
	outcomes     []outcome
}

// maxCallsPerCaller bounds the load whatever the machine's speed.
const maxCallsPerCaller = 3000

func (l *loadCaller) run(ctx context.Context, cs *mcp.ClientSession) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for i := 0; i < maxCallsPerCaller; i++ {
		o := call(ctx, cs, l.backend+"_echo", map[string]any{"n": i}, backendTimeout+10*time.Second)
		if ctx.Err() != nil {
			return // the call was cut by the end of the load, not by the fault
		}
		l.mu.Lock()
		l.outcomes = append(l.outcomes, o)
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// count returns how many calls succeeded and failed after since.
func (l *loadCaller) count(since time.Time) (ok, failed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, o := range l.outcomes {
		if o.at.Before(since) {
			continue
		}
		if o.ok {
			ok++
		} else {
			failed++
		}
	}
	return ok, failed
}

func (l *loadCaller) snapshot() []outcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]outcome(nil), l.outcomes...)
}

// TestBackendKilledUnderLoad kills one of two backends while clients of
// both eras call both. The other backend's calls never fail; the dead
// one's fail fast with a message that says the backend is unavailable;
// listings drop its tools once the health probes mark it unhealthy; after
// a restart on the same port it is listed and callable again by itself.
//
// The victim serves both eras in one run and Legacy sessions only in the
// other: then the aggregator's session with it dies with it and must be
// initialized anew after the restart.
func TestBackendKilledUnderLoad(t *testing.T) {
	for _, stateful := range []bool{false, true} {
		name := "modern-backend"
		if stateful {
			name = "legacy-only-backend"
		}
		t.Run(name, func(t *testing.T) { testBackendKilledUnderLoad(t, stateful) })
	}
}

func testBackendKilledUnderLoad(t *testing.T, stateful bool) {
	c := startClusterWith(t, false, harness.Backend{Name: "victim", Spec: backendSpec, Stateful: stateful},
		harness.Backend{Name: "survivor", Spec: backendSpec})
	victim := c.Backends["victim"]
	rt := &recordingTransport{}
	sessions := map[string]*mcp.ClientSession{}
	for _, era := range eras {
		sessions[era.name] = connect(t, c.MCPURL, era.pin, rt)
	}

	loadCtx, stopLoad := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var callers []*loadCaller
	for _, era := range eras {
		for _, backend := range []string{"victim", "survivor"} {
			l := &loadCaller{era: era.name, backend: backend}
			callers = append(callers, l)
			wg.Add(1)
			go func() { defer wg.Done(); l.run(loadCtx, sessions[era.name]) }()
		}
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			stopLoad()
			wg.Wait()
		}
	}
	defer stop()
	begin := time.Now()
	testkit.Eventually(t, "every caller succeeds before the fault", pollDeadline, func() error {
		for _, l := range callers {
			if ok, _ := l.count(begin); ok < 5 {
				return fmt.Errorf("%s/%s: %d successful calls", l.era, l.backend, ok)
			}
		}
		return nil
	})

	// A call that sleeps far longer than the test is in flight at the
	// victim when it dies: it too must fail at once, not at the timeout.
	inflight := make(chan outcome, len(eras))
	for _, era := range eras {
		go func() {
			inflight <- call(t.Context(), sessions[era.name], "victim_sleep", map[string]any{"duration": "5m"}, backendTimeout+10*time.Second)
		}()
	}
	// Each session's echo to the victim is answered after the sleeps were
	// sent, so the sleeps are (all but certainly) at the backend.
	for _, era := range eras {
		if o := call(t.Context(), sessions[era.name], "victim_echo", nil, failFast); !o.ok {
			t.Fatalf("%s: echo before the fault: %s", era.name, o.message)
		}
	}

	victim.Kill()
	killedAt := time.Now()
	t.Logf("killed the victim backend")
	for range eras {
		o := <-inflight
		if o.ok || o.at.Sub(killedAt) > failFast || !strings.Contains(strings.ToLower(o.message), "unavailable") {
			t.Errorf("a call in flight at the killed backend: ok=%v, %v after the kill: %q; want a clear 'unavailable' error within %v", o.ok, o.at.Sub(killedAt), o.message, failFast)
		} else {
			t.Logf("a call in flight at the killed backend failed %v after the kill: %s", o.at.Sub(killedAt).Round(time.Millisecond), o.message)
		}
	}

	// Calls to the dead backend fail fast and say why, in both eras.
	for _, era := range eras {
		o := call(t.Context(), sessions[era.name], "victim_echo", nil, backendTimeout+10*time.Second)
		if o.ok {
			// The kill may not have reached the socket yet; the load below
			// still has to see failures.
			continue
		}
		if !strings.Contains(strings.ToLower(o.message), "unavailable") || o.elapsed > failFast {
			t.Errorf("%s: a call to the dead backend came back after %v with %q; want a clear 'unavailable' error within %v", era.name, o.elapsed, o.message, failFast)
		}
	}

	testkit.Eventually(t, "listings drop the dead backend's tools", pollDeadline, func() error {
		for _, era := range eras {
			names, err := toolNames(t.Context(), sessions[era.name])
			if err != nil {
				return fmt.Errorf("%s: list: %v", era.name, err)
			}
			if hasPrefix(names, "victim_") || !hasPrefix(names, "survivor_") {
				return fmt.Errorf("%s: tools %v", era.name, names)
			}
		}
		return nil
	})
	t.Logf("listings dropped the dead backend %v after the kill", time.Since(killedAt).Round(time.Millisecond))

	// While it is dead and unlisted, a call still fails fast and clearly
	// (no hang until the backend timeout).
	for _, era := range eras {
		o := call(t.Context(), sessions[era.name], "victim_echo", nil, backendTimeout+10*time.Second)
		if o.ok || !strings.Contains(strings.ToLower(o.message), "unavailable") || o.elapsed > failFast {
			t.Errorf("%s: a call to the unhealthy backend: ok=%v after %v, %q; want a clear 'unavailable' error within %v", era.name, o.ok, o.elapsed, o.message, failFast)
		}
	}
	testkit.Eventually(t, "the load sees the dead backend fail in both eras", pollDeadline, func() error {
		for _, l := range callers {
			if _, failed := l.count(killedAt); l.backend == "victim" && failed == 0 {
				return fmt.Errorf("%s: no failed call to the dead backend yet", l.era)
			}
		}
		return nil
	})

	victim.Restart()
	restartedAt := time.Now()
	back := testkit.Eventually(t, "the restarted backend is listed and callable again", pollDeadline, func() error {
		for _, era := range eras {
			names, err := toolNames(t.Context(), sessions[era.name])
			if err != nil {
				return fmt.Errorf("%s: list: %v", era.name, err)
			}
			if !hasPrefix(names, "victim_") {
				return fmt.Errorf("%s: tools %v", era.name, names)
			}
			res, err := sessions[era.name].CallTool(t.Context(), &mcp.CallToolParams{Name: "victim_echo"})
			if err != nil || res.IsError || echoedBy(res) != "victim" {
				return fmt.Errorf("%s: call: %v %+v", era.name, err, res)
			}
		}
		return nil
	})
	t.Logf("the backend came back %v after its restart", back)
	testkit.Eventually(t, "the load reaches the restarted backend in both eras", pollDeadline, func() error {
		for _, l := range callers {
			if ok, _ := l.count(restartedAt); ok < 3 {
				return fmt.Errorf("%s/%s: %d successful calls since the restart", l.era, l.backend, ok)
			}
		}
		return nil
	})
	stop()

	for _, l := range callers {
		outs := l.snapshot()
		var ok, failed int
		for _, o := range outs {
			if o.ok {
				ok++
				continue
			}
			failed++
			switch {
			case l.backend == "survivor":
				t.Errorf("%s: a call to the surviving backend failed after %v: %s", l.era, o.elapsed, o.message)
			case !strings.Contains(strings.ToLower(o.message), "unavailable"):
				t.Errorf("%s: a call to the dead backend failed without saying it is unavailable: %s", l.era, o.message)
			case o.elapsed > failFast:
				t.Errorf("%s: a call to the dead backend took %v to fail (backend timeout %v): %s", l.era, o.elapsed, backendTimeout, o.message)
			}
		}
		t.Logf("%s → %s: %d calls, %d failed", l.era, l.backend, len(outs), failed)
	}
	if errs := rt.serverErrors(); len(errs) > 0 {
		t.Errorf("the gateway answered with 5xx: %v", errs)
	}
	checkNoCrash(t, procs(c), nil)
}
