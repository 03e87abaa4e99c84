package rawjson

import (
	"encoding/json"
	"errors"
)

// ErrNotArray: the text is not one JSON array.
var ErrNotArray = errors.New("not a JSON array")

// MapMembers returns a copy of the object b in which every member passes
// through f: f returns the member's new value (JSON text; m.Value to keep
// it) and whether to keep the member at all. Names are copied as written,
// values f leaves alone byte for byte. It fails with ErrNotObject when b is
// not an object.
func MapMembers(b []byte, f func(m Member) (value []byte, keep bool)) ([]byte, error) {
	out := make([]byte, 0, len(b)+16)
	out = append(out, '{')
	n := 0
	if !Each(b, func(m Member) bool {
		v, keep := f(m)
		if !keep {
			return true
		}
		if n > 0 {
			out = append(out, ',')
		}
		n++
		out = append(out, m.RawName...)
		out = append(out, ':')
		out = append(out, v...)
		return true
	}) {
		return nil, ErrNotObject
	}
	return append(out, '}'), nil
}

// FilterElements returns a copy of the array b holding the elements keep
// accepts, each as written, in order. It fails with ErrNotArray when b is
// not an array.
func FilterElements(b []byte, keep func(value []byte) bool) ([]byte, error) {
	out := make([]byte, 0, len(b))
	out = append(out, '[')
	n := 0
	if !Elements(b, func(v []byte) bool {
		if !keep(v) {
			return true
		}
		if n > 0 {
			out = append(out, ',')
		}
		n++
		out = append(out, v...)
		return true
	}) {
		return nil, ErrNotArray
	}
	return append(out, ']'), nil
}

// StringValue returns the text of v when v is one JSON string, escapes
// decoded (through encoding/json only when it holds any). Like StringEnd
// it reads bytes and text alike; text without escapes is not copied.
func StringValue[T ~string | ~[]byte](v T) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	end, escaped := StringEnd(v, 0)
	if end != len(v) {
		return "", false
	}
	if !escaped {
		return string(v[1 : len(v)-1]), true
	}
	var s string
	if json.Unmarshal([]byte(v), &s) != nil {
		return "", false
	}
	return s, true
}
