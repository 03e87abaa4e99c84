package wire

import (
	"encoding/json"
	"errors"
)

// member is one member of a JSON object as it appears in the text: its
// decoded key and its raw value.
type member struct {
	key string
	// rawKey is the key as written, quotes included, so that copying a
	// member never re-encodes its name.
	rawKey []byte
	value  []byte
}

var errNotObject = errors.New("not a JSON object")

// members splits the text of a JSON object into its members without
// decoding the values, so a result can be reshaped by splicing. It checks
// the object's structure, not the values' contents (the aggregator already
// checked that the text is valid JSON).
func members(b []byte) ([]member, error) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, errNotObject
	}
	out := make([]member, 0, 8)
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return out, checkEnd(b, i+1)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return nil, errNotObject
		}
		end, escaped := skipString(b, i)
		if end < 0 {
			return nil, errNotObject
		}
		keyStart := i
		key := string(b[i+1 : end-1])
		if escaped {
			if json.Unmarshal(b[i:end], &key) != nil {
				return nil, errNotObject
			}
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return nil, errNotObject
		}
		start := skipSpace(b, i+1)
		stop := skipValue(b, start)
		if stop < 0 {
			return nil, errNotObject
		}
		out = append(out, member{key: key, rawKey: b[keyStart:end], value: b[start:stop]})
		i = skipSpace(b, stop)
		if i >= len(b) {
			return nil, errNotObject
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return out, checkEnd(b, i+1)
		default:
			return nil, errNotObject
		}
	}
}

func checkEnd(b []byte, i int) error {
	if skipSpace(b, i) != len(b) {
		return errNotObject
	}
	return nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i], and
// whether it holds escapes; -1 if it does not end.
func skipString(b []byte, i int) (int, bool) {
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

// skipValue returns the index just past the value starting at b[i], or -1.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		end, _ := skipString(b, i)
		return end
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, _ := skipString(b, j)
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
	for j < len(b) {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			if j == i {
				return -1
			}
			return j
		}
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// parseObject splits the text of a JSON object, already known to be valid
// JSON, into an Object whose values are subslices of b: one pass, no copies.
// As with encoding/json, a repeated key keeps its last value.
func parseObject(b []byte) (Object, error) {
	ms, err := members(b)
	if err != nil {
		return nil, err
	}
	o := make(Object, len(ms))
	for _, m := range ms {
		o[m.key] = m.value
	}
	return o, nil
}
