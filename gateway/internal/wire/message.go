package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/services/rawjson"
)

// Message is one incoming JSON-RPC message.
type Message struct {
	// ID is the raw id; nil for a notification.
	ID     json.RawMessage
	Method string
	// Params are the request's params members; empty, never nil, when the
	// request had none.
	Params Object
	// IsResponse marks a client's JSON-RPC response (Legacy only); Reply
	// then holds its result or error member as {"result":…} or {"error":…}.
	IsResponse bool
	Reply      Object
}

// IsNotification reports a message without id that is not a response.
func (m *Message) IsNotification() bool { return m.ID == nil && !m.IsResponse }

// MaxNestingDepth bounds how deeply a request may nest arrays and objects.
// Backends built on go-sdk refuse more than 1000 levels, and a request
// nests its arguments a few levels below the top; answering here keeps a
// client's malformed input from looking like a backend failure.
const MaxNestingDepth = 512

// Parse decodes one JSON-RPC message, and the id to echo in its answer.
// A message that names a member twice in any of its objects is refused
// (repeatedMember): what Parse accepts has one reading. On failure it
// still returns whatever id it could read, so the error response keeps
// it, and, once the body is read as a JSON object, the message as far as
// it was read: its id as sent, its method if a string and its params if
// an object, each only if read one way.
func Parse(body []byte) (*Message, json.RawMessage, *Error) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		return nil, nil, NewError(CodeInvalidRequest, "batch requests are not supported")
	}
	// JSON text is UTF-8 (RFC 8259 §8.1). encoding/json would silently
	// replace bad bytes, and protobuf refuses them later as an internal
	// error; reject them here as the client's mistake they are.
	if !utf8.Valid(body) {
		return nil, nil, NewError(CodeParseError, "parse error: body is not valid UTF-8")
	}
	// One pass bounds the nesting and finds a member named twice.
	unique := rawjson.Unique(body, MaxNestingDepth)
	if errors.Is(unique, rawjson.ErrTooDeep) {
		return nil, nil, NewError(CodeParseError, fmt.Sprintf("parse error: JSON nested deeper than %d levels", MaxNestingDepth))
	}
	if !json.Valid(body) {
		return nil, nil, NewError(CodeParseError, "parse error: body is not valid JSON")
	}
	// Split into members, not decode into a struct: JSON-RPC member names
	// are case-sensitive, and encoding/json matches struct fields without
	// case. Values stay subslices of the body.
	members, err := parseObject(body)
	if err != nil {
		// Valid JSON that is not an object (null, a number, a string).
		return nil, nil, NewError(CodeInvalidRequest, "invalid request: body is not a JSON-RPC request object")
	}
	rawID, params, result, rpcErr := members["id"], members["params"], members["result"], members["error"]
	id := validID(rawID)
	// read is the message as far as it is read, returned with a refusal
	// too: the edge records a refused request by its method and params,
	// and its id as sent tells it from a notification.
	read := &Message{ID: rawID, Params: Object{}}
	var method *string
	if v, ok := members["method"]; ok {
		var m string
		if json.Unmarshal(v, &m) == nil {
			method, read.Method = &m, m
		}
	}
	paramsObject := true
	if len(params) > 0 && !bytes.Equal(params, []byte("null")) {
		p, err := parseObject(params)
		if paramsObject = err == nil; paramsObject {
			read.Params = p
		}
	}
	if repeated, ok := errors.AsType[*rawjson.DuplicateError](unique); ok {
		// Read two ways: the edge's checks (rawjson.Get) take a repeated
		// member's first value, encoding/json, go-sdk and backends its
		// last. Read by none, so that everything past here reads the one
		// member there is (capabilities, _meta, arguments alike); nor is
		// what repeats returned as read.
		switch {
		case repeated.Pointer == "" && repeated.Name == "id":
			id = nil // which one would be a guess
		case repeated.Pointer == "" && repeated.Name == "method":
			read.Method = ""
		case repeated.Pointer == "" && repeated.Name == "params", repeated.Pointer == "/params":
			read.Params = Object{}
		}
		return read, id, repeatedMember(repeated)
	}
	if _, ok := members["method"]; ok && method == nil {
		return read, id, NewError(CodeInvalidRequest, `invalid request: "method" must be a string`)
	}
	if jsonrpc, _ := members.String("jsonrpc"); jsonrpc != "2.0" {
		return read, id, NewError(CodeInvalidRequest, `invalid request: "jsonrpc" must be "2.0"`)
	}
	if rawID != nil && id == nil {
		return read, nil, NewError(CodeInvalidRequest, "invalid request: id must be a string or a number")
	}
	if method == nil {
		if id != nil && (result != nil || rpcErr != nil) {
			reply := Object{}
			if rpcErr != nil {
				reply["error"] = rpcErr
			} else {
				reply["result"] = result
			}
			return &Message{ID: id, IsResponse: true, Reply: reply, Params: Object{}}, id, nil
		}
		return read, id, NewError(CodeInvalidRequest, `invalid request: "method" is required`)
	}
	if *method == "" {
		return read, id, NewError(CodeInvalidRequest, `invalid request: "method" must not be empty`)
	}
	if !paramsObject {
		return read, id, InvalidParams("params must be an object")
	}
	return read, id, nil
}

// repeatedMember is the refusal of a message whose object at
// d.Pointer names d.Name twice: -32602 within its params, else -32600
// (the envelope, a response's result or error).
func repeatedMember(d *rawjson.DuplicateError) *Error {
	if d.Pointer == "/params" || strings.HasPrefix(d.Pointer, "/params/") {
		return InvalidParams(d.Error())
	}
	return NewError(CodeInvalidRequest, "invalid request: "+d.Error())
}

// validID returns id if it is a JSON string or number, else nil.
func validID(id json.RawMessage) json.RawMessage {
	if len(id) == 0 {
		return nil
	}
	switch c := id[0]; {
	case c == '"', c == '-', c >= '0' && c <= '9':
		return id
	}
	return nil
}

// What a long-lived stream may keep of its request: its id (Detach), and
// its _meta (the edge checks it). Generous for any real client (an id is
// a number or a short string; _meta holds a version, client info,
// capabilities and trace context), small enough that the streams a
// replica allows (gateway.streams.maxOpen) hold little. What else a
// stream keeps it parses and bounds itself (a listen's filter).
const (
	MaxStreamIDBytes   = 256
	MaxStreamMetaBytes = 16 << 10
)

// Detach makes m independent of the request body it was parsed from:
// its id and the params members named in keep are copied, and every
// other member is dropped. A parsed message's values are slices of the
// body, so a long-lived stream that kept m would keep the whole body
// (up to http.maxBodyBytes, whatever padding a client put in it) for as
// long as it is open.
// It refuses, with -32602, a message whose id is over MaxStreamIDBytes:
// a client could otherwise pad it to the body's size, once per stream.
func (m *Message) Detach(keep ...string) *Error {
	if len(m.ID) > MaxStreamIDBytes {
		return InvalidParams(fmt.Sprintf("the id of a streaming request is longer than %d bytes", MaxStreamIDBytes))
	}
	m.ID = bytes.Clone(m.ID)
	params := make(Object, len(keep))
	for _, k := range keep {
		if v, ok := m.Params[k]; ok {
			params[k] = bytes.Clone(v)
		}
	}
	m.Params, m.Reply = params, nil
	return nil
}
