package backend

import (
	"bytes"
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

// message is the parts of a JSON-RPC message the raw path reads; each is
// the raw JSON of that member, nil when absent.
type message struct {
	id, method, params, result, err []byte
}

// parseMessage splits a JSON-RPC message into its members. Bytes that
// are not UTF-8 (a Latin-1 description, a cut character) become U+FFFD
// first, as every JSON decoder reads them into a string: JSON allows
// nothing else, the members are passed on in protobuf string fields,
// which must hold UTF-8, and one such byte in a listing would otherwise
// fail every client's tools/list, not just hide one item.
func parseMessage(b []byte) (message, error) {
	if !utf8.Valid(b) {
		b = bytes.ToValidUTF8(b, []byte("\uFFFD"))
	}
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
			resultType, _ = rawjson.StringValue(m.Value)
		}
		return true
	})
	return isError, resultType
}
