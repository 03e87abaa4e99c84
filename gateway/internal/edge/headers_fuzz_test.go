package edge

import (
	"encoding/base64"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
)

// encodeHeaderValueForTest is the client side of the Mcp-Name and
// Mcp-Param-* rule (MCP 2026-07-28, streamable HTTP): a value that is not
// plain visible ASCII, has leading or trailing space, or looks like the
// sentinel itself travels as =?base64?<base64 of its UTF-8>?=.
func encodeHeaderValueForTest(s string) string {
	plain := !strings.HasPrefix(s, "=?base64?") && !strings.HasPrefix(s, " ") && !strings.HasSuffix(s, " ")
	for i := 0; plain && i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			plain = false
		}
	}
	if plain {
		return s
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?="
}

// FuzzHeaderValue checks the decoding of mirrored header values: it never
// panics, a decoded sentinel is exactly the base64 payload, anything not
// in sentinel form is taken literally, and every value a conforming client
// can send (encoded as above, padded or not) decodes to what it mirrors and
// passes checkHeader, while a different body value is a -32020 mismatch.
// Unpadded base64 and a prefix without the closing ?= are not pinned down:
// the spec's form is padded base64 between the two markers.
func FuzzHeaderValue(f *testing.F) {
	for _, s := range []string{
		"echo", "alpha_region", "file:///a.txt", "grüß", "Zürich", " leading", "trailing ", "tab\there",
		"line\r\nX-Injected: 1", "=?base64?ZWNobw==?=", "=?base64?", "=?base64??=", "=?base64?ZWNobw?=",
		"=?base64?!!!?=", "=?BASE64?ZWNobw==?=", "=?base64?ZWNobw==", "\x00", "\xff\xfe", "日本語", "",
		"=?base64?" + strings.Repeat("QUFB", 2000) + "?=",
	} {
		f.Add(s, s)
	}
	f.Add("echo", "ech0")

	f.Fuzz(func(t *testing.T, value, other string) {
		// Arbitrary raw header values: decode must not panic, must take
		// anything without the sentinel prefix literally, and may only
		// turn a complete sentinel into its base64 payload.
		got, ok := wire.DecodeHeaderValue(value)
		switch {
		case !strings.HasPrefix(value, "=?base64?"):
			if !ok || got != value {
				t.Fatalf("plain value %s decoded to %s, %v; want it unchanged", short(value), short(got), ok)
			}
		case ok && got != value:
			payload, closed := strings.CutSuffix(strings.TrimPrefix(value, "=?base64?"), "?=")
			if !closed {
				t.Fatalf("unterminated sentinel %s decoded to %s", short(value), short(got))
			}
			want, err := base64.StdEncoding.DecodeString(payload)
			if err != nil {
				want, err = base64.RawStdEncoding.DecodeString(payload)
			}
			if err != nil || string(want) != got {
				t.Fatalf("sentinel %s decoded to %s, want %s (%v)", short(value), short(got), short(string(want)), err)
			}
		}

		// The client's encodings of an arbitrary string round-trip.
		for _, enc := range []string{
			encodeHeaderValueForTest(value),
			"=?base64?" + base64.StdEncoding.EncodeToString([]byte(value)) + "?=",
		} {
			if dec, ok := wire.DecodeHeaderValue(enc); !ok || dec != value {
				t.Fatalf("decode(%s) = %s, %v; want %s", short(enc), short(dec), ok, short(value))
			}
			r := httptest.NewRequest("POST", "/mcp", nil)
			r.Header["Mcp-Name"] = []string{enc}
			if rerr := wire.CheckHeader(r.Header, "Mcp-Name", value); rerr != nil {
				t.Fatalf("Mcp-Name %s for body name %s: %v", short(enc), short(value), rerr)
			}
			if other != value {
				if rerr := wire.CheckHeader(r.Header, "Mcp-Name", other); rerr == nil || rerr.Code != wire.CodeHeaderMismatch {
					t.Fatalf("Mcp-Name %s accepted for body name %s: %v", short(enc), short(other), rerr)
				}
			}
			// A repeated header is ambiguous, so it is a mismatch too.
			r.Header["Mcp-Name"] = []string{enc, enc}
			if rerr := wire.CheckHeader(r.Header, "Mcp-Name", value); rerr == nil || rerr.Code != wire.CodeHeaderMismatch {
				t.Fatalf("repeated Mcp-Name accepted: %v", rerr)
			}
		}
	})
}

// short quotes s for a failure message, eliding the middle of long values.
func short(s string) string {
	if len(s) > 80 {
		s = s[:40] + "…" + s[len(s)-40:]
	}
	return strconv.Quote(s)
}
