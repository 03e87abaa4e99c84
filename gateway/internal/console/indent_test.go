package console

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

// TestIndentedIsJSONIndent: below its bound, indented writes what
// json.Indent does.
func TestIndentedIsJSONIndent(t *testing.T) {
	for _, s := range []string{
		`{}`, `[]`, `{ }`, `[ ]`, `0`, `"x"`, `null`,
		`{"content":[{"type":"text","text":"a \"quoted\" {not} [json], \\ \u00e9"}],"isError":false}`,
		` { "a" : [ 1 , 2.5e3 , -0 , true , null , { } , [ ] , [ { } ] ] , "b" : { "c" : { "d" : "" } } } `,
		"{\"tab\":\"\\t\",\"é\":\"日本\",\"nested\":[[[[1]]]]}",
	} {
		var want bytes.Buffer
		if err := json.Indent(&want, []byte(s), "", "  "); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if got := indented(s, 1<<20); got != strings.TrimRight(want.String(), " ") {
			t.Errorf("indented(%s) =\n%s\nwant\n%s", s, got, want.String())
		}
	}
}

// TestShownDeepNestingIsBounded shows a result nested as deep as JSON
// allows: the page's text is cut to its bound, and showing it allocates
// a small multiple of that, where indenting it whole took 1.5 GB.
func TestShownDeepNestingIsBounded(t *testing.T) {
	const depth = 9999
	result := strings.Repeat("[", depth) + strings.Repeat("]", depth)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	out := shown(result, true)
	runtime.ReadMemStats(&after)
	if !out.Cut || len(out.Text) > maxShownBytes || !strings.HasPrefix(out.Text, "[\n  [\n    [") {
		t.Errorf("shown: %d bytes, cut %v, starting %.20q", len(out.Text), out.Cut, out.Text)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("showing a %d-byte result allocated %d KiB", len(result), alloc>>10)
	}
}
