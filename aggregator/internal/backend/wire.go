package backend

import (
	"encoding/json"
	"errors"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/services/rawjson"
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

// message is the parts of a JSON-RPC message the raw path reads; each is
// the raw JSON of that member, nil when absent.
type message struct {
	id, method, params, result, err []byte
}

// parseMessage splits a JSON-RPC message into its members.
func parseMessage(b []byte) (message, error) {
	var m message
	ok := rawjson.Each(b, func(mem rawjson.Member) bool {
		switch string(mem.Name) {
		case "id":
			m.id = mem.Value
		case "method":
			m.method = mem.Value
		case "params":
			m.params = mem.Value
		case "result":
			m.result = mem.Value
		case "error":
			m.err = mem.Value
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
	rawjson.Each(result, func(m rawjson.Member) bool {
		switch string(m.Name) {
		case "isError":
			isError = string(m.Value) == "true"
		case "resultType":
			_ = json.Unmarshal(m.Value, &resultType)
		}
		return true
	})
	return isError, resultType
}
