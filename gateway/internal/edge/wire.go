package edge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"unicode/utf8"
)

// JSON-RPC and MCP error codes the gateway emits. Only codes the spec
// defines are used.
const (
	codeParseError        = -32700
	codeInvalidRequest    = -32600
	codeMethodNotFound    = -32601
	codeInvalidParams     = -32602
	codeInternalError     = -32603
	codeResourceNotFound  = -32002 // Legacy (2025-11-25) only
	codeHeaderMismatch    = -32020
	codeMissingCapability = -32021
	codeUnsupportedVer    = -32022
)

// MCP _meta keys.
const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaServerInfo         = "io.modelcontextprotocol/serverInfo"
	metaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"
	metaLogLevel           = "io.modelcontextprotocol/logLevel"
)

// rpcError is a JSON-RPC error on its way to the client.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return strconv.Itoa(e.Code) + " " + e.Message }

func newError(code int, msg string) *rpcError { return &rpcError{Code: code, Message: msg} }

// modernStatus is the HTTP status of a Modern error response: the spec fixes
// 404 for an unknown method and 400 for malformed requests; other errors
// travel as JSON-RPC errors in a 200 response, as go-sdk servers send them,
// so that clients see the message instead of a bare HTTP failure.
func (e *rpcError) modernStatus() int {
	switch e.Code {
	case codeMethodNotFound:
		return http.StatusNotFound
	case codeParseError, codeInvalidRequest, codeInvalidParams, codeHeaderMismatch, codeMissingCapability, codeUnsupportedVer:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// message is one incoming JSON-RPC message.
type message struct {
	// ID is the raw id; nil for a notification.
	ID     json.RawMessage
	Method string
	Params json.RawMessage
	// IsResponse marks a client's JSON-RPC response (Legacy only); Reply
	// then holds its result or error member as {"result":…} or {"error":…}.
	IsResponse bool
	Reply      object
}

func (m *message) isNotification() bool { return m.ID == nil && !m.IsResponse }

// parseMessage decodes one JSON-RPC message. On failure it still returns
// whatever id it could read, so the error keeps it.
// maxNestingDepth bounds how deeply a request may nest arrays and objects.
// Backends built on go-sdk refuse more than 1000 levels, and a request
// nests its arguments a few levels below the top; answering here keeps a
// client's malformed input from looking like a backend failure.
const maxNestingDepth = 512

// nestingExceeds reports whether the JSON text in body (already known to be
// valid) nests arrays and objects deeper than limit.
func nestingExceeds(body []byte, limit int) bool {
	depth, inString, escaped := 0, false, false
	for _, c := range body {
		switch {
		case inString:
			if escaped {
				escaped = false
			} else if c == '\\' {
				escaped = true
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			if depth > limit {
				return true
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return false
}

func parseMessage(body []byte) (*message, json.RawMessage, *rpcError) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		return nil, nil, newError(codeInvalidRequest, "batch requests are not supported")
	}
	// JSON text is UTF-8 (RFC 8259 §8.1). encoding/json would silently
	// replace bad bytes, and protobuf refuses them later as an internal
	// error; reject them here as the client's mistake they are.
	if !utf8.Valid(body) {
		return nil, nil, newError(codeParseError, "parse error: body is not valid UTF-8")
	}
	if !json.Valid(body) {
		return nil, nil, newError(codeParseError, "parse error: body is not valid JSON")
	}
	if nestingExceeds(body, maxNestingDepth) {
		return nil, nil, newError(codeParseError, fmt.Sprintf("parse error: JSON nested deeper than %d levels", maxNestingDepth))
	}
	// Decode into a map, not a struct: JSON-RPC member names are
	// case-sensitive, and encoding/json matches struct fields without case.
	var members object
	if err := json.Unmarshal(body, &members); err != nil || members == nil {
		// Valid JSON that is not an object (null, a number, a string).
		return nil, nil, newError(codeInvalidRequest, "invalid request: body is not a JSON-RPC request object")
	}
	var raw struct {
		JSONRPC string
		ID      json.RawMessage
		Method  *string
		Params  json.RawMessage
		Result  json.RawMessage
		Error   json.RawMessage
	}
	raw.ID, raw.Params, raw.Result, raw.Error = members["id"], members["params"], members["result"], members["error"]
	if v, ok := members["jsonrpc"]; ok && json.Unmarshal(v, &raw.JSONRPC) != nil {
		raw.JSONRPC = ""
	}
	if v, ok := members["method"]; ok {
		var m string
		if json.Unmarshal(v, &m) != nil {
			return nil, validID(raw.ID), newError(codeInvalidRequest, `invalid request: "method" must be a string`)
		}
		raw.Method = &m
	}
	id := validID(raw.ID)
	if raw.JSONRPC != "2.0" {
		return nil, id, newError(codeInvalidRequest, `invalid request: "jsonrpc" must be "2.0"`)
	}
	if raw.ID != nil && id == nil {
		return nil, nil, newError(codeInvalidRequest, "invalid request: id must be a string or a number")
	}
	if raw.Method == nil {
		if id != nil && (raw.Result != nil || raw.Error != nil) {
			reply := object{}
			if raw.Error != nil {
				reply["error"] = raw.Error
			} else {
				reply["result"] = raw.Result
			}
			return &message{ID: id, IsResponse: true, Reply: reply}, id, nil
		}
		return nil, id, newError(codeInvalidRequest, `invalid request: "method" is required`)
	}
	if *raw.Method == "" {
		return nil, id, newError(codeInvalidRequest, `invalid request: "method" must not be empty`)
	}
	if len(raw.Params) > 0 && !bytes.Equal(raw.Params, []byte("null")) {
		if t := bytes.TrimLeft(raw.Params, " \t\r\n"); len(t) == 0 || t[0] != '{' {
			return nil, id, newError(codeInvalidParams, "invalid params: params must be an object")
		}
	} else {
		raw.Params = nil
	}
	return &message{ID: id, Method: *raw.Method, Params: raw.Params}, id, nil
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

type responseEnvelope struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// encodeResponse renders a response; a nil id becomes null.
func encodeResponse(id json.RawMessage, result json.RawMessage, rerr *rpcError) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, err := json.Marshal(responseEnvelope{JSONRPC: "2.0", ID: id, Result: result, Error: rerr})
	if err != nil {
		b, _ = json.Marshal(responseEnvelope{JSONRPC: "2.0", ID: id, Error: newError(codeInternalError, "internal error: unencodable result")})
	}
	return b
}

// writeJSON writes one JSON-RPC response as application/json.
func writeJSON(w http.ResponseWriter, status int, id json.RawMessage, result json.RawMessage, rerr *rpcError) {
	body := encodeResponse(id, result, rerr)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-cache, no-transform")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// object is a JSON object whose values stay raw, so MCP fields the gateway
// does not model pass through untouched.
type object map[string]json.RawMessage

func (o object) set(key string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	o[key] = b
}

func (o object) encode() json.RawMessage {
	b, _ := json.Marshal(map[string]json.RawMessage(o))
	return b
}

// decodeObject parses JSON text into an object; empty text is an empty object.
func decodeObject(text string) (object, error) {
	o := object{}
	if text == "" {
		return o, nil
	}
	if err := json.Unmarshal([]byte(text), &o); err != nil {
		return nil, err
	}
	if o == nil {
		o = object{}
	}
	return o, nil
}
