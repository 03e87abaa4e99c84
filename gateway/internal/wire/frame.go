package wire

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
)

type responseEnvelope struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// Response renders a JSON-RPC response; a nil id becomes null. A result is
// spliced in as it is, so a large result costs one copy, not an encode: it
// is the gateway's own JSON or a backend's result, which the aggregator
// checked to be valid JSON and Shape rebuilt member by member.
func Response(id json.RawMessage, result json.RawMessage, rerr *Error) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	if rerr == nil && len(result) > 0 {
		out := make([]byte, 0, len(result)+len(id)+36)
		out = append(out, `{"jsonrpc":"2.0","id":`...)
		out = append(out, id...)
		out = append(out, `,"result":`...)
		out = append(out, result...)
		return append(out, '}')
	}
	if rerr == nil {
		rerr = NewError(CodeInternalError, "internal error: unencodable result")
	}
	b, err := json.Marshal(responseEnvelope{JSONRPC: "2.0", ID: id, Error: rerr})
	if err != nil {
		b, _ = json.Marshal(responseEnvelope{JSONRPC: "2.0", ID: id, Error: NewError(CodeInternalError, "internal error")})
	}
	return b
}

// Notification renders a JSON-RPC notification.
func Notification(method string, params any) []byte {
	b, _ := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  any    `json:"params"`
	}{"2.0", method, params})
	return b
}

// Request renders a server-to-client JSON-RPC request.
func Request(id json.RawMessage, method string, params json.RawMessage) []byte {
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params,omitempty"`
	}{"2.0", id, method, params})
	return b
}

// SSEEvent frames one JSON-RPC message as a server-sent event, on one
// data line. A line break in JSON is whitespace between tokens (inside a
// string it is escaped), and a backend's result is passed on byte for
// byte: each is sent as a space, or the line after it would be no field
// of the event and the client's reader would fail.
func SSEEvent(data []byte) []byte {
	out := make([]byte, 0, len(data)+24)
	out = append(out, "event: message\ndata: "...)
	start := len(out)
	out = append(out, data...)
	if bytes.ContainsAny(data, "\r\n") {
		for i, c := range out[start:] {
			if c == '\r' || c == '\n' {
				out[start+i] = ' '
			}
		}
	}
	return append(out, "\n\n"...)
}

// SSEPrime is an SSE priming event (2025-11-25): an id and no data. A
// client's reconnect names the last id it saw (Last-Event-ID), and go-sdk
// counts a reconnect that saw a new one as progress; retry, if positive,
// is how long the client waits before it reconnects.
func SSEPrime(id string, retry time.Duration) []byte {
	out := []byte("event: prime\nid: " + id + "\n")
	if retry > 0 {
		out = append(out, "retry: "+strconv.FormatInt(retry.Milliseconds(), 10)+"\n"...)
	}
	return append(out, "data: \n\n"...)
}

// SSEComment is an SSE comment line: a keep-alive, or a stream's preamble.
func SSEComment(text string) []byte { return []byte(": " + text + "\n\n") }
