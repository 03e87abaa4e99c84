package edge

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/logging"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
	"github.com/switchboard-mcp/switchboard/services/telemetry"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// TestRequestSpanAndMetrics checks that one server span covers an MCP
// request, continues the caller's traceparent (when trusted to), is named
// and carries the attributes as the MCP conventions say, parents the gRPC
// client span, and that the request is counted.
func TestRequestSpanAndMetrics(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	provider := traceInto(t, spans)

	b := startBackends(t)
	cfg := testGatewayConfig(b)
	cfg.HTTP.TrustClientTraceparent = true
	_, srv := startGateway(t, b, cfg)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	h := modernHeaders("tools/call", "Mcp-Name", "beta_add", "Traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	resp := send(t, http.MethodPost, srv.URL+"/mcp", h, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+modernMeta+`,"name":"beta_add","arguments":{"a":1,"b":2}}}`)
	if resp.status != 200 {
		t.Fatalf("call: %d %s", resp.status, resp.body)
	}
	_ = provider.ForceFlush(context.Background())

	var server, client sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		if s.SpanContext().TraceID().String() != traceID {
			continue
		}
		switch s.SpanKind() {
		case trace.SpanKindServer:
			if s.Name() == "tools/call beta_add" {
				server = s
			}
		case trace.SpanKindClient:
			if strings.HasSuffix(s.Name(), "/CallTool") {
				client = s
			}
		}
	}
	if server == nil || client == nil {
		t.Fatalf("missing spans in trace %s (server %v, client %v)", traceID, server != nil, client != nil)
	}
	attrs := map[attribute.Key]string{}
	for _, kv := range server.Attributes() {
		attrs[kv.Key] = kv.Value.Emit()
	}
	if attrs["mcp.method.name"] != "tools/call" || attrs["gen_ai.tool.name"] != "beta_add" || attrs["mcp.protocol.version"] != mcpspec.Modern ||
		attrs["jsonrpc.request.id"] != "1" || attrs["gen_ai.operation.name"] != "execute_tool" {
		t.Fatalf("server span attributes = %v", attrs)
	}
	if client.Parent().SpanID() != server.SpanContext().SpanID() {
		t.Fatal("the gRPC client span is not a child of the MCP request span")
	}
	// An error's code is its error.type.
	send(t, http.MethodPost, srv.URL+"/mcp", modernHeaders("tools/call", "Mcp-Name", "nope"),
		`{"jsonrpc":"2.0","id":"two","method":"tools/call","params":{`+modernMeta+`,"name":"nope","arguments":{}}}`)
	_ = provider.ForceFlush(context.Background())
	var failed sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		if s.SpanKind() == trace.SpanKindServer && s.Name() == "tools/call nope" {
			failed = s
		}
	}
	if failed == nil {
		t.Fatal("no span of the failed call")
	}
	fattrs := map[attribute.Key]string{}
	for _, kv := range failed.Attributes() {
		fattrs[kv.Key] = kv.Value.Emit()
	}
	if fattrs["error.type"] != "-32602" || fattrs["jsonrpc.request.id"] != "two" {
		t.Fatalf("failed call's attributes = %v", fattrs)
	}

	if r := send(t, http.MethodPost, srv.URL+"/mcp", modernHeaders("tools/list", "Authorization", "Bearer wrong"),
		`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{`+modernMeta+`}}`); r.status != http.StatusUnauthorized {
		t.Fatalf("a wrong key: %d", r.status)
	}

	metrics := send(t, http.MethodGet, srv.URL+"/metrics", nil, "")
	// A request of a tool that does not exist is the client's mistake:
	// rejected, not a failure of the service; so is one without
	// credentials.
	if !strings.Contains(string(metrics.body), `switchboard_gateway_mcp_requests_total{era="modern",method="tools/call",outcome="rejected"} 1`) ||
		!strings.Contains(string(metrics.body), `switchboard_gateway_mcp_requests_total{era="modern",method="tools/list",outcome="rejected"} 1`) ||
		strings.Contains(string(metrics.body), `outcome="error"`) {
		t.Fatalf("the unknown tool's outcome:\n%s", metrics.body)
	}
	if !strings.Contains(string(metrics.body), `switchboard_gateway_mcp_requests_total{era="modern",method="tools/call",outcome="ok"} 1`) ||
		!strings.Contains(string(metrics.body), `switchboard_gateway_mcp_request_duration_seconds_bucket{era="modern",method="tools/call",le="2"}`) {
		t.Fatalf("metrics:\n%s", metrics.body)
	}
}

// TestUntrustedTraceparent: by default a client's traceparent is not the
// parent of the request's span: the span starts a trace of its own,
// sampled by the gateway's sampler whatever the client's sampled flag,
// and links to the client's span context.
func TestUntrustedTraceparent(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	provider := traceInto(t, spans, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())))

	b := startBackends(t)
	_, srv := startGateway(t, b, testGatewayConfig(b))
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	h := modernHeaders("tools/list", "Traceparent", "00-"+traceID+"-00f067aa0ba902b7-01", "Baggage", "k=v")
	if resp := send(t, http.MethodPost, srv.URL+"/mcp", h, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+modernMeta+`}}`); resp.status != 200 {
		t.Fatalf("list: %d %s", resp.status, resp.body)
	}
	_ = provider.ForceFlush(context.Background())
	if n := len(spans.Ended()); n != 0 {
		t.Fatalf("%d spans recorded: the client's sampled flag forced sampling", n)
	}

	// Sampled by the gateway: the span is a root, linked to the client's.
	provider = traceInto(t, spans)
	if resp := send(t, http.MethodPost, srv.URL+"/mcp", h, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+modernMeta+`}}`); resp.status != 200 {
		t.Fatalf("list: %d %s", resp.status, resp.body)
	}
	_ = provider.ForceFlush(context.Background())
	var server sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		if s.SpanKind() == trace.SpanKindServer && s.Name() == "tools/list" {
			server = s
		}
	}
	if server == nil {
		t.Fatal("no server span")
	}
	if server.SpanContext().TraceID().String() == traceID || server.Parent().IsValid() {
		t.Errorf("the span continues the client's trace (trace %s, parent %v)", server.SpanContext().TraceID(), server.Parent())
	}
	if links := server.Links(); len(links) != 1 || links[0].SpanContext.TraceID().String() != traceID {
		t.Errorf("links %v, want one to the client's span context", links)
	}
}

// TestHealthEndpoints: /healthz is always ok, /readyz follows the
// aggregator, and the open streams gauge counts a listen.
func TestHealthEndpoints(t *testing.T) {
	b := startBackends(t)
	_, srv := startGateway(t, b, testGatewayConfig(b))
	for _, path := range []string{"/healthz", "/readyz"} {
		if resp := send(t, http.MethodGet, srv.URL+path, nil, ""); resp.status != 200 {
			t.Fatalf("%s: %d", path, resp.status)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, lines := openStream(t, ctx, srv.URL+"/mcp", modernHeaders("subscriptions/listen"),
		`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{`+modernMeta+`,"notifications":{"toolsListChanged":true}}}`)
	nextData(t, lines)
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `switchboard_gateway_open_streams{kind="listen"} 1`) {
		t.Fatalf("open streams gauge missing:\n%s", body)
	}

	// An aggregator that is not serving makes the gateway not ready.
	down := testGatewayConfig(b)
	down.Aggregator.Address = "127.0.0.1:1"
	_, srvDown := startGateway(t, b, down)
	if resp := send(t, http.MethodGet, srvDown.URL+"/readyz", nil, ""); resp.status != http.StatusServiceUnavailable {
		t.Fatalf("readyz with the aggregator down: %d", resp.status)
	}
}

// TestMetaTraceContext: a request whose headers carry no traceparent but
// whose _meta does (SEP-414) is treated as the header would be: trusted,
// its span continues the client's trace; not trusted, its span is a root
// of the gateway's own, linked to the client's.
func TestMetaTraceContext(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	provider := traceInto(t, spans)

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	meta := strings.Replace(modernMeta, `"_meta":{`, `"_meta":{"traceparent":"00-`+traceID+`-`+parentID+`-01","tracestate":"v=1",`, 1)
	b := startBackends(t)
	serverSpan := func(trusted bool) sdktrace.ReadOnlySpan {
		t.Helper()
		spans.Reset()
		cfg := testGatewayConfig(b)
		cfg.HTTP.TrustClientTraceparent = trusted
		_, srv := startGateway(t, b, cfg)
		if resp := send(t, http.MethodPost, srv.URL+"/mcp", modernHeaders("tools/list"), `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+meta+`}}`); resp.status != 200 {
			t.Fatalf("list: %d %s", resp.status, resp.body)
		}
		_ = provider.ForceFlush(context.Background())
		for _, s := range spans.Ended() {
			if s.SpanKind() == trace.SpanKindServer && s.Name() == "tools/list" {
				return s
			}
		}
		t.Fatal("no server span")
		return nil
	}

	trusted := serverSpan(true)
	if trusted.SpanContext().TraceID().String() != traceID || trusted.Parent().SpanID().String() != parentID {
		t.Fatalf("trusted: trace %s, parent %s; want the client's", trusted.SpanContext().TraceID(), trusted.Parent().SpanID())
	}
	if got := trusted.SpanContext().TraceState().Get("v"); got != "1" {
		t.Fatalf("trusted: tracestate %q", got)
	}
	untrusted := serverSpan(false)
	if untrusted.SpanContext().TraceID().String() == traceID || untrusted.Parent().IsValid() {
		t.Fatalf("untrusted: the span continues the client's trace")
	}
	if links := untrusted.Links(); len(links) != 1 || links[0].SpanContext.TraceID().String() != traceID {
		t.Fatalf("untrusted: links %v, want one to the client's span context", links)
	}
}

// TestMetaTraceContextWithoutSpans: with no spans exported, a trusted
// parent in _meta still becomes the request's parent context, which the
// calls to the services carry on, as a trusted header's does; an
// untrusted one does not.
func TestMetaTraceContextWithoutSpans(t *testing.T) {
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	params := wire.Object{"_meta": json.RawMessage(`{"traceparent":"00-` + traceID + `-00f067aa0ba902b7-01"}`)}
	for _, trusted := range []bool{true, false} {
		g := &Gateway{}
		g.cfg.HTTP.TrustClientTraceparent = trusted
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		ctx, span, rec := g.startRequest(r)
		ctx, _ = g.joinMetaTrace(ctx, span, rec, params)
		got := trace.SpanContextFromContext(ctx).TraceID().String()
		if (got == traceID) != trusted {
			t.Errorf("trusted %v: the request's context is in trace %s", trusted, got)
		}
	}
}

// traceInto makes the gateway trace into spans for the test, through a
// provider with opts, as a gateway configured to export spans does (its
// connections and requests open spans only then), with the trace-context
// propagator; the cleanup restores what was there. The package's tracer
// was bound to the first provider ever set, so it is pointed at this one.
func traceInto(t *testing.T, spans *tracetest.SpanRecorder, opts ...sdktrace.TracerProviderOption) *sdktrace.TracerProvider {
	t.Helper()
	provider := sdktrace.NewTracerProvider(append(opts, sdktrace.WithSpanProcessor(spans))...)
	prevProvider, prevProp, prevTracer := otel.GetTracerProvider(), otel.GetTextMapPropagator(), tracer
	otel.SetTracerProvider(provider)
	tracer = provider.Tracer("github.com/switchboard-mcp/switchboard/gateway")
	otel.SetTextMapPropagator(propagation.TraceContext{})
	telemetry.SetRecording(true)
	t.Cleanup(func() {
		otel.SetTracerProvider(prevProvider)
		otel.SetTextMapPropagator(prevProp)
		tracer = prevTracer
		telemetry.SetRecording(false)
	})
	return provider
}

// TestSpansBoundWhatClientsWrite: what a client names (a tool, a URI,
// its request id, a method, the optimizer's tool_name) goes into the
// request's span cut to telemetry.MaxSpanText bytes: a span is exported
// in a batch with others' spans, which a collector refuses whole past
// its message bound, so one request's megabyte of tool name cost every
// span in its batch.
func TestSpansBoundWhatClientsWrite(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	provider := traceInto(t, spans)
	b := startBackends(t)
	_, srv := startGateway(t, b, testGatewayConfig(b))
	long := strings.Repeat("é", 256<<10) // half a megabyte
	for _, c := range []struct{ path, method, params string }{
		{"/mcp", "tools/call", `"name":"` + long + `","arguments":{}`},
		{"/mcp", "resources/read", `"uri":"file:///` + long + `"`},
		{"/mcp", long, ``},
		{"/mcp/optimized", "tools/call", `"name":"call_tool","arguments":{"tool_name":"` + long + `"}`},
	} {
		params := modernMeta
		if c.params != "" {
			params += "," + c.params
		}
		send(t, http.MethodPost, srv.URL+c.path, modernHeaders(c.method, "Mcp-Name", "short"),
			`{"jsonrpc":"2.0","id":"`+long+`","method":"`+c.method+`","params":{`+params+`}}`)
	}
	_ = provider.ForceFlush(context.Background())
	n := 0
	for _, s := range spans.Ended() {
		if s.SpanKind() != trace.SpanKindServer {
			continue
		}
		n++
		if len(s.Name()) > len("resources/read ")+telemetry.MaxSpanText || !utf8.ValidString(s.Name()) {
			t.Errorf("span name of %d bytes", len(s.Name()))
		}
		for _, kv := range s.Attributes() {
			if v := kv.Value.Emit(); len(v) > telemetry.MaxSpanText || !utf8.ValidString(v) {
				t.Errorf("span %.40q: attribute %s of %d bytes", s.Name(), kv.Key, len(v))
			}
		}
	}
	if n < 4 {
		t.Fatalf("%d server spans, want one per request", n)
	}
}

// TestRequestsHaveATraceIDWithoutAnExporter: a gateway that exports no
// spans (no telemetry.otlpEndpoint, the default) still gives each request
// a trace id, unsampled: the client's internal error names it, and so do
// the gateway's log line of the failure (and the services' lines and
// audit events of the request, which get it over gRPC). Requests once
// had none, and an internal error could not be found in the logs.
func TestRequestsHaveATraceIDWithoutAnExporter(t *testing.T) {
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.TraceContext{}) // as telemetry.Setup installs it
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })
	b := startBackends(t)
	parent := make(chan trace.SpanContext, 1)
	b.agg.CallToolFunc = func(ctx context.Context, _ *aggregatorv1.CallToolRequest) (*aggregatorv1.CallToolResponse, error) {
		parent <- trace.SpanContextFromContext(ctx)
		return nil, status.Error(codes.Internal, "boom")
	}
	var logs testkit.LogBuffer
	_, srv := startGatewayWith(t, b, testGatewayConfig(b), func(d *Deps) {
		d.Log = logging.New(&logs, config.Logging{}, "gateway") // the production handler
	})
	resp := send(t, http.MethodPost, srv.URL+"/mcp", modernHeaders("tools/call", "Mcp-Name", "beta_add"),
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+modernMeta+`,"name":"beta_add","arguments":{}}}`)
	var answer struct {
		Error struct {
			Message string `json:"message"`
			Data    struct {
				TraceID string `json:"traceId"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(resp.body, &answer); err != nil || answer.Error.Message != "internal error" || len(answer.Error.Data.TraceID) != 32 {
		t.Fatalf("the client's internal error: %s", resp.body)
	}
	if line := logs.String(); !strings.Contains(line, `"msg":"service call failed"`) || !strings.Contains(line, `"trace_id":"`+answer.Error.Data.TraceID+`"`) {
		t.Errorf("the failure's log line does not name trace %s:\n%s", answer.Error.Data.TraceID, line)
	} else if n := strings.Count(line, `"trace_id":`); n != 1 {
		// A JSON object naming a member twice: log pipelines keep either.
		t.Errorf("the failure's log line names trace_id %d times:\n%s", n, line)
	}
	// The aggregator gets the trace, sampled as a new trace is at the
	// sample ratio (1 here): an unsampled parent would have made every
	// service after the gateway, exporting at any ratio, drop it.
	if p := <-parent; p.TraceID().String() != answer.Error.Data.TraceID || !p.IsSampled() {
		t.Errorf("the aggregator's parent: trace %s, sampled %v; want trace %s, sampled", p.TraceID(), p.IsSampled(), answer.Error.Data.TraceID)
	}
}
