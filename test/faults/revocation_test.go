package faults

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// answerBound is how quickly a Legacy request must be answered while the
// indexer is stopped: the revocation check is local, so it must not wait.
const answerBound = time.Second

// TestIndexerStoppedLegacyKeepsAnswering stops the indexer (SIGSTOP: its
// connections stay open and nothing answers, the worst case for a
// caller without a deadline) under two gateways that share a session key.
// Legacy requests on an existing session, a new session, a DELETE and the
// deleted session's refusal all answer within a second on the gateway
// that served them. The deletion is effective there at once; once the
// indexer runs again it reaches the other gateway too (fail open for
// other replicas while the indexer is stopped, as docs/operations.md
// says).
func TestIndexerStoppedLegacyKeepsAnswering(t *testing.T) {
	c := startCluster(t, true, "alpha")
	second := startSecondGateway(t, c)
	one := rawLegacy{url: c.MCPURL}
	two := rawLegacy{url: second.url}
	for _, url := range []string{c.MCPURL, second.url} {
		testkit.Eventually(t, "the revocation watch is up on "+url, pollDeadline, func() error { return watchUp(t.Context(), url) })
	}
	rt := &recordingTransport{}
	cs := connect(t, c.MCPURL, harness.Legacy, rt)
	doomed, err := one.initialize(t.Context(), `{}`, cleanFailure)
	if err != nil {
		t.Fatal(err)
	}
	// The doomed session works on both gateways before the fault.
	for _, g := range []rawLegacy{one, two} {
		if status, body, err := g.exchange(t.Context(), doomed, listTools, cleanFailure); err != nil || status != http.StatusOK {
			t.Fatalf("tools/list on %s before the fault: %d %s %v", g.url, status, body, err)
		}
	}

	pid := c.Indexer.Pid()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Errorf("SIGCONT the indexer: %v", err)
			}
		}
	}
	t.Cleanup(resume)

	timed := func(what string, f func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), cleanFailure)
		defer cancel()
		start := time.Now()
		err := f(ctx)
		elapsed := time.Since(start)
		switch {
		case err != nil:
			t.Errorf("%s with the indexer stopped: %v (after %v)", what, err, elapsed.Round(time.Millisecond))
		case elapsed > answerBound:
			t.Errorf("%s with the indexer stopped took %v, want at most %v", what, elapsed.Round(time.Millisecond), answerBound)
		default:
			t.Logf("%s with the indexer stopped: %v", what, elapsed.Round(time.Millisecond))
		}
	}
	timed("tools/list on a go-sdk session", func(ctx context.Context) error {
		_, err := cs.ListTools(ctx, &mcp.ListToolsParams{})
		return err
	})
	timed("tools/call on a go-sdk session", func(ctx context.Context) error {
		if o := call(ctx, cs, "alpha_echo", nil, answerBound); !o.ok {
			return fmt.Errorf("%s", o.message)
		}
		return nil
	})
	timed("initialize", func(ctx context.Context) error {
		_, err := one.initialize(ctx, `{}`, cleanFailure)
		return err
	})
	timed("DELETE", func(ctx context.Context) error {
		status, err := one.delete(ctx, doomed, cleanFailure)
		if err == nil && status != http.StatusNoContent {
			err = fmt.Errorf("status %d, want 204", status)
		}
		return err
	})
	timed("a request on the deleted session", func(ctx context.Context) error {
		status, body, err := one.exchange(ctx, doomed, listTools, cleanFailure)
		if err == nil && status != http.StatusNotFound {
			err = fmt.Errorf("status %d (%s), want 404: a deleted session was served", status, body)
		}
		return err
	})
	// Fail open for the other replica while the indexer is stopped: it has
	// not heard of the deletion and still serves the session, promptly.
	timed("the deleted session on the other gateway", func(ctx context.Context) error {
		status, body, err := two.exchange(ctx, doomed, listTools, cleanFailure)
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("status %d (%s), want 200 (the other gateway cannot know yet)", status, body)
		}
		return err
	})

	resume()
	// The deletion is recorded in the shared store once the indexer runs
	// again, and reaches the other gateway by its watch.
	took := testkit.Eventually(t, "the other gateway refuses the deleted session", pollDeadline, func() error {
		status, body, err := two.exchange(t.Context(), doomed, listTools, cleanFailure)
		if err != nil {
			return err
		}
		if status != http.StatusNotFound {
			return fmt.Errorf("status %d (%s), want 404", status, body)
		}
		return nil
	})
	t.Logf("the other gateway refused the deleted session %v after the indexer resumed", took.Round(time.Millisecond))
	checkServing(t, "after the indexer resumed", cs)
	if errs := rt.serverErrors(); len(errs) > 0 {
		t.Errorf("the gateway answered with 5xx: %v", errs)
	}
	checkNoCrash(t, procs(c, second.proc), nil)
}

const listTools = `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`

// watchUp reports whether the gateway at mcpURL has its revocation watch
// up (its switchboard_gateway_revocation_watch_up metric).
func watchUp(ctx context.Context, mcpURL string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(mcpURL, "/mcp")+"/metrics", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if !strings.Contains(string(body), "\nswitchboard_gateway_revocation_watch_up 1") {
		return fmt.Errorf("revocation watch not up")
	}
	return nil
}
