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

	"github.com/switchboard-mcp/switchboard/aggregator/internal/h1"
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
	router := dualEraEcho("held")
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
	c := newTestClient(Config{Name: "held", URL: h.start(t)})
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
	pool := c.raw.Transport.(rawTransport).s.conns.(*h1.Transport)
	// The held call then has a connection of its own, dialed now.
	pool.CloseIdleConnections()

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
	held := h.lastRemotes(1)[0]
	h.mu.Lock()
	h.hold = nil
	h.mu.Unlock()
	close(hold)
	// The held call's connection is back once its stream ended, and later
	// calls use it again: the pool hands out the most recently used first.
	// (Health checks share the pool and may dial one of their own
	// meanwhile, so a few calls are allowed; a closed connection never
	// comes back.)
	waitIdle(t, pool, 1)
	var seen []string
	for range 20 {
		if res, err := c.Call(ctx, echoCall(`{}`)); err != nil || res.IsError {
			t.Fatalf("call: %v %+v", err, res)
		}
		r := h.lastRemotes(1)[0]
		if r == held {
			return
		}
		seen = append(seen, r)
	}
	t.Errorf("no call after a held stream came on its connection %s; they came on %v", held, seen)
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
