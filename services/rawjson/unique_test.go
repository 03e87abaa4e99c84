package rawjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestUnique(t *testing.T) {
	dup := func(name, pointer string) error { return &DuplicateError{Name: name, Pointer: pointer} }
	cases := []struct {
		what string
		in   string
		want error // nil, a *DuplicateError, or a sentinel
	}{
		// Not duplicates.
		{"empty object", `{}`, nil},
		{"scalars", ` "x" `, nil},
		{"distinct names", `{"a":1,"b":2,"ab":3,"":4}`, nil},
		{"case differs", `{"description":"a","Description":"b","DESCRIPTION":"c"}`, nil},
		{"one name in sibling objects", `{"a":{"x":1},"b":{"x":2},"x":{"x":{"x":3}}}`, nil},
		{"one name in objects of an array", `[{"a":1},{"a":2},{"a":{"a":3}}]`, nil},
		{"repeated strings are values", `{"a":"a","b":"a","c":["a","a"]}`, nil},
		{"a name that looks escaped in a value", `{"a":"\u0061","\u0062":"a"}`, nil},
		{"names with quotes and backslashes", `{"a\"":1,"a\\":2,"a":3}`, nil},
		{"a tool", `{"name":"echo","description":"Echo.","inputSchema":{"type":"object","properties":{"text":{"type":"string"},"n":{"type":"integer"}},"required":["text","n"]},"annotations":{"readOnlyHint":true},"_meta":{"name":"x"}}`, nil},
		{"many members", manyMembers(200, -1), nil},
		{"whitespace everywhere", " \n{ \"a\" : [ { \"b\" : 1 } , 2 ] ,\t\"c\" : null }\r\n", nil},

		// Duplicates.
		{"top level", `{"name":"a","description":"x","description":"y"}`, dup("description", "")},
		{"escaped spelling", `{"a":1,"\u0061":2}`, dup("a", "")},
		{"both escaped", `{"\u0062":1,"\u0062":2}`, dup("b", "")},
		{"escape of a longer name", `{"description":"x","descr\u0069ption":"y"}`, dup("description", "")},
		{"nested in inputSchema", `{"name":"t","inputSchema":{"type":"object","properties":{"q":{"type":"string"},"q":{"type":"integer"}}}}`, dup("q", "/inputSchema/properties")},
		{"deep", `{"inputSchema":{"properties":{"a":{"properties":{"b":{"type":"string","type":"integer"}}}}}}`, dup("type", "/inputSchema/properties/a/properties/b")},
		{"in an array of objects", `{"icons":[{"src":"a"},{"src":"b","src":"c"}]}`, dup("src", "/icons/1")},
		{"in _meta", `{"name":"t","_meta":{"k":1,"k":2}}`, dup("k", "/_meta")},
		{"in annotations", `{"annotations":{"readOnlyHint":true,"readOnlyHint":false}}`, dup("readOnlyHint", "/annotations")},
		{"top-level array", `[1,{"a":1,"a":1}]`, dup("a", "/1")},
		{"pointer escapes", `{"a/b":{"~":{"x":1,"x":2}}}`, dup("x", "/a~1b/~0")},
		{"not UTF-8 twice", "{\"\xff\":1,\"\xfe\":2}", dup("\ufffd", "")},
		{"past the set threshold", manyMembers(200, 150), dup("m0150", "")},
		{"late in a wide object", manyMembers(40, 20), dup("m0020", "")},

		// Neither.
		{"unterminated", `{"a":1`, ErrMalformed},
		{"trailing text", `{"a":1} x`, ErrMalformed},
		{"trailing comma", `{"a":1,}`, ErrMalformed},
		{"array trailing comma", `[1,]`, ErrMalformed},
		{"missing colon", `{"a" 1}`, ErrMalformed},
		{"bare name", `{a:1}`, ErrMalformed},
		{"bad escape in a name", `{"\x":1}`, ErrMalformed},
		{"empty", ``, ErrMalformed},
		{"missing value", `{"a":}`, ErrMalformed},
	}
	for _, tc := range cases {
		err := Unique([]byte(tc.in), 512)
		var want *DuplicateError
		switch {
		case errors.As(tc.want, &want):
			var got *DuplicateError
			if !errors.As(err, &got) || *got != *want || !errors.Is(err, ErrDuplicateMember) {
				t.Errorf("%s: Unique(%.80s) = %v, want %v", tc.what, tc.in, err, tc.want)
			}
		case err != tc.want:
			t.Errorf("%s: Unique(%.80s) = %v, want %v", tc.what, tc.in, err, tc.want)
		}
	}
}

// manyMembers is an object of n members m0000..., member dupAt written
// twice (none for -1).
func manyMembers(n, dupAt int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"m%04d":{"v":%d}`, i, i)
		if i == dupAt {
			fmt.Fprintf(&b, `,"m%04d":0`, i)
		}
	}
	b.WriteByte('}')
	return b.String()
}

func TestUniqueDepth(t *testing.T) {
	nest := func(n int, open, close string) string {
		return strings.Repeat(open, n) + "1" + strings.Repeat(close, n)
	}
	for _, tc := range []struct {
		in   string
		want error
	}{
		{nest(8, "[", "]"), nil},
		{nest(9, "[", "]"), ErrTooDeep},
		{nest(8, `{"a":`, "}"), nil},
		{nest(9, `{"a":`, "}"), ErrTooDeep},
		{`{"a":` + nest(7, "[", "]") + "}", nil},
		{`{"a":` + nest(8, "[", "]") + "}", ErrTooDeep},
	} {
		if err := Unique([]byte(tc.in), 8); err != tc.want {
			t.Errorf("Unique(%s, 8) = %v, want %v", tc.in, err, tc.want)
		}
	}
}

// The report quotes bounded parts of the text: it is logged.
func TestUniqueReportIsBounded(t *testing.T) {
	long := strings.Repeat("é", 100) // 200 bytes
	in := `{` + strings.Repeat(`"`+long+`":{`, 10) + `"` + long + `":1,"` + long + `":2` + strings.Repeat("}", 10) + `}`
	var d *DuplicateError
	if err := Unique([]byte(in), 512); !errors.As(err, &d) {
		t.Fatalf("Unique = %v", err)
	}
	if len(d.Name) > maxReportedName || len(d.Pointer) > maxReportedPointer || !strings.HasPrefix(long, d.Name) || !strings.HasPrefix(d.Pointer, "/é") {
		t.Fatalf("report not bounded: name %d bytes, pointer %d bytes: %v", len(d.Name), len(d.Pointer), d)
	}
	if len(d.Error()) > maxReportedName+maxReportedPointer+64 {
		t.Fatalf("message of %d bytes", len(d.Error()))
	}
}

// hasDuplicateMember is the reference: encoding/json's tokens, a set of
// names per open object.
func hasDuplicateMember(in []byte) (bool, error) {
	type frame struct {
		names   map[string]bool // nil for an array
		wantKey bool
	}
	dec := json.NewDecoder(bytes.NewReader(in))
	var stack []*frame
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].names != nil {
			stack[n-1].wantKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if n := len(stack); n > 0 && stack[n-1].wantKey {
			if name, ok := tok.(string); ok {
				if stack[n-1].names[name] {
					return true, nil
				}
				stack[n-1].names[name] = true
				stack[n-1].wantKey = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{names: map[string]bool{}, wantKey: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueDone()
		default:
			valueDone()
		}
	}
}

// FuzzUnique: on any valid JSON text, Unique finds a duplicate exactly when
// encoding/json's tokens repeat a name within one object, and nothing
// else goes wrong.
func FuzzUnique(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `[{"a":[{"b":1,"b":2}]}]`, `{"a":{"a":{"a":1}}}`,
		`{"A":1,"a":2}`, `{"\ud800":1,"\udc00":2}`, "{\"\xff\":1,\"\xfe\":2}", manyMembers(20, 18), `"s"`, `[[],{}]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) {
			_ = Unique([]byte(in), 512)
			return
		}
		want, err := hasDuplicateMember([]byte(in))
		if err != nil {
			t.Skip("the reference cannot read it")
		}
		got := Unique([]byte(in), 10000)
		if want != errors.Is(got, ErrDuplicateMember) || (!want && got != nil) {
			t.Fatalf("Unique(%q) = %v; encoding/json sees a duplicate: %v", in, got, want)
		}
	})
}

// BenchmarkUnique checks a typical tool definition (1.1 KB).
func BenchmarkUnique(b *testing.B) {
	def := []byte(`{"name":"create_issue","title":"Create an issue","description":"Create a new issue in a GitHub repository. Use it when the user asks to file a bug or a feature request; the issue is opened in the repository given, with the labels and assignees given.",
"inputSchema":{"type":"object","properties":{"owner":{"type":"string","description":"Repository owner (user or organisation)."},"repo":{"type":"string","description":"Repository name."},
"title":{"type":"string","description":"Issue title."},"body":{"type":"string","description":"Issue body, in Markdown."},"labels":{"type":"array","items":{"type":"string"},"description":"Labels to apply."},
"assignees":{"type":"array","items":{"type":"string"},"description":"Logins to assign."},"milestone":{"type":"integer","description":"Milestone number."}},"required":["owner","repo","title"],"additionalProperties":false},
"outputSchema":{"type":"object","properties":{"number":{"type":"integer"},"url":{"type":"string","format":"uri"}},"required":["number","url"]},
"annotations":{"title":"Create issue","readOnlyHint":false,"destructiveHint":false,"idempotentHint":false,"openWorldHint":true},"_meta":{"vendor/x":{"k":[1,2,3]}}}`)
	if err := Unique(def, 512); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(def)))
	b.ReportAllocs()
	for b.Loop() {
		if err := Unique(def, 512); err != nil {
			b.Fatal(err)
		}
	}
}
