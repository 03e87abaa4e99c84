package replicas

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/demobackend"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// notice bounds how long a notification may take to arrive once its cause
// happened (a backend's change travels backend -> aggregator -> gateway).
const notice = 20 * time.Second

// awayFrom makes the next request of cs land on a gateway other than gw:
// round-robin sends it to the gateway after the last one that answered, so
// when that was not gw, one ping moves the turn on. Only one client is
// active while it is used.
func awayFrom(t *testing.T, cs *mcp.ClientSession, rec *recorder, gw string) {
	t.Helper()
	if rec.last() == gw {
		return
	}
	if err := cs.Ping(t.Context(), nil); err != nil {
		t.Fatalf("ping: %v", err)
	}
	if rec.last() != gw {
		t.Fatalf("a ping was answered by %s; cannot steer away from %s", rec.last(), gw)
	}
}

// streamGateway waits for the session's Legacy GET stream and returns the
// gateway holding it.
func streamGateway(t *testing.T, rec *recorder) string {
	t.Helper()
	var gw string
	testkit.Eventually(t, "the Legacy GET stream opens", pollDeadline, func() error {
		gets := servedBy(rec.exchanges(), "GET")
		if len(gets) == 0 || gets[len(gets)-1] == "" {
			return errors.New("no GET answered yet")
		}
		gw = gets[len(gets)-1]
		return nil
	})
	return gw
}

// testResources lists and reads a resource, subscribes to it and gets its
// update. A Legacy session subscribes through the gateway that does not
// hold its GET stream, where the update must arrive; a Modern one listens
// for it (subscriptions/listen) on whichever gateway the listen reached.
func testResources(t *testing.T, c *cluster, pin string) {
	const uri = "alpha://readme"
	updated := make(chan string, 16)
	rec := newRecorder()
	cs := connect(t, c.MCPURL, pin, rec, clientOptions{mcp: &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updated <- r.Params.URI },
	}})
	var uris []string
	for r, err := range cs.Resources(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		uris = append(uris, r.URI)
	}
	if !slices.Equal(uris, []string{uri}) {
		t.Fatalf("resources = %v, want [%s]", uris, uri)
	}
	read, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatal(err)
	}
	if len(read.Contents) != 1 || read.Contents[0].Text != "readme of alpha" {
		t.Fatalf("read %s = %+v", uri, read.Contents)
	}
	var stream string
	if pin == harness.Legacy {
		stream = streamGateway(t, rec)
		awayFrom(t, cs, rec, stream)
	}
	mark := rec.mark()
	if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	if pin == harness.Legacy {
		if got := servedBy(rec.since(mark), "resources/subscribe"); len(got) != 1 || got[0] == stream {
			t.Fatalf("resources/subscribe answered by %v, want the gateway other than the stream's %s", got, stream)
		}
	}
	// The subscription reaches the backend asynchronously (through the
	// aggregator's watch), so the update is announced until it arrives.
	testkit.Eventually(t, "notifications/resources/updated for "+uri, notice, func() error {
		c.backendAdmin(t, "alpha", "/admin/resources/updated", map[string]string{"uri": uri})
		select {
		case got := <-updated:
			if got != uri {
				return fmt.Errorf("update for %q", got)
			}
			return nil
		case <-time.After(500 * time.Millisecond):
			return errors.New("no update yet")
		}
	})
}

// testPrompts gets a prompt and completes its argument, on the two
// gateways in turn.
func testPrompts(t *testing.T, c *cluster, pin string) {
	rec := newRecorder()
	cs := connect(t, c.MCPURL, pin, rec, clientOptions{noStream: true})
	mark := rec.mark()
	prompt, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "alpha_greet", Arguments: map[string]string{"who": "bob"}})
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := prompt.Messages[0].Content.(*mcp.TextContent); !ok || tc.Text != "Greet bob from alpha" {
		t.Fatalf("prompt alpha_greet = %+v", prompt.Messages[0].Content)
	}
	comp, err := cs.Complete(t.Context(), &mcp.CompleteParams{
		Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "alpha_greet"},
		Argument: mcp.CompleteParamsArgument{Name: "who", Value: "al"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := comp.Completion.Values; !slices.Equal(got, []string{"alice", "albert"}) {
		t.Fatalf("completion of alpha_greet who=al = %v, want [alice albert]", got)
	}
	requireBothGateways(t, "prompts/get and completion/complete", rec.since(mark))
}

// testInputRequests calls the ask tools, which ask the user by
// elicitation before answering. A Modern client gets input_required and
// retries with the answer (multi-round-trip; against the Legacy backend
// the aggregator holds the backend's elicitation meanwhile); a Legacy
// client gets elicitation/create on the call's stream and POSTs its
// answer. Either way the answer goes to the other gateway.
func testInputRequests(t *testing.T, c *cluster, pin string) {
	var mu sync.Mutex
	var asked []string
	rec := newRecorder()
	cs := connect(t, c.MCPURL, pin, rec, clientOptions{noStream: true, mcp: &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			asked = append(asked, r.Params.Message)
			mu.Unlock()
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
		},
	}})
	// The answer is the client's next request after the call, so
	// round-robin sends it to the other gateway, unless another request
	// of the client (a cancellation, a stream reopened) slipped between
	// them: then the exchange is made again, up to three times.
	const attempts = 3
	calls := 0
	for _, backend := range []string{"legacy", "alpha"} {
		t.Run(backend, func(t *testing.T) {
			var first, answered string
			for range attempts {
				mark := rec.mark()
				ctx, cancel := context.WithTimeout(t.Context(), notice)
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: backend + "_ask"})
				cancel()
				calls++
				if err != nil {
					t.Fatalf("%s_ask: %v", backend, err)
				}
				if a, err := answer(res); err != nil || a["action"] != "accept" || a["backend"] != backend {
					t.Fatalf("%s_ask = %v %v, want the accepted answer from %s", backend, a, err, backend)
				}
				xs := rec.since(mark)
				tools := servedBy(xs, "tools/call")
				first, answered = "", ""
				if pin == harness.Legacy {
					if answers := servedBy(xs, "response"); len(tools) == 1 && len(answers) == 1 {
						first, answered = tools[0], answers[0]
					}
				} else if len(tools) == 2 {
					first, answered = tools[0], tools[1]
				}
				if first != "" && answered != "" && first != answered {
					return
				}
			}
			t.Errorf("in %d attempts the call and its answer were never answered by different gateways (last: %q and %q)", attempts, first, answered)
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != calls || slices.ContainsFunc(asked, func(m string) bool { return m != "Proceed?" }) {
		t.Errorf("elicitations %q for %d calls, want one per call asking %q", asked, calls, "Proceed?")
	}
}

// testOptimizer finds a tool and calls it through the optimizer view: the
// search runs on an indexer over PostgreSQL, the call reaches the backend.
func testOptimizer(t *testing.T, c *cluster, pin string) {
	rec := newRecorder()
	cs := connect(t, c.OptimizedURL, pin, rec, clientOptions{noStream: true})
	mark := rec.mark()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "find_tool",
		Arguments: map[string]any{"tool_description": "add two numbers", "tool_keywords": []string{"add"}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("find_tool failed: %s", text(res))
	}
	found, _ := res.StructuredContent.(map[string]any)
	hits, _ := found["tools"].([]any)
	if len(hits) == 0 || hits[0].(map[string]any)["name"] != "alpha_add" {
		t.Fatalf("find_tool(add two numbers) = %v, want alpha_add first", found)
	}
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "call_tool",
		Arguments: map[string]any{"tool_name": "alpha_add", "parameters": map[string]any{"a": 1, "b": 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if a, err := answer(res); err != nil || a["sum"] != 3.0 || a["backend"] != "alpha" {
		t.Fatalf("call_tool alpha_add = %v %v", a, err)
	}
	if calls := servedBy(rec.since(mark), "tools/call"); !alternates(calls) {
		t.Errorf("find_tool and call_tool were answered by %v, want different gateways", calls)
	}
}

// testLogLevel sets a Legacy session's log level to info through one
// gateway and calls the log tools (debug, info and warning messages)
// through the other: each call's stream carries the info and warning
// messages, and not the debug one.
func testLogLevel(t *testing.T, c *cluster) {
	logged := make(chan string, 64)
	rec := newRecorder()
	cs := connect(t, c.MCPURL, harness.Legacy, rec, clientOptions{noStream: true, mcp: &mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			logged <- r.Params.Logger + ":" + string(r.Params.Level)
		},
	}})
	mark := rec.mark()
	if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	set := servedBy(rec.since(mark), "logging/setLevel")[0]
	for _, backend := range []string{"alpha", "legacy"} {
		awayFrom(t, cs, rec, set)
		mark := rec.mark()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: backend + "_chatty"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := answer(res); err != nil {
			t.Fatal(err)
		}
		if got := servedBy(rec.since(mark), "tools/call"); len(got) != 1 || got[0] == set {
			t.Fatalf("the call was answered by %v, want the gateway other than %s", got, set)
		}
		// The messages precede the result on the call's stream; the
		// client hands them to the handler on its own goroutine.
		var got []string
		deadline := time.After(5 * time.Second)
	collect:
		for len(got) < 2 {
			select {
			case m := <-logged:
				got = append(got, m)
			case <-deadline:
				break collect
			}
		}
		for len(logged) > 0 {
			got = append(got, <-logged)
		}
		slices.Sort(got)
		if want := []string{"chatty:info", "chatty:warning"}; !slices.Equal(got, want) {
			t.Errorf("%s_chatty after logging/setLevel info on the other gateway: messages %v, want %v", backend, got, want)
		}
	}
}

// testListChanged adds a tool to a running backend and removes it: a
// Legacy session (GET stream) and a Modern one (subscriptions/listen),
// each held by whichever gateway their stream reached, are told and list
// the change through both gateways.
func testListChanged(t *testing.T, c *cluster) {
	type session struct {
		cs       *mcp.ClientSession
		notified chan struct{}
	}
	sessions := map[string]session{}
	for _, era := range eras {
		ch := make(chan struct{}, 16)
		cs := connect(t, c.MCPURL, era.pin, newRecorder(), clientOptions{mcp: &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { ch <- struct{}{} },
		}})
		sessions[era.name] = session{cs, ch}
	}
	await := func(era, what string, ok func([]string) bool) {
		t.Helper()
		deadline := time.After(notice)
		for {
			select {
			case <-sessions[era].notified:
			case <-deadline:
				t.Fatalf("%s: no notifications/tools/list_changed leading to a listing %s within %v", era, what, notice)
			}
			names, err := toolNames(t.Context(), sessions[era].cs)
			if err != nil {
				t.Fatal(err)
			}
			if ok(names) {
				return
			}
		}
	}
	c.admin().AddTool(t, "alpha", demobackend.ToolSpec{Name: "late", Description: "Added while running.",
		Behaviour: demobackend.BehaviourText, Text: "late on {backend}"})
	for era, s := range sessions {
		await(era, "with alpha_late", func(names []string) bool { return slices.Contains(names, "alpha_late") })
		res, err := s.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "alpha_late"})
		if err != nil {
			t.Fatal(err)
		}
		if a, err := answer(res); err != nil || a["text"] != "late on alpha" {
			t.Fatalf("%s: alpha_late = %v %v", era, a, err)
		}
	}
	c.admin().RemoveTool(t, "alpha", "late")
	for era := range sessions {
		await(era, "without alpha_late", func(names []string) bool { return !slices.Contains(names, "alpha_late") })
	}
}

// testCancellation: a Legacy tools/call runs on one gateway, and the
// session's notifications/cancelled for it, sent next, reaches the other
// (round-robin), which relays it through its indexer to every gateway: the
// backend's sleep ends early, and the call gets no result.
func testCancellation(t *testing.T, c *cluster) {
	rec := newRecorder()
	cs := connect(t, c.MCPURL, harness.Legacy, rec, clientOptions{noStream: true})
	client := &http.Client{Transport: rec}
	post := func(ctx context.Context, body string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.MCPURL, strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", cs.ID())
		req.Header.Set("Mcp-Protocol-Version", harness.Legacy)
		return client.Do(req)
	}
	before := c.admin().Sleeps(t, "alpha")
	mark := rec.mark()
	answered := make(chan string, 1)
	go func() {
		resp, err := post(t.Context(), `{"jsonrpc":"2.0","id":"cancel-me","method":"tools/call","params":{"name":"alpha_sleep","arguments":{"duration":"5m"}}}`)
		if err != nil {
			answered <- err.Error()
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		answered <- resp.Status + " " + string(body)
	}()
	testkit.Eventually(t, "the backend runs the sleep", pollDeadline, func() error {
		if got := c.admin().Sleeps(t, "alpha"); got.Running != before.Running+1 {
			return fmt.Errorf("sleeps %+v (before %+v)", got, before)
		}
		return nil
	})
	resp, err := post(t.Context(), `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"cancel-me"}}`)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/cancelled: %s, want 202", resp.Status)
	}
	select {
	case body := <-answered:
		if strings.Contains(body, `"result"`) || strings.Contains(body, `"error"`) {
			t.Errorf("the cancelled call was answered %.300s, want no response", body)
		}
	case <-time.After(notice):
		t.Fatal("the call did not end on its cancellation")
	}
	testkit.Eventually(t, "the backend saw the cancellation", pollDeadline, func() error {
		if got := c.admin().Sleeps(t, "alpha"); got.Cancelled != before.Cancelled+1 || got.Completed != before.Completed {
			return fmt.Errorf("sleeps %+v (before %+v)", got, before)
		}
		return nil
	})
	calls, cancels := servedBy(rec.since(mark), "tools/call"), servedBy(rec.since(mark), "notifications/cancelled")
	if len(calls) != 1 || len(cancels) != 1 || calls[0] == "" || calls[0] == cancels[0] {
		t.Fatalf("the call was answered by %v and the cancellation by %v, want two different gateways", calls, cancels)
	}
}
