package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// TestLegacyCancellationAcrossReplicas: principal X runs two slow calls
// (ids 7 and 8) on gateway A and cancels them through gateway B, which runs
// neither. Principal Y's cancellation of id 7 on its own session does
// nothing, and on X's session is refused (404); X's cancellation of 8,
// relayed after Y's, ends 8 alone, so Y's had its turn and left 7 running;
// X's cancellation of 7 then ends it. The backend sees both cancellations
// (its sleeps end early), and the cancelled calls get no result. A flood of
// cancellations through B is refused with 429 past the principal's burst,
// and does not hold back another principal.
func TestLegacyCancellationAcrossReplicas(t *testing.T) {
	keys := map[string]string{"x": "key-of-x-0123456789", "y": "key-of-y-0123456789"}
	c, a, b := startReplicas(t, withAPIKeys(keys))
	x, y := "Bearer "+keys["x"], "Bearer "+keys["y"]
	xSession := rawInitialize(t, a, x)
	ySession := rawInitialize(t, b, y)

	// Each call runs beside the test; its whole answer comes when it ends.
	type answer struct {
		body string
		took time.Duration
	}
	calls := map[int]chan answer{}
	for _, id := range []int{7, 8} {
		calls[id] = make(chan answer, 1)
		go func(id int, done chan<- answer) {
			start := time.Now()
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+a+"/mcp", strings.NewReader(
				fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"alpha_nap","arguments":{"duration":"5m"}}}`, id)))
			if err != nil {
				done <- answer{body: err.Error()}
				return
			}
			setLegacyHeaders(req, x, xSession)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				done <- answer{body: err.Error(), took: time.Since(start)}
				return
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			done <- answer{body: resp.Status + " " + string(body), took: time.Since(start)}
		}(id, calls[id])
	}
	testkit.Eventually(t, "the backend runs both sleeps", replicaWait, func() error {
		if got := c.Sleeps(t, "alpha"); got.Running != 2 {
			return fmt.Errorf("sleeps %+v", got)
		}
		return nil
	})

	cancel := func(auth, session string, id int) (int, string) {
		t.Helper()
		return rawCancel(t, b, auth, session, fmt.Sprintf("%d", id))
	}
	if status, _ := cancel(y, ySession, 7); status != http.StatusAccepted {
		t.Fatalf("Y's cancellation of 7 on its own session: %d, want 202 (it names no request of Y's)", status)
	}
	if status, _ := cancel(y, xSession, 7); status != http.StatusNotFound {
		t.Fatalf("Y's cancellation on X's session: %d, want 404", status)
	}
	if status, _ := cancel(x, xSession, 8); status != http.StatusAccepted {
		t.Fatalf("X's cancellation of 8: %d, want 202", status)
	}
	var ended answer
	select {
	case ended = <-calls[8]:
	case <-time.After(replicaWait):
		t.Fatal("call 8 did not end on its cancellation through B")
	}
	// B relayed Y's cancellation before X's, and A hears them in that
	// order: call 7 still runs.
	select {
	case got := <-calls[7]:
		t.Fatalf("call 7 ended on Y's cancellation: %.300s", got.body)
	default:
	}
	testkit.Eventually(t, "the backend saw call 8's cancellation", replicaWait, func() error {
		if got := c.Sleeps(t, "alpha"); got.Cancelled != 1 || got.Running != 1 {
			return fmt.Errorf("sleeps %+v, want one cancelled and one running", got)
		}
		return nil
	})
	// A applied Y's cancellation, if at all, before X's of 8, which call 8
	// waited for: one applied means Y's cancelled nothing.
	waitForMetric(t, a, `switchboard_gateway_relayed_cancellations_total{outcome="applied"} 1`)

	if status, _ := cancel(x, xSession, 7); status != http.StatusAccepted {
		t.Fatalf("X's cancellation of 7: %d, want 202", status)
	}
	select {
	case got := <-calls[7]:
		for id, got := range map[int]answer{7: got, 8: ended} {
			t.Logf("call %d ended after %v: %.200s", id, got.took.Round(time.Millisecond), got.body)
			if strings.Contains(got.body, `"result"`) || strings.Contains(got.body, `"error"`) || !strings.HasPrefix(got.body, "200 ") {
				t.Errorf("the cancelled call %d was answered %.300s, want a stream without a response", id, got.body)
			}
		}
	case <-time.After(replicaWait):
		t.Fatal("call 7 did not end on X's cancellation through B")
	}
	testkit.Eventually(t, "the backend saw both cancellations", replicaWait, func() error {
		if got := c.Sleeps(t, "alpha"); got.Cancelled != 2 || got.Running != 0 || got.Completed != 0 {
			return fmt.Errorf("sleeps %+v, want two cancelled", got)
		}
		return nil
	})
	waitForMetric(t, a, `switchboard_gateway_relayed_cancellations_total{outcome="applied"} 2`)

	// A flood through B: the rest of X's burst of 20 (it spent 2 above)
	// passes, then 429 with a Retry-After; Y's cancellation is still
	// relayed.
	refused := -1
	for i := range 200 {
		status, retryAfter := cancel(x, xSession, 1000+i)
		if status == http.StatusTooManyRequests {
			if retryAfter == "" {
				t.Fatal("429 without Retry-After")
			}
			refused = i
			break
		}
		if status != http.StatusAccepted {
			t.Fatalf("cancellation %d of the flood: %d", i, status)
		}
	}
	if refused < 18 {
		t.Fatalf("the flood was first refused at cancellation %d, want a refusal after the rest of the burst (18)", refused)
	}
	if status, _ := cancel(y, ySession, 9); status != http.StatusAccepted {
		t.Fatalf("Y's cancellation during X's flood: %d, want 202", status)
	}
}

// TestLegacyStreamedCancellationAcrossReplicas: a Legacy session that set
// a log level (through B) calling a Legacy backend (alpha, pinned to
// 2025-11-25) through A gets its calls streamed, each on a backend session
// of its own, as the relayed log messages show. The session's
// notifications/cancelled ends such a call at the backend (its sleep ends
// early), whether it reaches A, which runs the call, or B, which relays it
// through the indexer; the cancelled call gets no result.
func TestLegacyStreamedCancellationAcrossReplicas(t *testing.T) {
	c, a, b := startReplicas(t, func(cfg *config.Config) {
		for i := range cfg.Aggregator.Backends {
			cfg.Aggregator.Backends[i].Protocol = harness.Legacy
		}
	})
	// No elicitation: the calls are streamed, not held for the client's input.
	session := rawInitializeDeclaring(t, a, "", `{}`)
	if status := rawPost(t, b, "", session, `{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"info"}}`); status != http.StatusOK {
		t.Fatalf("logging/setLevel through B: %d", status)
	}
	// call posts a tools/call through A; its whole answer comes when it ends.
	call := func(id int, tool, arguments string) <-chan string {
		return postLegacyCall(t.Context(), a, session, id, tool, arguments)
	}
	select {
	case body := <-call(2, "alpha_log", `{}`):
		if !strings.Contains(body, `"level":"info"`) || strings.Contains(body, `"level":"debug"`) || !strings.Contains(body, `"result"`) {
			t.Fatalf("alpha_log through A answered %.1000s, want its info and warning messages, then its result", body)
		}
	case <-time.After(replicaWait):
		t.Fatal("alpha_log through A did not end")
	}

	for i, via := range []struct{ name, host string }{{"cancelled through A", a}, {"cancelled through B", b}} {
		t.Run(via.name, func(t *testing.T) {
			before := c.Sleeps(t, "alpha")
			id := 10 + i
			answered := call(id, "alpha_nap", `{"duration":"5m"}`)
			testkit.Eventually(t, "the backend runs the sleep", replicaWait, func() error {
				if got := c.Sleeps(t, "alpha"); got.Running != before.Running+1 {
					return fmt.Errorf("sleeps %+v (before %+v)", got, before)
				}
				return nil
			})
			if status, _ := rawCancel(t, via.host, "", session, fmt.Sprint(id)); status != http.StatusAccepted {
				t.Fatalf("notifications/cancelled: %d, want 202", status)
			}
			select {
			case body := <-answered:
				if strings.Contains(body, `"result"`) || strings.Contains(body, `"error"`) || !strings.HasPrefix(body, "200 ") {
					t.Errorf("the cancelled call was answered %.300s, want a stream without a response", body)
				}
			case <-time.After(replicaWait):
				t.Fatal("the call did not end on its cancellation")
			}
			testkit.Eventually(t, "the backend saw the cancellation", replicaWait, func() error {
				if got := c.Sleeps(t, "alpha"); got.Cancelled != before.Cancelled+1 || got.Running != before.Running || got.Completed != before.Completed {
					return fmt.Errorf("sleeps %+v (before %+v)", got, before)
				}
				return nil
			})
		})
	}
}

// rawCancel posts notifications/cancelled for id on a Legacy session to
// the gateway at host and returns the status and its Retry-After.
func rawCancel(t *testing.T, host, authorization, sessionID, id string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+host+"/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`+id+`,"reason":"changed my mind"}}`))
	if err != nil {
		t.Fatal(err)
	}
	setLegacyHeaders(req, authorization, sessionID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

func setLegacyHeaders(req *http.Request, authorization, sessionID string) {
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", authorization)
	req.Header.Set("Mcp-Session-Id", sessionID)
	req.Header.Set("Mcp-Protocol-Version", harness.Legacy)
}

// TestLegacyDeletedSessionEndsItsCalls: a session's DELETE ends its
// requests in flight on every replica, as the session ends: a call on the
// replica that received the DELETE (its client still waiting) and one on
// the other replica whose client went away (which would otherwise run on,
// since a disconnect is not a cancellation). The backend sees both
// cancelled; a call of another session of the same principal runs on.
func TestLegacyDeletedSessionEndsItsCalls(t *testing.T) {
	c, a, b := startReplicas(t, func(cfg *config.Config) {
		// The sleeps end with the session, not with the backend's timeout.
		for i := range cfg.Aggregator.Backends {
			cfg.Aggregator.Backends[i].Timeout = config.Duration(10 * time.Minute)
		}
	})
	deleted, kept := rawInitialize(t, a, ""), rawInitialize(t, a, "")
	// nap posts a five-minute sleep; its whole answer comes when it ends.
	nap := func(ctx context.Context, host, session string, id int) <-chan string {
		return postLegacyCall(ctx, host, session, id, "alpha_nap", `{"duration":"5m"}`)
	}
	waiting := nap(t.Context(), a, deleted, 1)
	dropCtx, drop := context.WithCancel(t.Context())
	dropped := nap(dropCtx, b, deleted, 2)
	nap(t.Context(), a, kept, 3)
	testkit.Eventually(t, "the backend runs the three sleeps", replicaWait, func() error {
		if got := c.Sleeps(t, "alpha"); got.Running != 3 {
			return fmt.Errorf("sleeps %+v", got)
		}
		return nil
	})
	drop()
	<-dropped

	del, err := http.NewRequestWithContext(t.Context(), http.MethodDelete, "http://"+a+"/mcp", nil)
	if err != nil {
		t.Fatal(err)
	}
	del.Header.Set("Mcp-Session-Id", deleted)
	resp, err := http.DefaultClient.Do(del)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %s", resp.Status)
	}
	select {
	case body := <-waiting:
		if strings.Contains(body, `"result"`) || !strings.Contains(body, "its session was deleted") {
			t.Errorf("the call of the deleted session was answered %.300s, want an error saying its session was deleted", body)
		}
	case <-time.After(replicaWait):
		t.Fatal("the call of the deleted session on the replica that deleted it did not end")
	}
	testkit.Eventually(t, "the backend saw the deleted session's two calls cancelled, the other session's running", replicaWait, func() error {
		if got := c.Sleeps(t, "alpha"); got.Cancelled != 2 || got.Running != 1 {
			return fmt.Errorf("sleeps %+v, want two cancelled and one running", got)
		}
		return nil
	})
	if status, _ := rawCancel(t, a, "", kept, "3"); status != http.StatusAccepted {
		t.Fatalf("cancelling the other session's call: %d", status)
	}
}

// postLegacyCall posts a tools/call of tool with arguments (JSON) in the
// Legacy session through the gateway at host, and returns its whole
// answer (status and body, or the error) once it ends.
func postLegacyCall(ctx context.Context, host, session string, id int, tool, arguments string) <-chan string {
	answered := make(chan string, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+host+"/mcp", strings.NewReader(
			fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s","arguments":%s}}`, id, tool, arguments)))
		if err != nil {
			answered <- err.Error()
			return
		}
		setLegacyHeaders(req, "", session)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- err.Error()
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		answered <- resp.Status + " " + string(body)
	}()
	return answered
}
