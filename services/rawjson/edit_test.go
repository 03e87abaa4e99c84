package rawjson

import (
	"encoding/json"
	"testing"
)

func TestMapMembers(t *testing.T) {
	drop := func(m Member) ([]byte, bool) {
		switch string(m.Name) {
		case "drop":
			return nil, false
		case "swap":
			return []byte(`"new"`), true
		}
		return m.Value, true
	}
	cases := []struct{ in, want string }{
		{`{}`, `{}`},
		{`{"drop":1}`, `{}`},
		{`{ "a" : [1, 2] , "drop":{"x":1},"swap":0,"dr\u006fp":2, "z":"}" }`, `{"a":[1, 2],"swap":"new","z":"}"}`},
		{`{"drop":1,"b":true}`, `{"b":true}`},
	}
	for _, tc := range cases {
		got, err := MapMembers([]byte(tc.in), drop)
		if err != nil || string(got) != tc.want || !json.Valid(got) {
			t.Errorf("MapMembers(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{`[]`, `{"a":1`, `"x"`, ``, `{"a":1}x`} {
		if _, err := MapMembers([]byte(bad), drop); err != ErrNotObject {
			t.Errorf("MapMembers(%q) error %v, want ErrNotObject", bad, err)
		}
	}
}

func TestFilterElements(t *testing.T) {
	notX := func(v []byte) bool { s, _ := StringValue(v); return s != "x" }
	cases := []struct{ in, want string }{
		{`[]`, `[]`},
		{`["x"]`, `[]`},
		{` [ "a" , "x", "\u0078", {"k":"x"}, "b" ] `, `["a",{"k":"x"},"b"]`},
	}
	for _, tc := range cases {
		got, err := FilterElements([]byte(tc.in), notX)
		if err != nil || string(got) != tc.want {
			t.Errorf("FilterElements(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{`{}`, `[1,`, `"x"`, ``} {
		if _, err := FilterElements([]byte(bad), notX); err != ErrNotArray {
			t.Errorf("FilterElements(%q) error %v, want ErrNotArray", bad, err)
		}
	}
}

func TestStringValue(t *testing.T) {
	cases := []struct {
		in   string
		want string
		ok   bool
	}{
		{`"abc"`, "abc", true},
		{`""`, "", true},
		{`"a\"b\u00e9"`, `a"bé`, true},
		{`"abc`, "", false},
		{`"a"b"`, "", false},
		{`1`, "", false},
		{``, "", false},
		{`"`, "", false},
		{`"\x"`, "", false},
	}
	for _, tc := range cases {
		got, ok := StringValue([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("StringValue(%s) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
