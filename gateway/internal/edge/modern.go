package edge

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// modernMethods are the client requests MCP 2026-07-28 defines. Everything
// else, including the removed initialize, ping, logging/setLevel and
// resources/subscribe, is "method not found".
var modernMethods = map[string]bool{
	"server/discover": true, "subscriptions/listen": true, "completion/complete": true,
	"tools/list": true, "tools/call": true, "resources/list": true, "resources/templates/list": true,
	"resources/read": true, "prompts/list": true, "prompts/get": true,
}

// serveModern validates a Modern request against every wire rule, then
// dispatches it.
func (g *Gateway) serveModern(w http.ResponseWriter, c *call, msg *message, rec *requestRecord, span trace.Span) {
	if msg.IsResponse {
		// Modern has no server-to-client requests, so there is nothing a
		// client may answer.
		rec.outcome = "rejected"
		writeJSON(w, http.StatusBadRequest, nil, nil, newError(codeInvalidRequest, "invalid request: MCP 2026-07-28 clients must not send responses"))
		return
	}
	if msg.isNotification() {
		if rerr := checkHeader(c.r, "Mcp-Method", msg.Method); rerr != nil {
			rec.outcome = "rejected"
			writeJSON(w, http.StatusBadRequest, nil, nil, rerr)
			return
		}
		// The only client notification 2026-07-28 knows is
		// notifications/cancelled, which is meaningful on stdio only:
		// over HTTP, closing the response stream cancels.
		rec.outcome = "ok"
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if rerr := g.validateModern(c); rerr != nil {
		g.respond(w, c, rec, nil, rerr)
		return
	}
	span.SetAttributes(attribute.String("mcp.protocol.version", c.version))
	if c.method == "subscriptions/listen" {
		g.serveListen(w, c, rec)
		return
	}
	result, rerr := g.dispatch(c)
	g.respond(w, c, rec, result, rerr)
}

// validateModern checks _meta, the protocol version, the mirrored headers
// and the method, in the order the spec's error codes imply.
func (g *Gateway) validateModern(c *call) *rpcError {
	meta, ok := metaObject(c.params)
	if !ok {
		return newError(codeInvalidParams, "invalid params: params._meta must be an object")
	}
	version, _ := metaString(c.params, metaProtocolVersion)
	if version == "" {
		return newError(codeInvalidParams, `invalid params: missing or invalid _meta "`+metaProtocolVersion+`"`)
	}
	// A header that disagrees with the body is a HeaderMismatch even when
	// the version itself is unsupported: the request is malformed first.
	if rerr := checkHeader(c.r, "Mcp-Protocol-Version", version); rerr != nil {
		return rerr
	}
	if version != versionModern {
		return unsupportedVersion(version)
	}
	c.version = version
	if err := json.Unmarshal(meta[metaClientCapabilities], &c.clientCaps); err != nil || c.clientCaps == nil {
		return newError(codeInvalidParams, `invalid params: missing or invalid _meta "`+metaClientCapabilities+`"`)
	}
	if rerr := checkHeader(c.r, "Mcp-Method", c.method); rerr != nil {
		return rerr
	}
	if !modernMethods[c.method] {
		return newError(codeMethodNotFound, "method not found: "+c.method)
	}
	switch c.method {
	case "tools/call", "prompts/get":
		if name, ok := stringParam(c.params, "name"); ok {
			return checkHeader(c.r, "Mcp-Name", name)
		}
	case "resources/read":
		if uri, ok := stringParam(c.params, "uri"); ok {
			return checkHeader(c.r, "Mcp-Name", uri)
		}
	}
	return nil
}

// checkHeader requires header to be present and, once decoded, equal to
// want.
func checkHeader(r *http.Request, header, want string) *rpcError {
	values := r.Header.Values(header)
	if len(values) == 0 {
		return newError(codeHeaderMismatch, "header mismatch: missing "+header+" header")
	}
	if len(values) > 1 {
		return newError(codeHeaderMismatch, "header mismatch: repeated "+header+" header")
	}
	got, ok := decodeHeaderValue(values[0])
	if !ok {
		return newError(codeHeaderMismatch, "header mismatch: malformed "+header+" header")
	}
	if got != want {
		return newError(codeHeaderMismatch, "header mismatch: "+header+" does not match the request body")
	}
	return nil
}

// decodeHeaderValue undoes the =?base64?…?= form clients use for values
// that are not plain visible ASCII. Only a complete sentinel is decoded
// (anything else is a literal value), and its payload must be padded
// standard base64 of valid UTF-8.
func decodeHeaderValue(v string) (string, bool) {
	if len(v) < len("=?base64??=") || !strings.HasPrefix(v, "=?base64?") || !strings.HasSuffix(v, "?=") {
		return v, true
	}
	b, err := base64.StdEncoding.Strict().DecodeString(v[len("=?base64?") : len(v)-len("?=")])
	if err != nil {
		return "", false
	}
	return string(b), true
}

// stringParam reads a string member of params.
func stringParam(params object, key string) (string, bool) {
	raw, ok := params[key]
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}
