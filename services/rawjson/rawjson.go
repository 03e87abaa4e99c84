// Package rawjson reads JSON objects without decoding them: it finds the
// members of an object and hands back each name and value as it is written,
// so that a message can be routed, checked and reshaped while every byte a
// peer sent passes on untouched. The gateway reads requests and reshapes
// results with it, the aggregator reads its backends' answers.
//
// It checks the structure of an object (braces, strings, separators, the
// end of the text), not the grammar of the values inside: callers check
// with json.Valid whatever they hand on.
package rawjson

import (
	"encoding/json"
	"errors"
)

// ErrNotObject: the text is not one JSON object.
var ErrNotObject = errors.New("not a JSON object")

// Member is one member of an object as it is written.
type Member struct {
	// Name is the member's name, unescaped: a subslice of the text unless
	// the name held escapes.
	Name []byte
	// RawName is the name as written, quotes included, for copying the
	// member without re-encoding it.
	RawName []byte
	// Value is the member's value as written.
	Value []byte
}

// Each calls f with every member of the object b, in order, until f returns
// false. It reports whether b is an object (as far as it was read).
func Each(b []byte, f func(Member) bool) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return skipSpace(b, i+1) == len(b)
	}
	for i < len(b) {
		if b[i] != '"' {
			return false
		}
		end, escaped := StringEnd(b, i)
		if end < 0 {
			return false
		}
		m := Member{RawName: b[i:end], Name: b[i+1 : end-1]}
		if escaped {
			var name string
			if json.Unmarshal(m.RawName, &name) != nil {
				return false
			}
			m.Name = []byte(name)
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipSpace(b, i+1)
		vend := SkipValue(b, i)
		if vend < 0 {
			return false
		}
		m.Value = b[i:vend]
		if !f(m) {
			return true
		}
		i = skipSpace(b, vend)
		if i >= len(b) {
			return false
		}
		if b[i] == '}' {
			return skipSpace(b, i+1) == len(b)
		}
		if b[i] != ',' {
			return false
		}
		i = skipSpace(b, i+1)
	}
	return false
}

// Members returns every member of the object b.
func Members(b []byte) ([]Member, error) {
	out := make([]Member, 0, 8)
	if !Each(b, func(m Member) bool { out = append(out, m); return true }) {
		return nil, ErrNotObject
	}
	return out, nil
}

// Object returns the members of b by name, values as subslices of b: one
// pass, no copies. As with encoding/json, a repeated name keeps its last
// value.
func Object(b []byte) (map[string]json.RawMessage, error) {
	out := make(map[string]json.RawMessage, 8)
	if !Each(b, func(m Member) bool { out[string(m.Name)] = m.Value; return true }) {
		return nil, ErrNotObject
	}
	return out, nil
}

// Get returns the value of the member named name (the first one), reading
// no further than it.
func Get(b []byte, name string) ([]byte, bool) {
	var value []byte
	found := false
	Each(b, func(m Member) bool {
		if string(m.Name) == name {
			value, found = m.Value, true
			return false
		}
		return true
	})
	return value, found
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// StringEnd returns the index just past the JSON string starting at b[i]
// (a '"'), and whether it holds escapes; -1 if it does not end. It reads
// bytes and text alike, so a scanner of either need not copy.
func StringEnd[T ~string | ~[]byte](b T, i int) (int, bool) {
	escaped := false
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j + 1, escaped
		}
	}
	return -1, false
}

// SkipValue returns the index just past the value starting at b[i] (no
// leading space), or -1. It checks only the nesting of brackets and
// strings, not the grammar.
func SkipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		end, _ := StringEnd(b, i)
		return end
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, _ := StringEnd(b, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\r' && b[j] != '\n' {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// StartsObject reports whether the first value in b is an object: for text
// already known to be valid JSON, whether it is one.
func StartsObject(b []byte) bool {
	i := skipSpace(b, 0)
	return i < len(b) && b[i] == '{'
}
