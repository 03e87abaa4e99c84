package wire

import (
	"encoding/base64"
	"mime"
	"net/http"
	"strconv"
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

// sessionHeaders say which session and revision a request belongs to.
var sessionHeaders = [...]string{"Mcp-Session-Id", "Mcp-Protocol-Version"}

// RepeatedSessionHeader names a header of sessionHeaders that h holds
// more than once, or is "". Which of two values counts would be a guess,
// and a proxy in front may have read the other one, so such a request is
// refused rather than served in either session or revision.
func RepeatedSessionHeader(h http.Header) string {
	for _, name := range sessionHeaders {
		if len(h[name]) > 1 {
			return name
		}
	}
	return ""
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

// CheckBodyType is the answer (HTTP 415) to a POST whose body the
// gateway does not read as it was sent, or nil: a Content-Type other
// than application/json, or any Content-Encoding but identity (RFC 9110,
// 8.4). No coding is decoded, so a compressed body would otherwise be
// misreported as malformed JSON, and one merely labelled compressed
// would be read otherwise than its sender, or a proxy that decodes it,
// meant.
func CheckBodyType(h http.Header) *Error {
	if !IsJSONContentType(h) {
		return NewError(CodeInvalidRequest, "Content-Type must be application/json")
	}
	for _, v := range h.Values("Content-Encoding") {
		for coding := range strings.SplitSeq(v, ",") {
			if coding = strings.TrimSpace(coding); coding != "" && !strings.EqualFold(coding, "identity") {
				return NewError(CodeInvalidRequest, "Content-Encoding is not supported: send the body unencoded")
			}
		}
	}
	return nil
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

// accepts reads an Accept header for the two media types MCP answers
// with. Each takes the quality of the most specific range that names it
// (RFC 9110, 12.5.1), and one of quality 0 is not acceptable: a client
// that says application/json;q=0 refuses JSON, whatever */* says.
func accepts(h http.Header) (jsonOK, sseOK bool) {
	var json, sse acceptance
	for _, v := range h.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			// A quality that is not one (RFC 9110 12.4.2: from 0 to 1)
			// is ignored, as an unreadable one is.
			q := 1.0
			if v, ok := params["q"]; ok {
				if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 && f <= 1 {
					q = f
				}
			}
			switch mt {
			case "application/json":
				json.rank(2, q)
			case "application/*":
				json.rank(1, q)
			case "text/event-stream":
				sse.rank(2, q)
			case "text/*":
				sse.rank(1, q)
			case "*/*":
				json.rank(0, q)
				sse.rank(0, q)
			}
		}
	}
	return json.ok(), sse.ok()
}

// acceptance is the quality an Accept header gives a media type: that of
// the most specific range naming it (2 the type itself, 1 its type's
// wildcard, 0 */*), the greatest if it is named more than once so.
type acceptance struct {
	seen     bool
	specific int
	quality  float64
}

func (a *acceptance) rank(specific int, quality float64) {
	if !a.seen || specific > a.specific || (specific == a.specific && quality > a.quality) {
		a.seen, a.specific, a.quality = true, specific, quality
	}
}

func (a acceptance) ok() bool { return a.seen && a.quality > 0 }
