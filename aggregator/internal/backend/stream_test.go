package backend

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A Legacy backend's call that its caller gives up on is cancelled at the
// backend at once, whether it went the raw way or on a session of its own
// (CallToolStreamed: the caller wants log messages, and a Legacy log level
// is per session), and the caller gets its answer without waiting for the
// backend's handler to end.
func TestCancelledCallReachesLegacyBackend(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "legacy", Version: "1"}, nil)
	started, cancelled, release := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{})
	server.AddTool(&mcp.Tool{Name: "nap", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		started <- struct{}{}
		select {
		case <-ctx.Done():
			cancelled <- struct{}{}
			return nil, ctx.Err()
		case <-release:
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "woke up"}}}, nil
		}
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	defer srv.Close()
	defer close(release) // a handler never cancelled must not hold srv.Close
	c := New(Config{Name: "legacy", URL: srv.URL, Protocol: ProtocolLegacy, Timeout: time.Minute}, nil, nil)
	defer c.Close()

	var p ParamsBuilder
	p.String("name", "nap")
	p.Raw("arguments", []byte(`{}`))
	for _, tc := range []struct {
		name string
		call func(context.Context) error
	}{
		{"raw", func(ctx context.Context) error {
			_, err := c.Call(ctx, &Call{Method: "tools/call", Name: "nap", Params: p.Bytes()})
			return err
		}},
		{"session of its own", func(ctx context.Context) error {
			_, err := c.CallToolStreamed(ctx, &mcp.CallToolParams{Name: "nap"}, true, "info", func(string, any) {})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ended := make(chan error, 1)
			go func() { ended <- tc.call(ctx) }()
			select {
			case <-started:
			case err := <-ended:
				t.Fatalf("the call ended before the backend ran it: %v", err)
			case <-time.After(10 * time.Second):
				t.Fatal("the backend never ran the call")
			}
			cancel()
			waitCancelled(t, cancelled, "the call")
			select {
			case err := <-ended:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("the cancelled call returned %v", err)
				}
			case <-time.After(time.Second):
				t.Error("the cancelled call did not return")
			}
		})
	}
}

// A backend that answers one call with an HTTP error (503 with
// Retry-After, as an overloaded server does) has not lost its session:
// the other calls in flight on it run to their end, and the session is
// not ended at the backend.
func TestErrorStatusKeepsTheLegacySession(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	h := legacyToolHandler("nap", func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		started <- struct{}{}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-release:
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "woke up"}}}, nil
		}
	})
	var deletes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		switch {
		case r.Method == http.MethodDelete:
			deletes.Add(1)
		case bytes.Contains(body, []byte("overload")):
			w.Header().Set("Retry-After", "1")
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	wake := sync.OnceFunc(func() { close(release) })
	defer wake()
	c := newTestClient(Config{Name: "legacy", URL: srv.URL, Protocol: ProtocolLegacy})
	defer c.Close()
	call := func(args string) error {
		var p ParamsBuilder
		p.String("name", "nap")
		p.Raw("arguments", []byte(args))
		_, err := c.Call(context.Background(), &Call{Method: "tools/call", Name: "nap", Params: p.Bytes()})
		return err
	}
	napped := make(chan error, 1)
	go func() { napped <- call(`{}`) }()
	select {
	case <-started:
	case err := <-napped:
		t.Fatalf("the call ended before the backend ran it: %v", err)
	}
	c.mu.Lock()
	session := c.session
	c.mu.Unlock()
	if err := call(`{"load":"overload"}`); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("the refused call returned %v", err)
	}
	c.mu.Lock()
	kept := c.session == session
	c.mu.Unlock()
	if !kept {
		t.Error("the session was dropped for a backend's error status")
	}
	wake()
	if err := <-napped; err != nil {
		t.Fatalf("a call in flight beside a refused one failed: %v", err)
	}
	if n := deletes.Load(); n != 0 {
		t.Fatalf("the session was ended at the backend (%d DELETE)", n)
	}
}

// A backend's 503 says for how long it is unavailable in its Retry-After,
// which the error carries (RetryAfter) for the caller to wait that long;
// a 503 without one, or another status, says nothing of when to come back.
func TestUnavailableCarriesTheBackendsRetryAfter(t *testing.T) {
	h := legacyToolHandler("nap", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "woke up"}}}, nil
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		switch {
		case bytes.Contains(body, []byte("maintenance")):
			w.Header().Set("Retry-After", "7")
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		case bytes.Contains(body, []byte("silent")):
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		case bytes.Contains(body, []byte("proxy")):
			w.Header().Set("Retry-After", "9")
			http.Error(w, "bad gateway", http.StatusBadGateway)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	c := newTestClient(Config{Name: "legacy", URL: srv.URL, Protocol: ProtocolLegacy})
	defer c.Close()
	for load, want := range map[string]int{"maintenance": 7, "silent": 0, "proxy": 0} {
		var p ParamsBuilder
		p.String("name", "nap")
		p.Raw("arguments", []byte(`{"load":"`+load+`"}`))
		_, err := c.Call(context.Background(), &Call{Method: "tools/call", Name: "nap", Params: p.Bytes()})
		if !errors.Is(err, ErrUnavailable) || RetryAfter(err) != want {
			t.Errorf("%s: %v, Retry-After %d s; want unavailable, %d s", load, err, RetryAfter(err), want)
		}
	}
}
