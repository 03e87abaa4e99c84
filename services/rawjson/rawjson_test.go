package rawjson

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func TestEachAndGet(t *testing.T) {
	b := []byte(` { "a\u0062" : [1, {"x":"}"}] , "c":null,"d":"\"q\"" } `)
	var names []string
	if !Each(b, func(m Member) bool { names = append(names, string(m.Name)+"="+string(m.Value)); return true }) {
		t.Fatal("Each refused an object")
	}
	if len(names) != 3 || names[0] != `ab=[1, {"x":"}"}]` || names[1] != "c=null" || names[2] != `d="\"q\""` {
		t.Fatalf("members %q", names)
	}
	ms, _ := Members(b)
	if string(ms[0].RawName) != `"a\u0062"` {
		t.Fatalf("raw name %s", ms[0].RawName)
	}
	if v, ok := Get(b, "c"); !ok || string(v) != "null" {
		t.Fatalf("Get c = %s %v", v, ok)
	}
	if _, ok := Get(b, "zz"); ok {
		t.Fatal("Get of a missing member")
	}
	for _, bad := range []string{``, `[]`, `"x"`, `{`, `{"a"}`, `{"a":1,}`, `{"a":1}x`, `{"a":"unterminated}`, `{"a":[1,2}`, `{a:1}`} {
		if _, err := Members([]byte(bad)); err == nil {
			t.Errorf("Members(%q) accepted", bad)
		}
	}
}

// FuzzObject: on any valid JSON text in valid UTF-8 (the gateway refuses
// other bodies first), the one-pass member split agrees
// with encoding/json: the same keys (last one wins) with the same values.
func FuzzObject(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"a":2}`, `{"\u0041":"x","b":[1,{"c":"}"}],"d":null}`, `{"é":{"x":true}, "y" : -1.5e3 }`, `[]`, `"s"`, `{"a":"\""}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) || !utf8.ValidString(in) {
			return
		}
		got, err := Object([]byte(in))
		var want map[string]json.RawMessage
		if json.Unmarshal([]byte(in), &want) != nil || want == nil {
			if err == nil {
				t.Fatalf("Object(%q) accepted what is not an object", in)
			}
			return
		}
		if err != nil || len(got) != len(want) {
			t.Fatalf("Object(%q) = %v, %v; want %d members", in, got, err, len(want))
		}
		for k, v := range want {
			if string(got[k]) != string(v) {
				t.Fatalf("Object(%q)[%q] = %s, want %s", in, k, got[k], v)
			}
		}
	})
}
