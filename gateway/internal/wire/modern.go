package wire

import (
	"encoding/json"
	"net/http"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

// Meta reads params._meta: ok is false when it is absent or not an object.
func Meta(params Object) (Object, bool) { return params.Object("_meta") }

// ModernRequest is what the per-request _meta of a valid Modern request
// declares.
type ModernRequest struct {
	Version string
	// ClientCaps is the capabilities object as the client sent it.
	ClientCaps json.RawMessage
}

// CheckModern applies every Modern wire rule to a request, in the order
// the spec's error codes imply: _meta (-32602), the version header against
// the body (-32020) before the version itself (-32022), the client's
// capabilities (-32602), Mcp-Method (-32020), the method set (-32601), the
// tasks extension a tasks method needs (-32021), and Mcp-Name against the
// request's target (-32020). meta is params._meta
// as Meta read it (nil when it is absent or not an object).
func CheckModern(h http.Header, method string, params, meta Object) (ModernRequest, *Error) {
	var req ModernRequest
	if meta == nil {
		return req, InvalidParams("params._meta must be an object")
	}
	version, _ := meta.String(mcpspec.MetaProtocolVersion)
	if version == "" {
		return req, InvalidParams(`missing or invalid _meta "` + mcpspec.MetaProtocolVersion + `"`)
	}
	// A header that disagrees with the body is a HeaderMismatch even when
	// the version itself is unsupported: the request is malformed first.
	if rerr := CheckHeader(h, "Mcp-Protocol-Version", version); rerr != nil {
		return req, rerr
	}
	if version != mcpspec.Modern {
		return req, UnsupportedVersion(version)
	}
	caps := meta[mcpspec.MetaClientCapabilities]
	if !IsObjectText(caps) {
		return req, InvalidParams(`missing or invalid _meta "` + mcpspec.MetaClientCapabilities + `"`)
	}
	if rerr := CheckHeader(h, "Mcp-Method", method); rerr != nil {
		return req, rerr
	}
	if !mcpspec.Defined(mcpspec.EraModern, method) {
		return req, MethodNotFound(method)
	}
	if mcpspec.Methods[method].Task && !DeclaresTasks(caps) {
		// Before the task id is looked at: without the extension a client
		// has no tasks, whatever it names.
		return req, MissingTasksCapability(method + " needs the client capability extensions[\"" + TasksExtension + "\"]")
	}
	if target := mcpspec.Methods[method].Target; target != "" {
		if value, ok := params.String(target); ok {
			if rerr := CheckHeader(h, "Mcp-Name", value); rerr != nil {
				return req, rerr
			}
		}
	}
	return ModernRequest{Version: version, ClientCaps: caps}, nil
}

// MaxParamHeaders bounds the Mcp-Param-* headers of one request (the
// aggregator's bound too).
const MaxParamHeaders = 64

// ParamHeaders returns the Mcp-Param-* headers of a request, keyed by the
// lower-cased name after the prefix, values as sent (the aggregator checks
// them against the tool's x-mcp-header arguments after authorization); the
// map is empty, not nil, when there are none. A repeated header keeps its
// values joined by NUL, which never matches a value. A value that is not
// UTF-8 (HTTP admits any byte past ASCII) is malformed: no argument
// matches it, and it cannot be forwarded.
func ParamHeaders(h http.Header) (map[string]string, *Error) {
	out := map[string]string{}
	for name, values := range h {
		if len(name) <= len("Mcp-Param-") || !equalFoldASCII(name[:len("Mcp-Param-")], "Mcp-Param-") {
			continue
		}
		if len(out) == MaxParamHeaders {
			return nil, NewError(CodeHeaderMismatch, "header mismatch: too many Mcp-Param-* headers")
		}
		v := values[0]
		for _, more := range values[1:] {
			v += "\x00" + more
		}
		if !utf8.ValidString(v) {
			return nil, NewError(CodeHeaderMismatch, "header mismatch: malformed "+name+" header")
		}
		out[toLowerASCII(name[len("Mcp-Param-"):])] = v
	}
	return out, nil
}

func equalFoldASCII(a, b string) bool {
	return len(a) == len(b) && toLowerASCII(a) == toLowerASCII(b)
}

func toLowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
