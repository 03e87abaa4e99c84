package paramheader

import (
	"errors"
	"testing"
)

const schema = `{"type":"object","properties":{
	"region":{"type":"string","x-mcp-header":"Region"},
	"count":{"type":"integer","x-mcp-header":"Count"},
	"dry":{"type":"boolean","x-mcp-header":"Dry-Run"},
	"plain":{"type":"string"},
	"target":{"type":"object","properties":{"zone":{"type":"string","x-mcp-header":"Zone"}}},
	"bad":{"type":"string","x-mcp-header":""}
}}`

func TestExtract(t *testing.T) {
	got := Extract([]byte(schema))
	want := []struct{ path, header, key string }{
		{"count", "Count", "count"},
		{"dry", "Dry-Run", "dry-run"},
		{"region", "Region", "region"},
		{"target.zone", "Zone", "zone"},
	}
	if len(got) != len(want) {
		t.Fatalf("bindings %+v", got)
	}
	for i, w := range want {
		path := got[i].Path[0]
		for _, p := range got[i].Path[1:] {
			path += "." + p
		}
		if path != w.path || got[i].Header != w.header || got[i].Key != w.key || got[i].FullName() != Prefix+w.header {
			t.Errorf("binding %d = %+v, want %+v", i, got[i], w)
		}
	}
	for _, none := range []string{``, `{}`, `{"type":"object"}`, `not json`, `{"properties":{"a":{"x-mcp-header":7}}}`} {
		if b := Extract([]byte(none)); b != nil {
			t.Errorf("Extract(%q) = %+v", none, b)
		}
	}
}

func TestCheck(t *testing.T) {
	bindings := Extract([]byte(schema))
	cases := []struct {
		name    string
		args    string
		headers map[string]string
		// bad is the header named by the mismatch; "" means the check passes.
		bad string
	}{
		{"all mirrored", `{"region":"us-west1","count":3,"dry":true,"target":{"zone":"b"}}`,
			map[string]string{"region": "us-west1", "count": "3", "dry-run": "true", "zone": "b"}, ""},
		{"nothing bound present, nothing sent", `{"plain":"x"}`, map[string]string{}, ""},
		{"no arguments at all", ``, nil, ""},
		{"null argument, no header", `{"region":null}`, nil, ""},
		{"unknown extra header is not checked", `{}`, map[string]string{"other": "x"}, ""},
		{"missing header", `{"region":"us-west1"}`, map[string]string{}, "Mcp-Param-Region"},
		{"empty header counts as missing", `{"region":"us-west1"}`, map[string]string{"region": ""}, "Mcp-Param-Region"},
		{"mismatched value", `{"region":"us-west1"}`, map[string]string{"region": "eu-west1"}, "Mcp-Param-Region"},
		{"values are case-sensitive", `{"region":"us-west1"}`, map[string]string{"region": "US-WEST1"}, "Mcp-Param-Region"},
		{"header for an absent argument", `{}`, map[string]string{"region": "us-west1"}, "Mcp-Param-Region"},
		{"header for a null argument", `{"region":null}`, map[string]string{"region": "x"}, "Mcp-Param-Region"},
		{"nested mirrored", `{"target":{"zone":"a"}}`, map[string]string{"zone": "a"}, ""},
		{"nested missing", `{"target":{"zone":"a"}}`, nil, "Mcp-Param-Zone"},
		{"nested parent absent", `{"target":{}}`, map[string]string{"zone": "a"}, "Mcp-Param-Zone"},
		{"base64 decoded before comparing", `{"region":"Zürich"}`, map[string]string{"region": "=?base64?WsO8cmljaA==?="}, ""},
		{"base64 of another value", `{"region":"Zürich"}`, map[string]string{"region": "=?base64?QmVybg==?="}, "Mcp-Param-Region"},
		{"invalid base64", `{"region":"x"}`, map[string]string{"region": "=?base64?***?="}, "Mcp-Param-Region"},
		{"integer as number", `{"count":42}`, map[string]string{"count": "42.0"}, ""},
		{"integer mismatch", `{"count":42}`, map[string]string{"count": "43"}, "Mcp-Param-Count"},
		{"integer header not a number", `{"count":42}`, map[string]string{"count": "forty-two"}, "Mcp-Param-Count"},
		{"fraction is not allowed", `{"count":1.5}`, map[string]string{"count": "1.5"}, "Mcp-Param-Count"},
		{"unsafe integer is not allowed", `{"count":9007199254740993}`, map[string]string{"count": "9007199254740993"}, "Mcp-Param-Count"},
		{"boolean", `{"dry":false}`, map[string]string{"dry-run": "false"}, ""},
		{"boolean mismatch", `{"dry":false}`, map[string]string{"dry-run": "0"}, "Mcp-Param-Dry-Run"},
		{"object is not a primitive", `{"region":{"a":1}}`, map[string]string{"region": "x"}, "Mcp-Param-Region"},
	}
	for _, tc := range cases {
		err := Check(bindings, []byte(tc.args), tc.headers)
		var mm *MismatchError
		switch {
		case tc.bad == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.bad != "" && (!errors.As(err, &mm) || mm.Header != tc.bad):
			t.Errorf("%s: err %v, want a mismatch of %s", tc.name, err, tc.bad)
		}
	}
}

// TestHeadersSatisfyCheck: what Headers computes for a backend passes the
// same rules, whatever the values.
func TestHeadersSatisfyCheck(t *testing.T) {
	bindings := Extract([]byte(schema))
	for _, args := range []string{
		`{"region":"us-west1","count":3,"dry":true,"target":{"zone":"b"}}`,
		`{"region":"Zürich","count":-7}`,
		`{"region":" padded "}`,
		`{"region":"=?base64?abc?="}`,
		`{"region":"tab\there"}`,
		`{}`,
	} {
		full := Headers(bindings, []byte(args))
		byKey := map[string]string{}
		for _, b := range bindings {
			if v, ok := full[b.FullName()]; ok {
				byKey[b.Key] = v
			}
		}
		if err := Check(bindings, []byte(args), byKey); err != nil {
			t.Errorf("%s: headers %v fail the check: %v", args, full, err)
		}
	}
	if h := Headers(bindings, []byte(`{"region":"Zürich"}`)); h["Mcp-Param-Region"] != "=?base64?WsO8cmljaA==?=" {
		t.Errorf("non-ASCII value encoded as %q", h["Mcp-Param-Region"])
	}
}

func TestEncodeDecode(t *testing.T) {
	for in, want := range map[string]string{
		"plain":        "plain",
		"":             "",
		"Zürich":       "=?base64?WsO8cmljaA==?=",
		" lead":        "=?base64?IGxlYWQ=?=",
		"=?base64?x?=": "=?base64?PT9iYXNlNjQ/eD89?=",
		"line\nbreak":  "=?base64?bGluZQpicmVhaw==?=",
	} {
		got := EncodeValue(in)
		if got != want {
			t.Errorf("EncodeValue(%q) = %q, want %q", in, got, want)
		}
		if back, ok := DecodeValue(got); !ok || back != in {
			t.Errorf("DecodeValue(%q) = %q, %v", got, back, ok)
		}
	}
}
