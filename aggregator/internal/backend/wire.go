package backend

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// The raw path reads JSON-RPC messages without decoding them into Go
// values: it finds the spans of the few top-level members it needs (id,
// method, params, result, error) and hands the result on as the very bytes
// the backend sent. These helpers are deliberately small: they locate
// values, json.Valid checks what is passed on.

// errMalformedMessage: the backend sent something that is not a JSON-RPC
// message.
var errMalformedMessage = errors.New("malformed JSON-RPC message from the backend")

// appendJSONString appends s as a JSON string, escaped as encoding/json
// does (invalid UTF-8 becomes U+FFFD).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipString returns the index just past the JSON string starting at b[i]
// (which is '"'), or -1.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// skipValue returns the index just past the JSON value starting at b[i]
// (no leading space), or -1. It checks only the nesting of brackets and
// strings, not the grammar.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end := skipString(b, i)
				if end < 0 {
					return -1
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	default:
		j := i
		for j < len(b) && !isSpace(b[j]) && b[j] != ',' && b[j] != '}' && b[j] != ']' {
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}

// eachMember calls f with the raw key (without quotes, still escaped) and
// the raw value of every member of the JSON object b, in order, until f
// returns false. It reports false when b is not an object.
func eachMember(b []byte, f func(key, value []byte) bool) bool {
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
		end := skipString(b, i)
		if end < 0 {
			return false
		}
		key := b[i+1 : end-1]
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipSpace(b, i+1)
		vend := skipValue(b, i)
		if vend < 0 {
			return false
		}
		if !f(key, b[i:vend]) {
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

// message is the parts of a JSON-RPC message the raw path reads; each is
// the raw JSON of that member, nil when absent.
type message struct {
	id, method, params, result, err []byte
}

// parseMessage splits a JSON-RPC message into its members. Keys with
// escapes are unescaped first (no real peer sends them).
func parseMessage(b []byte) (message, error) {
	var m message
	ok := eachMember(b, func(key, value []byte) bool {
		if bytes.IndexByte(key, '\\') >= 0 {
			var k string
			if json.Unmarshal(append(append([]byte{'"'}, key...), '"'), &k) != nil {
				return true
			}
			key = []byte(k)
		}
		switch string(key) {
		case "id":
			m.id = value
		case "method":
			m.method = value
		case "params":
			m.params = value
		case "result":
			m.result = value
		case "error":
			m.err = value
		}
		return true
	})
	if !ok {
		return message{}, errMalformedMessage
	}
	return m, nil
}

// isNotification: a message with a method and no id.
func (m message) isNotification() bool { return m.method != nil && m.id == nil }

// isRequest: a message with a method and an id (a server-to-client request).
func (m message) isRequest() bool { return m.method != nil && m.id != nil }

// methodIs compares the message's method with name without decoding it.
func (m message) methodIs(name string) bool {
	return len(m.method) == len(name)+2 && string(m.method[1:len(m.method)-1]) == name
}

// resultFacts reads the two members of a result the API mirrors: isError
// and resultType ("" when absent).
func resultFacts(result []byte) (isError bool, resultType string) {
	eachMember(result, func(key, value []byte) bool {
		switch string(key) {
		case "isError":
			isError = string(value) == "true"
		case "resultType":
			_ = json.Unmarshal(value, &resultType)
		}
		return true
	})
	return isError, resultType
}
