package backend

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/services/dualera"
)

// stackRecorder is a real go-sdk server in both eras behind a handler that
// records, for every HTTP request it receives, the configured header, the
// trace context and the TCP connection it came on.
type stackRecorder struct {
	mu       sync.Mutex
	requests []recordedRequest
	conns    map[string]bool // remote addresses seen
}

type recordedRequest struct {
	method, static, traceparent, conn string
	// raw: a request of the raw path (its ids are the aggregator's own,
	// "sb-N"), not go-sdk's.
	raw bool
}

func startStackRecorder(t *testing.T) (*stackRecorder, string) {
	t.Helper()
	rec := &stackRecorder{conns: map[string]bool{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "rec", Version: "1"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}},
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	inner := dualera.New(srv, nil, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec.mu.Lock()
		rec.requests = append(rec.requests, recordedRequest{method: r.Method + " " + r.Header.Get("Mcp-Method"),
			static: r.Header.Get("X-Static"), traceparent: r.Header.Get("Traceparent"), conn: r.RemoteAddr,
			raw: bytes.Contains(body, []byte(`"id":"sb-`))})
		rec.conns[r.RemoteAddr] = true
		rec.mu.Unlock()
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return rec, ts.URL
}

func (r *stackRecorder) snapshot() ([]recordedRequest, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recordedRequest(nil), r.requests...), len(r.conns)
}

// Every request to a backend goes through its one stack: go-sdk's (the
// handshake, a held call's and a streamed call's sessions of their own,
// their deletion) and the raw path's alike carry the configured header,
// every request made within a span carries that span's trace, and they
// share one pool of connections.
func TestEveryRequestGoesThroughTheOneStack(t *testing.T) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	rec, url := startStackRecorder(t)
	c := newTestClient(Config{Name: "one", URL: url, Protocol: ProtocolLegacy, Headers: map[string]string{"X-Static": "s"}})
	t.Cleanup(c.Close)
	traceID := trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: traceID, SpanID: trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}, TraceFlags: trace.FlagsSampled,
	}))
	if _, err := c.Call(ctx, echoCall(`{}`)); err != nil {
		t.Fatalf("raw call: %v", err)
	}
	caps := &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}}
	if res, err := c.CallToolAsking(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}, caps, "alice\x00echo", Notify{}); err != nil || res.IsError {
		t.Fatalf("held call: %v %+v", err, res)
	}
	if res, err := c.CallToolStreamed(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}, false, "info", func(string, any) {}); err != nil || res.IsError {
		t.Fatalf("streamed call: %v %+v", err, res)
	}
	before, _ := rec.snapshot()
	if _, err := c.Call(ctx, echoCall(`{}`)); err != nil {
		t.Fatalf("raw call: %v", err)
	}
	requests, conns := rec.snapshot()
	traced := 0
	for _, r := range requests {
		if r.static != "s" {
			t.Errorf("%s reached the backend without the configured header", r.method)
		}
		if strings.Contains(r.traceparent, traceID.String()) {
			traced++
		}
	}
	// Each of the calls above (the raw ones, the held and the streamed
	// call with their handshakes) was made within the span.
	if traced < 4 {
		t.Errorf("%d of %d requests carried the caller's trace, want every call's", traced, len(requests))
	}
	// The last raw call went on a connection go-sdk's requests had used:
	// one pool.
	final := requests[len(requests)-1]
	if !final.raw {
		t.Fatalf("the last request was not the raw call: %+v", final)
	}
	last := final.conn
	shared := false
	for _, r := range before {
		shared = shared || (r.conn == last && !r.raw)
	}
	if !shared {
		t.Errorf("the raw call came on a connection no go-sdk request used (%d connections for %d requests)", conns, len(requests))
	}
	if _, _, err := net.SplitHostPort(last); err != nil {
		t.Fatalf("remote address %q", last)
	}
}

// boundedLines notes a line past maxMessageBytes whatever the chunks its
// bytes arrive in: the end of a long line in the chunk that crosses the
// bound counts, and a line just within it does not.
func TestBoundedLinesCountsAcrossChunks(t *testing.T) {
	for _, c := range []struct {
		name  string
		line  int
		chunk int
		over  bool
	}{
		{"over, ending in a large chunk", maxMessageBytes + 3000, 32 << 10, true},
		{"over, ending in a small chunk", maxMessageBytes + 1, 4 << 10, true},
		{"at the bound", maxMessageBytes, 32 << 10, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			stream := "data: " + strings.Repeat("x", c.line-len("data: ")) + "\n\ndata: {}\n\n"
			cred := &callerCred{}
			r := &boundedLines{ReadCloser: io.NopCloser(strings.NewReader(stream)), cred: cred}
			buf := make([]byte, c.chunk)
			for {
				if _, err := r.Read(buf); err != nil {
					break
				}
			}
			if noted := cred.answer.Load() != nil; noted != c.over {
				t.Fatalf("a line of %d bytes read in chunks of %d: noted %v, want %v", c.line, c.chunk, noted, c.over)
			}
		})
	}
}
