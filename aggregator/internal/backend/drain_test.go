package backend

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/h1"
	"github.com/switchboard-mcp/switchboard/services/dualera"
)

// heldStreams is a real go-sdk backend (both eras) whose tools/call event
// streams, once hold is set, stay open after the answer until the test
// releases them; it records the connection each call came on.
type heldStreams struct {
	mu      sync.Mutex
	hold    chan struct{}
	remotes []string
}

func (h *heldStreams) start(t *testing.T) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "held", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	router := dualera.New(srv, nil, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var call bool
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			call = bytes.Contains(body, []byte(`"method":"tools/call"`))
		}
		h.mu.Lock()
		hold := h.hold
		if call {
			h.remotes = append(h.remotes, r.RemoteAddr)
		}
		h.mu.Unlock()
		router.ServeHTTP(w, r)
		if call && hold != nil {
			// The answer has been written and flushed; the stream's end
			// (the final chunk) is written only when this handler returns.
			<-hold
		}
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

func (h *heldStreams) lastRemotes(n int) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.remotes) < n {
		return nil
	}
	return append([]string(nil), h.remotes[len(h.remotes)-n:]...)
}

// A call's answer does not wait for the end of its event stream, and the
// connection is used again once that end arrives (raw.go, drainStream).
func TestAnswerDoesNotWaitForTheStreamEnd(t *testing.T) {
	saved := drainGraceAfterAnswer
	drainGraceAfterAnswer = time.Minute
	t.Cleanup(func() { drainGraceAfterAnswer = saved })
	h := &heldStreams{}
	c := New(Config{Name: "held", URL: h.start(t)}, nil, nil)
	t.Cleanup(c.Close)
	ctx := context.Background()
	// Calls move to a Legacy session (event streams) once it is open.
	deadline := time.Now().Add(10 * time.Second)
	for c.plainSession() == nil {
		if res, err := c.Call(ctx, echoCall(`{}`)); err != nil || res.IsError {
			t.Fatalf("call: %v %+v", err, res)
		}
		if time.Now().After(deadline) {
			t.Fatal("no Legacy session opened for plain calls")
		}
	}
	if res, err := c.Call(ctx, echoCall(`{}`)); err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	pool := c.raw.Transport.(*h1.Transport)
	waitIdle(t, pool, 1)
	idle := pool.Idle()

	hold := make(chan struct{})
	h.mu.Lock()
	h.hold = hold
	h.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		res, err := c.Call(ctx, echoCall(`{}`))
		if err == nil && res.IsError {
			err = io.ErrUnexpectedEOF
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		close(hold)
		t.Fatal("the call waited for the end of its event stream")
	}
	h.mu.Lock()
	h.hold = nil
	h.mu.Unlock()
	close(hold)
	// The held call's connection is back once its stream ended; it is the
	// one the next call takes (the most recently used).
	waitIdle(t, pool, idle)
	if res, err := c.Call(ctx, echoCall(`{}`)); err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	if r := h.lastRemotes(2); r == nil || r[0] != r[1] {
		t.Errorf("the call after a held stream came on %v, want the held call's connection again", r)
	}
}

// waitIdle waits until the transport holds n idle connections.
func waitIdle(t *testing.T, pool *h1.Transport, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for pool.Idle() < n {
		if time.Now().After(deadline) {
			t.Fatal("no connection went back to the pool")
		}
		time.Sleep(time.Millisecond)
	}
}
