package backend

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/dualera"
)

// eraRecorder is a real go-sdk server served in both eras (dualera) that
// records the era each tools/call arrives in; modernOnly refuses Legacy.
type eraRecorder struct {
	mu    sync.Mutex
	calls []string
}

func (rec *eraRecorder) eras() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.calls)
}

func startDualEra(t *testing.T, rec *eraRecorder, modernOnly bool) string {
	t.Helper()
	router := dualEraEcho("dual")
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			legacy := r.Header.Get("Mcp-Session-Id") != ""
			if modernOnly && (legacy || bytes.Contains(body, []byte(`"method":"initialize"`))) {
				http.Error(w, "this server speaks 2026-07-28 only", http.StatusBadRequest)
				return
			}
			if bytes.Contains(body, []byte(`"method":"tools/call"`)) {
				rec.mu.Lock()
				rec.calls = append(rec.calls, map[bool]string{true: "legacy", false: "modern"}[legacy])
				rec.mu.Unlock()
			}
		}
		router.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// dualEraEcho is a real go-sdk server with one tool, echo, served in both
// eras (dualera).
func dualEraEcho(name string) http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	return dualera.New(srv, nil, nil)
}

func echoCall(caps string) *Call {
	var p ParamsBuilder
	p.String("name", "echo")
	p.Raw("arguments", []byte(`{}`))
	return &Call{Method: "tools/call", Name: "echo", Params: p.Bytes(), ClientCapabilities: []byte(caps)}
}

// TestPlainCallsUseALegacySession: a dual-era backend's plain calls move to
// a Legacy session once it is open; a call whose client could be asked for
// input stays Modern.
func TestPlainCallsUseALegacySession(t *testing.T) {
	rec := &eraRecorder{}
	c := newTestClient(Config{Name: "dual", URL: startDualEra(t, rec, false)})
	t.Cleanup(c.Close)
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		// go-sdk clients declare roots by default: still a plain call.
		res, err := c.Call(ctx, echoCall(`{"roots":{"listChanged":true}}`))
		if err != nil || res.IsError {
			t.Fatalf("call: %v %+v", err, res)
		}
		if e := rec.eras(); e[len(e)-1] == "legacy" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("plain calls never moved to a Legacy session: %v", rec.eras())
		}
	}
	if e := rec.eras(); e[0] != "modern" {
		t.Fatalf("the first call, before the Legacy session opened, went %s", e[0])
	}
	for _, caps := range []string{`{"elicitation":{}}`, `{"sampling":{},"roots":{}}`} {
		if _, err := c.Call(ctx, echoCall(caps)); err != nil {
			t.Fatal(err)
		}
		if e := rec.eras(); e[len(e)-1] != "modern" {
			t.Fatalf("a call whose client declared %s went %s", caps, e[len(e)-1])
		}
	}
	log := &Call{Method: "tools/call", Name: "echo", Params: echoCall(`{}`).Params, LogLevel: "info"}
	if _, err := c.Call(ctx, log); err != nil {
		t.Fatal(err)
	}
	if e := rec.eras(); e[len(e)-1] != "modern" {
		t.Fatalf("a call with a log level went %s", e[len(e)-1])
	}
	// A lost Legacy session costs nothing: the call goes the usual way and
	// a new session is opened.
	c.mu.Lock()
	s := c.plain.session
	c.mu.Unlock()
	_ = s.Close()
	if res, err := c.Call(ctx, echoCall(`{}`)); err != nil || res.IsError {
		t.Fatalf("call after the Legacy session ended: %v %+v", err, res)
	}
}

// TestModernOnlyBackendKeepsModernCalls: a backend that refuses Legacy gets
// every call Modern, and the refusal is not retried for every call.
func TestModernOnlyBackendKeepsModernCalls(t *testing.T) {
	rec := &eraRecorder{}
	c := newTestClient(Config{Name: "modern", URL: startDualEra(t, rec, true)})
	t.Cleanup(c.Close)
	for range 20 {
		if res, err := c.Call(context.Background(), echoCall(`{}`)); err != nil || res.IsError {
			t.Fatalf("call: %v %+v", err, res)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		refused := !c.plain.connecting && !c.plain.retryAt.IsZero()
		c.mu.Unlock()
		if refused {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the Legacy connect never ended")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if res, err := c.Call(context.Background(), echoCall(`{}`)); err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	for _, e := range rec.eras() {
		if e != "modern" {
			t.Fatalf("a call went %s to a Modern-only backend", e)
		}
	}
}

// TestTasksAreNeverPlain: a call declaring the tasks extension, and a
// request about a task, keep the Modern path, which alone carries them.
func TestTasksAreNeverPlain(t *testing.T) {
	for _, c := range []struct {
		call  Call
		plain bool
	}{
		{Call{Method: "tools/call", ClientCapabilities: []byte(`{"roots":{}}`)}, true},
		{Call{Method: "tools/call", ClientCapabilities: []byte(`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`)}, false},
		{Call{Method: "tasks/get"}, false},
		{Call{Method: "tasks/cancel"}, false},
	} {
		if got := isPlain(&c.call); got != c.plain {
			t.Errorf("%s %s: plain %v, want %v", c.call.Method, c.call.ClientCapabilities, got, c.plain)
		}
	}
}

// A backend restarted speaking Legacy only refuses the Modern session's
// requests with -32022, unread: the session is opened again in the
// revision the backend speaks now, and the call runs there, once,
// instead of every call and listing failing until the aggregator
// restarts.
func TestBackendRestartedWithoutModern(t *testing.T) {
	restart, c := restartableDualEra(t)
	ctx := context.Background()
	// A call that may ask its client for input stays Modern.
	caps := `{"elicitation":{}}`
	if _, err := c.Call(ctx, echoCall(caps)); err != nil || !c.SpeaksModern() {
		t.Fatalf("first call: %v (modern %v)", err, c.SpeaksModern())
	}
	var ran atomic.Int32
	legacy := legacyToolHandler("echo", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ran.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	restart(legacy)
	if res, err := c.Call(ctx, echoCall(caps)); err != nil || res.IsError || ran.Load() != 1 {
		t.Fatalf("call after the restart: %+v %v, run %d times", res, err, ran.Load())
	}
	if lists, err := c.ListAll(ctx); err != nil || len(lists.Tools) != 1 || lists.ProtocolVersion != ProtocolLegacy {
		t.Fatalf("listing after the restart: %+v %v", lists, err)
	}
}

// isEventStream reads a Content-Type as mime.ParseMediaType would for
// text/event-stream, without parsing it.
func TestIsEventStream(t *testing.T) {
	for ctype, want := range map[string]bool{
		"text/event-stream": true, "Text/Event-Stream": true, "text/event-stream; charset=utf-8": true,
		"text/event-stream ;x=1": true, "text/event-streams": false, "application/json": false, "": false, "text/event": false,
	} {
		if got := isEventStream(ctype); got != want {
			t.Errorf("isEventStream(%q) = %v, want %v", ctype, got, want)
		}
	}
}

// A backend's Retry-After, delta-seconds or an HTTP date, is read as
// whole seconds from now, at least one and at most an hour.
func TestRetryAfterSeconds(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	for header, want := range map[string]int{
		"7": 7, " 30 ": 30, "0": 1, "-5": 1, "": 1, "soon": 1, "999999": 3600,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90,
		now.Add(-time.Minute).Format(http.TimeFormat):     1,
	} {
		if got := retryAfterSeconds(header, now); got != want {
			t.Errorf("Retry-After %q: %d s, want %d", header, got, want)
		}
	}
}

// A dual-era backend restarted speaking Modern only refuses the plain
// calls' Legacy session: the call runs on the Modern path, once, and the
// plain calls stay there, instead of failing until the aggregator
// restarts.
func TestBackendRestartedWithoutLegacy(t *testing.T) {
	restart, c := restartableDualEra(t)
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for c.plainSession() == nil {
		if _, err := c.Call(ctx, echoCall(`{}`)); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the plain calls' Legacy session never opened")
		}
	}
	var ran atomic.Int32
	srvModern := mcp.NewServer(&mcp.Implementation{Name: "modern", Version: "1"}, nil)
	srvModern.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ran.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	stateless := dualera.New(srvModern, nil, nil).Modern
	var legacyRefused atomic.Int32
	var modern http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Session-Id") != "" || r.Header.Get("Mcp-Protocol-Version") == ProtocolLegacy {
			// What a server that speaks 2026-07-28 only answers a session.
			legacyRefused.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32022,"message":"unsupported protocol version","data":{"supported":["2026-07-28"]}}}`)
			return
		}
		stateless.ServeHTTP(w, r)
	})
	restart(modern)
	for i := range 3 {
		if res, err := c.Call(ctx, echoCall(`{}`)); err != nil || res.IsError || ran.Load() != int32(i+1) {
			t.Fatalf("call %d after the restart: %+v %v, run %d times (Legacy refused %d times)", i, res, err, ran.Load(), legacyRefused.Load())
		}
	}
	// The refused session is not tried again on every call: the call, the
	// old session's DELETE and one attempt at a new session.
	if n := legacyRefused.Load(); n > 3 {
		t.Fatalf("the backend refused %d Legacy requests for 3 calls", n)
	}
}

// restartableDualEra is a client of a dual-era backend; restart puts
// another server in its place, as a restart with another version would,
// closing the connections the client holds.
func restartableDualEra(t *testing.T) (restart func(http.Handler), c *Client) {
	var current atomic.Pointer[http.Handler]
	dual := dualEraEcho("dual")
	current.Store(&dual)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*current.Load()).ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	c = newTestClient(Config{Name: "dual", URL: srv.URL})
	t.Cleanup(c.Close)
	return func(h http.Handler) {
		current.Store(&h)
		srv.CloseClientConnections()
	}, c
}
