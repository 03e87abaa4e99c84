package backend

import (
	"context"
	"encoding/json"
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/services/telemetry"
)

// tracer makes the client span of each request to a backend; its W3C
// context goes to the backend with the request (in the headers, and in
// _meta for calls: traceMeta), so the backend joins the caller's trace.
var (
	tracer         = otel.Tracer("github.com/switchboard-mcp/switchboard/aggregator/internal/backend")
	spanKindClient = trace.WithSpanKind(trace.SpanKindClient)
)

// startSpan opens the client span of one MCP request to backend, named
// and described as the OpenTelemetry conventions for MCP define client
// spans (telemetry.MCPSpan, the target as the backend names it), with
// mcp.protocol.version and the backend as switchboard.backend. A request
// whose method is not known is "mcp backend <name>".
func startSpan(ctx context.Context, backend, method, target, version string) (context.Context, trace.Span) {
	name := "mcp backend " + backend
	attrs := []attribute.KeyValue{attribute.String("switchboard.backend", backend)}
	if version != "" {
		attrs = append(attrs, attribute.String("mcp.protocol.version", version))
	}
	if method != "" {
		name, attrs = telemetry.MCPSpan(method, target, attrs)
	}
	return tracer.Start(ctx, name, spanKindClient, trace.WithAttributes(attrs...))
}

// describeRequest is the method and target of a go-sdk request: from the
// Modern headers (Mcp-Method, Mcp-Name) when it has them, else from its
// JSON-RPC body (a Legacy request; read only when spans are recorded).
func describeRequest(r *http.Request) (method, target string) {
	if m := r.Header.Get("Mcp-Method"); m != "" {
		return m, r.Header.Get("Mcp-Name")
	}
	if r.GetBody == nil {
		return "", ""
	}
	rc, err := r.GetBody()
	if err != nil {
		return "", ""
	}
	defer rc.Close()
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
			URI  string `json:"uri"`
		} `json:"params"`
	}
	_ = json.NewDecoder(rc).Decode(&msg)
	if msg.Params.Name != "" {
		return msg.Method, msg.Params.Name
	}
	return msg.Method, msg.Params.URI
}

// requestMethod is the JSON-RPC method of a go-sdk request, or "".
func requestMethod(r *http.Request) string {
	method, _ := describeRequest(r)
	return method
}
