package wire

import (
	"encoding/base64"
	"mime"
	"net/http"
	"strings"
)

// CheckHeader requires header to be present once and, once decoded, equal
// to want (-32020 otherwise).
func CheckHeader(h http.Header, header, want string) *Error {
	values := h.Values(header)
	if len(values) == 0 {
		return NewError(CodeHeaderMismatch, "header mismatch: missing "+header+" header")
	}
	if len(values) > 1 {
		return NewError(CodeHeaderMismatch, "header mismatch: repeated "+header+" header")
	}
	got, ok := DecodeHeaderValue(values[0])
	if !ok {
		return NewError(CodeHeaderMismatch, "header mismatch: malformed "+header+" header")
	}
	if got != want {
		return NewError(CodeHeaderMismatch, "header mismatch: "+header+" does not match the request body")
	}
	return nil
}

// DecodeHeaderValue undoes the =?base64?…?= form clients use for values
// that are not plain visible ASCII. Only a complete sentinel is decoded
// (anything else is a literal value), and its payload must be padded
// standard base64 of valid UTF-8.
func DecodeHeaderValue(v string) (string, bool) {
	if len(v) < len("=?base64??=") || !strings.HasPrefix(v, "=?base64?") || !strings.HasSuffix(v, "?=") {
		return v, true
	}
	b, err := base64.StdEncoding.Strict().DecodeString(v[len("=?base64?") : len(v)-len("?=")])
	if err != nil {
		return "", false
	}
	return string(b), true
}

// IsJSONContentType reports a Content-Type of application/json.
func IsJSONContentType(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

// AcceptsBoth reports an Accept header that lists JSON and SSE, as
// Streamable HTTP requires of a POST.
func AcceptsBoth(h http.Header) bool {
	json, sse := accepts(h)
	return json && sse
}

// AcceptsSSE reports an Accept header that admits text/event-stream.
func AcceptsSSE(h http.Header) bool {
	_, sse := accepts(h)
	return sse
}

func accepts(h http.Header) (jsonOK, sseOK bool) {
	for _, v := range h.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			switch mt {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				sseOK = true
			case "*/*":
				jsonOK, sseOK = true, true
			}
		}
	}
	return jsonOK, sseOK
}
