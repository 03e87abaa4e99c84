package mcpspec

import (
	"encoding/json"
	"strings"

	"github.com/switchboard-mcp/switchboard/services/rawjson"
)

// InputNeeds are the client capabilities an input request (a server's
// elicitation/create, sampling/createMessage or roots/list, asked of the
// client) needs declared before it may be sent, each as a path:
// "elicitation.form" or "elicitation.url" by the elicitation's mode,
// "sampling" and, for a request offering tools or asking for context,
// "sampling.tools" or "sampling.context"; "roots". Nil for a method that
// is not an input request.
func InputNeeds(method string, params json.RawMessage) []string {
	switch method {
	case "elicitation/create":
		// Any mode but a form's needs more than forms: fail closed.
		if mode, ok := member(params, "mode"); ok && stringValue(mode) != "form" {
			return []string{"elicitation.url"}
		}
		return []string{"elicitation.form"}
	case "sampling/createMessage":
		needs := []string{"sampling"}
		if declaredValue(params, "tools") || declaredValue(params, "toolChoice") {
			needs = append(needs, "sampling.tools")
		}
		if ctx, ok := member(params, "includeContext"); ok && stringValue(ctx) != "none" {
			needs = append(needs, "sampling.context")
		}
		return needs
	case "roots/list":
		return []string{"roots"}
	}
	return nil
}

// Declares reports whether caps, a ClientCapabilities object, declares the
// capability at path (InputNeeds). An empty elicitation object declares
// form mode, as 2025-11-25 reads one from clients that predate modes; a
// null value declares nothing. A member named twice counts as its last,
// as JSON decoders read it.
func Declares(caps json.RawMessage, path string) bool {
	top, sub, _ := strings.Cut(path, ".")
	v, ok := member(caps, top)
	if !ok {
		return false
	}
	if sub == "" {
		return true
	}
	fields, err := rawjson.Object(v)
	if err != nil {
		return false
	}
	if sub == "form" && top == "elicitation" && len(fields) == 0 {
		return true
	}
	_, ok = member(v, sub)
	return ok
}

// member is obj's member name, when it is there and not null.
func member(obj json.RawMessage, name string) (json.RawMessage, bool) {
	fields, err := rawjson.Object(obj)
	if err != nil {
		return nil, false
	}
	v, ok := fields[name]
	return v, ok && string(v) != "null"
}

// stringValue is v decoded as a JSON string (escapes and all), "" when it
// is not one.
func stringValue(v json.RawMessage) string {
	var s string
	_ = json.Unmarshal(v, &s)
	return s
}

// declaredValue reports whether obj has member name, not null.
func declaredValue(obj json.RawMessage, name string) bool {
	_, ok := member(obj, name)
	return ok
}
