package backend

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TestTraceContextInMeta: a request to a backend carries its trace context
// in _meta (SEP-414) as well as in its headers, never baggage; without a
// trace context, none.
func TestTraceContextInMeta(t *testing.T) {
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })
	ts, _ := trace.ParseTraceState("vendor=value")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled, TraceState: ts})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)

	var buf bytes.Buffer
	writeRequest(&buf, "sb-1", &Call{Method: "tools/call", Params: []byte(`{"name":"t"}`)}, true, ProtocolModern, traceMeta(ctx))
	var msg struct {
		Params struct {
			Meta map[string]any `json:"_meta"`
			Name string         `json:"name"`
		} `json:"params"`
	}
	if err := json.Unmarshal(buf.Bytes(), &msg); err != nil {
		t.Fatalf("%s: %v", buf.String(), err)
	}
	want := "00-01020300000000000000000000000000-0405060000000000-01"
	if msg.Params.Meta["traceparent"] != want || msg.Params.Meta["tracestate"] != "vendor=value" || msg.Params.Name != "t" {
		t.Fatalf("_meta %v", msg.Params.Meta)
	}
	if _, ok := msg.Params.Meta["baggage"]; ok {
		t.Fatal("baggage in _meta")
	}

	buf.Reset()
	writeRequest(&buf, "sb-2", &Call{Method: "tools/call"}, false, ProtocolLegacy, traceMeta(context.Background()))
	if bytes.Contains(buf.Bytes(), []byte("traceparent")) || !json.Valid(buf.Bytes()) {
		t.Fatalf("without a trace context: %s", buf.String())
	}
}

// TestTraceContextInMetaOnOwnSessions: the go-sdk paths (a call on a
// session of its own: streamed, or held for the client's input) carry the
// trace context in _meta too.
func TestTraceContextInMetaOnOwnSessions(t *testing.T) {
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })
	seen := make(chan any, 1)
	srv := mcp.NewServer(&mcp.Implementation{Name: "traced", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		seen <- req.Params.Meta["traceparent"]
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	c := newTestClient(Config{Name: "traced", URL: hs.URL, Protocol: ProtocolLegacy, Timeout: 5 * time.Second})
	t.Cleanup(c.Close)

	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{7}, SpanID: trace.SpanID{8}, TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	if _, err := c.CallToolStreamed(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}, false, "info", func(string, any) {}); err != nil {
		t.Fatal(err)
	}
	if got := <-seen; got != "00-07000000000000000000000000000000-0800000000000000-01" {
		t.Fatalf("the backend's _meta.traceparent is %v", got)
	}
}
