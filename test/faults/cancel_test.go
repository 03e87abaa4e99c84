package faults

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/demobackend"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// TestLegacyCancelledReachesBackend: a Legacy client's
// notifications/cancelled ends the backend call it names, on every path
// the call can take: a backend that speaks both eras, reached in its
// plain Legacy session (no client capabilities) or Modern (the client
// declared elicitation), and a Legacy-only backend, in the shared session
// or a session of the call's own (held for the client's input, or
// streamed at the log level the client set). The backend's own count of
// cancelled sleeps shows the cancellation arrived; the request's response
// stream ends without a result.
func TestLegacyCancelledReachesBackend(t *testing.T) {
	// A backend per case, so that a call one case failed to cancel cannot
	// be counted by the next.
	c := startClusterWith(t, false,
		harness.Backend{Name: "dual", Spec: backendSpec},
		harness.Backend{Name: "dualmodern", Spec: backendSpec},
		harness.Backend{Name: "legacy", Spec: backendSpec, Stateful: true},
		harness.Backend{Name: "legacyheld", Spec: backendSpec, Stateful: true},
		harness.Backend{Name: "legacylog", Spec: backendSpec, Stateful: true})
	g := rawLegacy{url: c.MCPURL}
	cases := []struct {
		name, backend, capabilities string
		// level, if set, is sent with logging/setLevel before the call.
		level string
	}{
		{"dual-era backend, plain call", "dual", `{}`, ""},
		{"dual-era backend, client with elicitation", "dualmodern", `{"elicitation":{}}`, ""},
		{"Legacy-only backend, plain call", "legacy", `{}`, ""},
		{"Legacy-only backend, client with elicitation", "legacyheld", `{"elicitation":{}}`, ""},
		{"Legacy-only backend, client that set a log level", "legacylog", `{}`, "info"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := c.Sleeps(t, tc.backend)
			session, err := g.initialize(t.Context(), tc.capabilities, cleanFailure)
			if err != nil {
				t.Fatal(err)
			}
			if tc.level != "" {
				status, body, err := g.exchange(t.Context(), session, `{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"`+tc.level+`"}}`, cleanFailure)
				if err != nil || status != http.StatusOK {
					t.Fatalf("logging/setLevel: %d %s %v", status, body, err)
				}
			}
			id := 40 + i
			// A plain call's answer is JSON, so even its headers come only at
			// the end: the whole exchange runs beside the test.
			answered := make(chan string, 1)
			go func() {
				resp, err := g.post(t.Context(), session, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s_sleep","arguments":{"duration":"5m"}}}`, id, tc.backend))
				if err != nil {
					answered <- err.Error()
					return
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				answered <- resp.Status + " " + string(b)
			}()
			testkit.Eventually(t, "the backend runs the sleep", pollDeadline, func() error {
				if got := c.Sleeps(t, tc.backend); started(got) != started(before)+1 || got.Running == 0 {
					return fmt.Errorf("sleeps %+v (before %+v)", got, before)
				}
				return nil
			})

			status, body, err := g.exchange(t.Context(), session, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d,"reason":"the user changed their mind"}}`, id), cleanFailure)
			if err != nil || status != http.StatusAccepted {
				t.Fatalf("notifications/cancelled: %d %s %v", status, body, err)
			}
			took := testkit.Eventually(t, "the backend saw the cancellation", cleanFailure, func() error {
				got := c.Sleeps(t, tc.backend)
				if got.Cancelled != before.Cancelled+1 || started(got) != started(before)+1 {
					return fmt.Errorf("sleeps %+v (before %+v)", got, before)
				}
				return nil
			})
			t.Logf("the backend saw the cancellation %v after notifications/cancelled", took.Round(time.Millisecond))
			select {
			case body := <-answered:
				t.Logf("the cancelled request was answered: %.300s", body)
				if strings.Contains(body, `"result"`) {
					t.Errorf("the cancelled request got a result: %.300s", body)
				}
			case <-time.After(cleanFailure):
				t.Error("the cancelled request's response did not end")
			}
		})
	}
	checkNoCrash(t, procs(c), nil)
}

// started counts the sleep calls a backend has begun.
func started(s demobackend.SleepStats) int { return s.Running + s.Cancelled + s.Completed }

// askSpec serves a tool that asks the client for a confirmation.
const askSpec = `
tools:
  - {name: ask, description: Ask before acting., behaviour: ask, text: "Proceed?"}
`

// TestLegacyElicitationOutlivesRequestTimeout: a Legacy request waiting
// for its client's answer to an elicitation is not ended by the request
// timeout (here 1s) while the client keeps its stream open, and the stream
// carries keep-alive comments at the configured interval meanwhile. The
// answer, when it comes, completes the call.
func TestLegacyElicitationOutlivesRequestTimeout(t *testing.T) {
	const (
		requestTimeout = time.Second
		keepAlive      = 100 * time.Millisecond
	)
	c := harness.Start(t, harness.Options{NoIndexer: true, Backends: []harness.Backend{{Name: "alpha", Spec: askSpec}},
		Configure: func(cfg *config.Config) {
			cfg.Logging.Level = "info"
			cfg.Gateway.Timeouts.Request = config.Duration(requestTimeout)
			cfg.Gateway.HTTP.KeepAlive = config.Duration(keepAlive)
		}})
	g := rawLegacy{url: c.MCPURL}
	session, err := g.initialize(t.Context(), `{"elicitation":{}}`, cleanFailure)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := g.post(t.Context(), session, `{"jsonrpc":"2.0","id":61,"method":"tools/call","params":{"name":"alpha_ask","arguments":{}}}`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("tools/call: %s %s %s", resp.Status, ct, b)
	}
	lines := sseLines(resp.Body)
	next := func(what string) sseLine {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the stream ended while waiting for %s", what)
			}
			return l
		case <-time.After(cleanFailure):
			t.Fatalf("nothing on the stream for %v while waiting for %s", cleanFailure, what)
		}
		return sseLine{}
	}

	var ask struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Message string `json:"message"`
		} `json:"params"`
	}
	for l := next("the elicitation"); ; l = next("the elicitation") {
		if l.data == "" {
			continue
		}
		if err := json.Unmarshal([]byte(l.data), &ask); err != nil || ask.Method != "elicitation/create" || ask.ID == nil {
			t.Fatalf("first event %q, want an elicitation/create request", l.data)
		}
		break
	}
	asked := time.Now()
	if ask.Params.Message != "Proceed?" {
		t.Errorf("elicitation message %q", ask.Params.Message)
	}
	// Keep-alives for longer than the request timeout: the request must be
	// waiting still.
	comments := 0
	for time.Since(asked) < 2*requestTimeout || comments < 5 {
		l := next("a keep-alive")
		if l.data != "" {
			t.Fatalf("while the client thinks, the stream carried %q", l.data)
		}
		comments++
	}
	waited := time.Since(asked)
	if perInterval := waited / time.Duration(comments); perInterval > 3*keepAlive {
		t.Errorf("%d keep-alives in %v: one per %v, want about one per %v", comments, waited.Round(time.Millisecond), perInterval.Round(time.Millisecond), keepAlive)
	}
	t.Logf("%d keep-alive comments in %v of waiting (request timeout %v)", comments, waited.Round(time.Millisecond), requestTimeout)

	status, body, err := g.exchange(t.Context(), session, `{"jsonrpc":"2.0","id":`+string(ask.ID)+`,"result":{"action":"accept","content":{}}}`, cleanFailure)
	if err != nil || status != http.StatusAccepted {
		t.Fatalf("the client's answer: %d %s %v", status, body, err)
	}
	for l := next("the result"); ; l = next("the result") {
		if l.data == "" {
			continue
		}
		var final struct {
			ID     json.RawMessage `json:"id"`
			Result struct {
				StructuredContent map[string]any `json:"structuredContent"`
			} `json:"result"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(l.data), &final); err != nil || string(final.ID) != "61" || final.Error != nil {
			t.Fatalf("final event %q, want the call's result", l.data)
		}
		if final.Result.StructuredContent["action"] != "accept" {
			t.Fatalf("result %q, want the accepted confirmation", l.data)
		}
		break
	}
	checkNoCrash(t, procs(c), nil)
}
