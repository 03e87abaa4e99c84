package backend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Held calls are bounded per backend: past the bound a call that asks for
// input is cancelled and refused instead of held.
// legacyToolServer serves one tool, name, run by handler, as a 2025-11-25
// go-sdk server does, for the test's length; it returns its URL.
func legacyToolServer(t *testing.T, name string, handler mcp.ToolHandler) string {
	srv := httptest.NewServer(legacyToolHandler(name, handler))
	t.Cleanup(srv.Close)
	return srv.URL
}

// legacyToolHandler is legacyToolServer's handler, for a test to put
// something in front of.
func legacyToolHandler(name string, handler mcp.ToolHandler) http.Handler {
	server := mcp.NewServer(&mcp.Implementation{Name: "legacy", Version: "1"}, nil)
	server.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}}, handler)
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
}

func TestHeldCallsAreBounded(t *testing.T) {
	cancelled := make(chan struct{}, 2)
	url := legacyToolServer(t, "confirm", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		_, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "sure?", RequestedSchema: map[string]any{"type": "object"}})
		if ctx.Err() != nil {
			cancelled <- struct{}{}
		}
		return nil, err
	})
	c := newTestClient(Config{Name: "legacy", URL: url, Protocol: ProtocolLegacy})
	defer c.Close()
	c.maxHeld = 1
	caps := &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}}
	ctx := context.Background()
	res, err := c.CallToolAsking(ctx, &mcp.CallToolParams{Name: "confirm"}, caps, "alice", Notify{})
	if err != nil || len(res.InputRequests) != 1 || c.heldCalls() != 1 {
		t.Fatalf("first call: %v %v, %d held", res, err, c.heldCalls())
	}
	if _, err := c.CallToolAsking(ctx, &mcp.CallToolParams{Name: "confirm"}, caps, "alice", Notify{}); !errors.Is(err, ErrTooManyHeld) {
		t.Fatalf("second call: %v", err)
	}
	waitCancelled(t, cancelled, "the refused call")
	if c.heldCalls() != 1 {
		t.Fatalf("%d held", c.heldCalls())
	}
	c.Close()
	waitCancelled(t, cancelled, "the held call, at Close")
	if c.heldCalls() != 0 {
		t.Fatalf("%d held after Close", c.heldCalls())
	}
}

func waitCancelled(t *testing.T, cancelled <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s was not cancelled at the backend", what)
	}
}

// A held call's requestState answers its own round once: replayed after
// the call asked again, it does not answer the new question.
func TestHeldStateAnswersItsRoundOnce(t *testing.T) {
	url := legacyToolServer(t, "twice", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		for range 2 {
			if _, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "sure?", RequestedSchema: map[string]any{"type": "object"}}); err != nil {
				return nil, err
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
	})
	c := newTestClient(Config{Name: "legacy", URL: url, Protocol: ProtocolLegacy})
	defer c.Close()
	caps := &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}}
	ctx := context.Background()
	answer := func(res *mcp.CallToolResult) map[string]json.RawMessage {
		out := map[string]json.RawMessage{}
		for key := range res.InputRequests {
			out[key] = json.RawMessage(`{"action":"accept","content":{}}`)
		}
		return out
	}
	first, err := c.CallToolAsking(ctx, &mcp.CallToolParams{Name: "twice"}, caps, "alice", Notify{})
	if err != nil || len(first.InputRequests) != 1 {
		t.Fatalf("first round: %v %v", first, err)
	}
	second, err := c.ResumeHeld(ctx, first.RequestState, "alice", answer(first), Notify{})
	if err != nil || len(second.InputRequests) != 1 || second.RequestState == first.RequestState {
		t.Fatalf("second round: %+v %v", second, err)
	}
	if _, err := c.ResumeHeld(ctx, first.RequestState, "alice", answer(first), Notify{}); !errors.Is(err, ErrHeldCallGone) {
		t.Fatalf("the first round's state replayed for the second question: %v", err)
	}
	if _, err := c.ResumeHeld(ctx, second.RequestState, "bob", answer(second), Notify{}); !errors.Is(err, ErrHeldCallGone) {
		t.Fatalf("another caller's retry: %v", err)
	}
	done, err := c.ResumeHeld(ctx, second.RequestState, "alice", answer(second), Notify{})
	if err != nil || len(done.Content) != 1 {
		t.Fatalf("last round: %+v %v", done, err)
	}
	if _, err := c.ResumeHeld(ctx, second.RequestState, "alice", answer(second), Notify{}); !errors.Is(err, ErrHeldCallGone) {
		t.Fatalf("a replay after the call ended: %v", err)
	}
}

func TestParseHeldState(t *testing.T) {
	for state, want := range map[string][4]string{
		"switchboard-held:ab12.1":                {"ab12", "1", "", "ok"},
		"switchboard-held:ab12.3@10.0.0.7:9090":  {"ab12", "3", "10.0.0.7:9090", "ok"},
		"switchboard-held:ab12.2@[fd00::1]:9090": {"ab12", "2", "[fd00::1]:9090", "ok"},
		"switchboard-held:ab12":                  {"", "", "", ""},
		"switchboard-held:.1":                    {"", "", "", ""},
		"switchboard-held:ab12.":                 {"", "", "", ""},
		"other:ab12.1":                           {"", "", "", ""},
	} {
		id, round, owner, ok := ParseHeldState(state)
		got := [4]string{id, round, owner, ""}
		if ok {
			got[3] = "ok"
		}
		if got != want {
			t.Errorf("ParseHeldState(%q) = %v, want %v", state, got, want)
		}
	}
}

// Each principal has a share of a backend's held calls: past it, that
// principal's next call that asks for input is cancelled and refused,
// while another principal's is still held; a share freed (the held call
// answered) can be used again.
func TestHeldCallsShareIsPerPrincipal(t *testing.T) {
	cancelled := make(chan struct{}, 4)
	url := legacyToolServer(t, "confirm", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		_, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "sure?", RequestedSchema: map[string]any{"type": "object"}})
		if ctx.Err() != nil {
			cancelled <- struct{}{}
		}
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
	})
	c := newTestClient(Config{Name: "legacy", URL: url, Protocol: ProtocolLegacy, HeldPerPrincipal: 2})
	defer c.Close()
	caps := &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}}
	ctx := context.Background()
	ask := func(owner string) (*mcp.CallToolResult, error) {
		return c.CallToolAsking(ctx, &mcp.CallToolParams{Name: "confirm"}, caps, owner, Notify{})
	}
	var held []*mcp.CallToolResult
	for i := range 2 {
		res, err := ask("mallory\x00confirm")
		if err != nil || len(res.InputRequests) != 1 {
			t.Fatalf("mallory's call %d within the share: %v %v", i, res, err)
		}
		held = append(held, res)
	}
	if _, err := ask("mallory\x00confirm"); !errors.Is(err, ErrTooManyHeld) {
		t.Fatalf("mallory's call past the share: %v", err)
	}
	waitCancelled(t, cancelled, "the call past mallory's share")
	if res, err := ask("alice\x00confirm"); err != nil || len(res.InputRequests) != 1 {
		t.Fatalf("alice's call while mallory's share is taken: %v %v", res, err)
	}
	// Answering one of mallory's held calls frees a place of the share.
	first := held[0]
	var key string
	for k := range first.InputRequests {
		key = k
	}
	done, err := c.ResumeHeld(ctx, first.RequestState, "mallory\x00confirm", map[string]json.RawMessage{key: json.RawMessage(`{"action":"accept","content":{}}`)}, Notify{})
	if err != nil || done.IsError {
		t.Fatalf("answering mallory's first call: %+v %v", done, err)
	}
	if res, err := ask("mallory\x00confirm"); err != nil || len(res.InputRequests) != 1 {
		t.Fatalf("mallory's call once a place was freed: %v %v", res, err)
	}
}

// A retry that does not answer the held call's question (nothing under
// its key, or not an answer of its kind) gets the question again, in a
// round of its own, and the call stays held: the backend's call once
// failed on the client's slip, and the client had to start over.
func TestHeldQuestionAskedAgainUntilAnswered(t *testing.T) {
	url := legacyToolServer(t, "confirm", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "sure?", RequestedSchema: map[string]any{"type": "object"}})
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Action}}}, nil
	})
	c := newTestClient(Config{Name: "legacy", URL: url, Protocol: ProtocolLegacy})
	defer c.Close()
	caps := &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}}
	ctx := context.Background()
	res, err := c.CallToolAsking(ctx, &mcp.CallToolParams{Name: "confirm"}, caps, "alice", Notify{})
	if err != nil || len(res.InputRequests) != 1 {
		t.Fatalf("first round: %v %v", res, err)
	}
	for _, wrong := range []func(key string) map[string]json.RawMessage{
		func(string) map[string]json.RawMessage {
			return map[string]json.RawMessage{"other": json.RawMessage(`{"action":"accept"}`)}
		},
		func(key string) map[string]json.RawMessage {
			return map[string]json.RawMessage{key: json.RawMessage(`"garbage"`)}
		},
		func(key string) map[string]json.RawMessage {
			return map[string]json.RawMessage{key: json.RawMessage(`{"content":{}}`)}
		},
	} {
		var key string
		for k := range res.InputRequests {
			key = k
		}
		again, err := c.ResumeHeld(ctx, res.RequestState, "alice", wrong(key), Notify{})
		if err != nil || len(again.InputRequests) != 1 || again.RequestState == res.RequestState {
			t.Fatalf("a retry answering nothing (%v): %+v %v, want the question again", wrong(key), again, err)
		}
		if _, err := c.ResumeHeld(ctx, res.RequestState, "alice", wrong(key), Notify{}); !errors.Is(err, ErrHeldCallGone) {
			t.Fatalf("the round asked again answered by its old state: %v", err)
		}
		res = again
	}
	var key string
	for k := range res.InputRequests {
		key = k
	}
	done, err := c.ResumeHeld(ctx, res.RequestState, "alice", map[string]json.RawMessage{key: json.RawMessage(`{"action":"accept","content":{}}`)}, Notify{})
	if err != nil || len(done.Content) != 1 || done.Content[0].(*mcp.TextContent).Text != "accept" {
		t.Fatalf("the answer at last: %+v %v", done, err)
	}
	// A client that never answers does not hold the call for good: past
	// three questions asked again, the call ends.
	res, err = c.CallToolAsking(ctx, &mcp.CallToolParams{Name: "confirm"}, caps, "alice", Notify{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxReasks + 1 {
		next, err := c.ResumeHeld(ctx, res.RequestState, "alice", nil, Notify{})
		if i < maxReasks {
			if err != nil || len(next.InputRequests) != 1 {
				t.Fatalf("unanswered retry %d: %+v %v, want the question again", i+1, next, err)
			}
			res = next
			continue
		}
		if err == nil && len(next.InputRequests) > 0 {
			t.Fatalf("unanswered retry %d: the question once more, want the call ended", i+1)
		}
	}
}

// A held call ends at once with the failure of the request carrying its
// client's answer (here it is never answered: its connection closes),
// not at the call's timeout, and the backend's tool waiting for the
// answer is cancelled. go-sdk's own replies to the backend (here a
// ping's, refused) leave the call as it is.
func TestHeldCallEndsWithItsAnswersFailure(t *testing.T) {
	cancelled := make(chan struct{}, 1)
	handler := legacyToolHandler("confirm", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		// The ping's reply is refused: the tool gives up on it and asks.
		pctx, stop := context.WithTimeout(ctx, 200*time.Millisecond)
		_ = req.Session.Ping(pctx, nil)
		stop()
		_, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "sure?", RequestedSchema: map[string]any{"type": "object"}})
		if ctx.Err() != nil {
			cancelled <- struct{}{}
		}
		return nil, err
	})
	var pingsRefused atomic.Int32
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		switch {
		case bytes.Contains(body, []byte(`"result":{}`)):
			pingsRefused.Add(1)
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusServiceUnavailable)
		case bytes.Contains(body, []byte(`"action":"accept"`)):
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		default:
			handler.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(front.Close)
	c := newTestClient(Config{Name: "legacy", URL: front.URL, Protocol: ProtocolLegacy, Timeout: time.Hour})
	defer c.Close()
	caps := &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}}
	ctx := context.Background()
	res, err := c.CallToolAsking(ctx, &mcp.CallToolParams{Name: "confirm"}, caps, "alice", Notify{})
	if err != nil || len(res.InputRequests) != 1 || c.heldCalls() != 1 {
		t.Fatalf("the call after a refused ping reply: %v %v, %d held; want it held for its question", res, err, c.heldCalls())
	}
	if pingsRefused.Load() == 0 {
		t.Fatal("no ping reply was refused")
	}
	var key string
	for k := range res.InputRequests {
		key = k
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.ResumeHeld(ctx, res.RequestState, "alice", map[string]json.RawMessage{key: json.RawMessage(`{"action":"accept","content":{}}`)}, Notify{})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("the retry whose answer was not answered: %v, want unavailable", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the retry waits for the call's timeout")
	}
	waitCancelled(t, cancelled, "the tool waiting for the answer")
	if c.heldCalls() != 0 {
		t.Fatalf("%d held", c.heldCalls())
	}
}
