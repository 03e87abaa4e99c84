package rpc_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	"github.com/switchboard-mcp/switchboard/services/config"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/telemetry"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// traceEcho answers RefreshScope with the trace id its context carries
// and the traceparent it was sent, if any.
func traceEcho(ctx context.Context, _ *indexerv1.RefreshScopeRequest) (*indexerv1.RefreshScopeResponse, error) {
	sc := trace.SpanContextFromContext(ctx)
	sent := metadata.ValueFromIncomingContext(ctx, "traceparent")
	out := ""
	if sc.IsValid() {
		out = sc.TraceID().String() + " " + sc.SpanID().String()
	}
	return &indexerv1.RefreshScopeResponse{ToolsDigest: out, ScopeSize: uint32(len(sent))}, nil
}

func startTraceEcho(t *testing.T) string {
	t.Helper()
	creds := []config.ServiceCredential{{Name: "c", Token: "trace-secret", Subject: "svc", Allow: []string{"switchboard.indexer.v1.IndexerService/*"}}}
	return startIndexer(t, creds, traceEcho)
}

// TestTraceContextCrossesHop: a service that exports no spans still hands
// the caller's trace context to the next one (its handler's context holds
// the caller's span), and sends none when it has none; one that exports
// spans opens a client and a server span of that same trace.
func TestTraceContextCrossesHop(t *testing.T) {
	prevProp := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTextMapPropagator(prevProp) })
	traceID, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	spanID, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	caller := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled, Remote: true,
	}))
	call := func(t *testing.T, ctx context.Context) *indexerv1.RefreshScopeResponse {
		t.Helper()
		addr := startTraceEcho(t)
		conn, err := rpc.Dial(config.Endpoint{Address: addr, Token: "trace-secret"}, config.TLS{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		resp, err := indexerv1.NewIndexerServiceClient(conn).RefreshScope(ctx, &indexerv1.RefreshScopeRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	t.Run("not recording", func(t *testing.T) {
		telemetry.SetRecording(false)
		if got, want := call(t, caller).GetToolsDigest(), traceID.String()+" "+spanID.String(); got != want {
			t.Fatalf("the server's context holds %q, want the caller's span %q", got, want)
		}
		if resp := call(t, context.Background()); resp.GetToolsDigest() != "" || resp.GetScopeSize() != 0 {
			t.Fatalf("a caller without a trace sent one: %q, %d traceparents", resp.GetToolsDigest(), resp.GetScopeSize())
		}
	})

	t.Run("recording", func(t *testing.T) {
		spans := tracetest.NewSpanRecorder()
		provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
		prev := otel.GetTracerProvider()
		otel.SetTracerProvider(provider)
		telemetry.SetRecording(true)
		t.Cleanup(func() { otel.SetTracerProvider(prev); telemetry.SetRecording(false) })
		got := call(t, caller).GetToolsDigest()
		if got == "" || got[:32] != traceID.String() || got[33:] == spanID.String() {
			t.Fatalf("the server's context holds %q, want a span of its own in trace %s", got, traceID)
		}
		// The server ends its span after it has sent the answer, so the
		// client can hold the answer first: poll for both spans.
		kinds := map[trace.SpanKind]bool{}
		testkit.Eventually(t, "a client and a server span of the trace", 10*time.Second, func() error {
			for _, s := range spans.Ended() {
				if s.SpanContext().TraceID() == traceID {
					kinds[s.SpanKind()] = true
				}
			}
			if !kinds[trace.SpanKindClient] || !kinds[trace.SpanKindServer] {
				return fmt.Errorf("spans of the trace by kind: %v", kinds)
			}
			return nil
		})
	})
}
