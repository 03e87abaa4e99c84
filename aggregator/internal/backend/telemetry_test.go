package backend

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/switchboard-mcp/switchboard/services/telemetry"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// TestClientSpansFollowTheConventions: the client span of a request to a
// backend is named "{method} {target}" with the MCP conventions'
// attributes, on the raw path and on go-sdk's (a Legacy session's
// requests, whose method and target are in the body).
func TestClientSpansFollowTheConventions(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	prev := tracer
	tracer = provider.Tracer("test")
	t.Cleanup(func() { tracer = prev })
	telemetry.SetRecording(true)
	t.Cleanup(func() { telemetry.SetRecording(false) })

	srv := mcp.NewServer(&mcp.Implementation{Name: "b", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	c := newTestClient(Config{Name: "weather", URL: hs.URL, Protocol: ProtocolLegacy, Timeout: 5 * time.Second})
	t.Cleanup(c.Close)
	ctx := context.Background()

	var p ParamsBuilder
	p.String("name", "echo")
	if _, err := c.Call(ctx, &Call{Method: "tools/call", Name: "echo", Params: p.Bytes()}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CallToolStreamed(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}, false, "info", func(string, any) {}); err != nil {
		t.Fatal(err)
	}
	// go-sdk closes a response's body, which ends its span, after it
	// has handed the result over: the second span may end a moment later.
	var calls []sdktrace.ReadOnlySpan
	testkit.Eventually(t, "two spans named tools/call echo (raw and go-sdk)", 5*time.Second, func() error {
		calls = calls[:0]
		var names []string
		for _, s := range spans.Ended() {
			names = append(names, s.Name())
			if s.Name() == "tools/call echo" {
				calls = append(calls, s)
			}
		}
		if len(calls) != 2 {
			return fmt.Errorf("spans %v", names)
		}
		return nil
	})
	for _, s := range calls {
		for _, want := range []attribute.KeyValue{
			attribute.String("mcp.method.name", "tools/call"), attribute.String("gen_ai.tool.name", "echo"),
			attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("switchboard.backend", "weather"),
			attribute.String("mcp.protocol.version", ProtocolLegacy),
		} {
			if !slices.Contains(s.Attributes(), want) {
				t.Errorf("span %s lacks %v: %v", s.Name(), want, s.Attributes())
			}
		}
	}
}
