package telemetry

import (
	"go.opentelemetry.io/otel/attribute"

	"github.com/switchboard-mcp/switchboard/services/textcut"
)

// MaxSpanText bounds what a client writes into a span: a tool's name, a
// URI, a request id, cut to this many bytes (on a character boundary).
// A span is exported whole in a batch with others' spans, which a
// collector refuses past its message bound (4 MiB by default): one
// request's megabyte of tool name would cost every span in its batch.
const MaxSpanText = 256

// TextAttribute is a string attribute of client-chosen text, cut to
// MaxSpanText bytes.
func TextAttribute(key, value string) attribute.KeyValue {
	return attribute.String(key, textcut.Prefix(value, MaxSpanText))
}

// MCPSpan is what the OpenTelemetry conventions for MCP
// (semantic-conventions-genai v0.1.0, status Development) make of an MCP
// request's span, server (the gateway's) or client (the aggregator's to
// a backend): its name, "{mcp.method.name} {target}", the target being
// the tool or prompt named (a resource's URI is an attribute, never the
// name: its cardinality is unbounded), and attrs with mcp.method.name,
// gen_ai.tool.name and gen_ai.operation.name (execute_tool), or
// gen_ai.prompt.name, or mcp.resource.uri added. target is what the
// method's MCPTargetParam names, "" for none; it is the client's to
// choose, so it is cut to MaxSpanText bytes (TextAttribute).
func MCPSpan(method, target string, attrs []attribute.KeyValue) (string, []attribute.KeyValue) {
	method, target = textcut.Prefix(method, MaxSpanText), textcut.Prefix(target, MaxSpanText)
	name := method
	attrs = append(attrs, attribute.String("mcp.method.name", method))
	if target == "" {
		return name, attrs
	}
	switch method {
	case "tools/call":
		name += " " + target
		attrs = append(attrs, attribute.String("gen_ai.tool.name", target), attribute.String("gen_ai.operation.name", "execute_tool"))
	case "prompts/get":
		name += " " + target
		attrs = append(attrs, attribute.String("gen_ai.prompt.name", target))
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		attrs = append(attrs, attribute.String("mcp.resource.uri", target))
	}
	return name, attrs
}

// MCPTargetParam is the request param that holds a method's span target:
// "name" for tools/call and prompts/get, "uri" for the resource methods,
// "" for the rest.
func MCPTargetParam(method string) string {
	switch method {
	case "tools/call", "prompts/get":
		return "name"
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		return "uri"
	}
	return ""
}
