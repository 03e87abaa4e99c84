package rawjson

import (
	"encoding/json"
	"testing"
)

func TestElements(t *testing.T) {
	cases := []struct {
		in    string
		want  []string
		isArr bool
	}{
		{`[]`, nil, true},
		{` [ ] `, nil, true},
		{`[1]`, []string{`1`}, true},
		{`[ {"a":[1,2]} , "x,]" ,null,[[]] ]`, []string{`{"a":[1,2]}`, `"x,]"`, `null`, `[[]]`}, true},
		{`[1,]`, []string{`1`}, false},
		{`[1 2]`, []string{`1`}, false},
		{`[1`, []string{`1`}, false},
		{`{"a":1}`, nil, false},
		{`[1] x`, []string{`1`}, false},
		{``, nil, false},
	}
	for _, tc := range cases {
		var got []string
		ok := Elements([]byte(tc.in), func(v []byte) bool { got = append(got, string(v)); return true })
		if ok != tc.isArr || len(got) != len(tc.want) {
			t.Errorf("Elements(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.isArr)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("Elements(%q)[%d] = %q, want %q", tc.in, i, got[i], tc.want[i])
			}
		}
	}
	// Stopping early still reports an array.
	n := 0
	if !Elements([]byte(`[1,2,3]`), func([]byte) bool { n++; return n < 2 }) || n != 2 {
		t.Errorf("early stop: n=%d", n)
	}
}

func TestWithMember(t *testing.T) {
	cases := []struct{ in, name, value, want string }{
		{`{"name":"a","x-vendor":{"k":[1, 2]},"b":1}`, "name", `"p_a"`, `{"name":"p_a","x-vendor":{"k":[1, 2]},"b":1}`},
		{`{ "b" : 1 , "name" : "a" }`, "name", `"p_a"`, `{"b":1,"name":"p_a"}`},
		{`{"name":"a","name":"b"}`, "name", `"c"`, `{"name":"c"}`},
		{`{"b":1}`, "name", `"c"`, `{"b":1,"name":"c"}`},
		{`{}`, "name", `"c"`, `{"name":"c"}`},
		{`{"na\u006de":"a"}`, "name", `"c"`, `{"name":"c"}`},
		{`{"a":1}`, "q\"\n", `1`, `{"a":1,"q\"\n":1}`},
	}
	for _, tc := range cases {
		got, err := WithMember([]byte(tc.in), tc.name, []byte(tc.value))
		if err != nil || string(got) != tc.want {
			t.Errorf("WithMember(%s, %q) = %s, %v; want %s", tc.in, tc.name, got, err, tc.want)
		}
		if !json.Valid(got) {
			t.Errorf("WithMember(%s) is not JSON: %s", tc.in, got)
		}
	}
	for _, bad := range []string{`[]`, `{"a":1`, `"x"`, ``} {
		if _, err := WithMember([]byte(bad), "name", []byte(`1`)); err == nil {
			t.Errorf("WithMember(%q) did not fail", bad)
		}
	}
}
