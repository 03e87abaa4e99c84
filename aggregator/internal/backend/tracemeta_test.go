package backend

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

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
