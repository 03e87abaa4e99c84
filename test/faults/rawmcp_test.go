package faults

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/switchboard-mcp/switchboard/test/mcpraw"
)

// Raw Modern MCP requests, for the tests that look at members go-sdk's
// client does not show as sent (ttlMs, cacheScope, requestState).

// modernCaps are the client capabilities of the raw requests: enough for
// the confirm behaviour's elicitation.
var modernCaps = json.RawMessage(`{"elicitation":{"form":{}}}`)

// rpcReply is a JSON-RPC response and its HTTP status.
type rpcReply struct {
	status int
	Result map[string]json.RawMessage
	Error  *mcpraw.Error
}

// modernRPC sends one Modern request of method to url; name is the
// Mcp-Name (tool name or URI) when the method needs one, params the
// members after _meta, as JSON text.
func modernRPC(t *testing.T, url, method, name, params string) rpcReply {
	t.Helper()
	var members map[string]json.RawMessage
	if err := json.Unmarshal([]byte("{"+params+"}"), &members); err != nil {
		t.Fatalf("%s %s: params %s: %v", method, name, params, err)
	}
	p := make(map[string]any, len(members))
	for k, v := range members {
		p[k] = v
	}
	c := &mcpraw.Client{URL: url, Capabilities: modernCaps, Name: "faults", HTTP: &http.Client{Timeout: pollDeadline}}
	a, err := c.Send(t.Context(), method, name, p)
	if err != nil {
		t.Fatalf("%s %s: %v", method, name, err)
	}
	r := rpcReply{status: a.HTTPStatus, Error: a.Error}
	if a.Result != nil && json.Unmarshal(a.Result, &r.Result) != nil {
		t.Fatalf("%s %s: the result %.300s is no object", method, name, a.Result)
	}
	return r
}

// member returns a result member as JSON text ("" when absent).
func (r rpcReply) member(name string) string { return string(r.Result[name]) }

// quoted is s as a JSON string.
func quoted(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// accepted is the inputResponses of a retry that confirms the confirm
// behaviour's elicitation, asked under key.
func accepted(key string) string {
	return `"inputResponses":{` + quoted(key) + `:{"action":"accept","content":{"ok":true}}}`
}

// inputRequired reads an input_required result: its requestState and the
// key of its one input request.
func inputRequired(t *testing.T, what string, r rpcReply) (state, key string) {
	t.Helper()
	var requests map[string]json.RawMessage
	if r.Error != nil || r.member("resultType") != `"input_required"` ||
		json.Unmarshal(r.Result["requestState"], &state) != nil || state == "" ||
		json.Unmarshal(r.Result["inputRequests"], &requests) != nil || len(requests) != 1 {
		t.Fatalf("%s: %s, want input_required with a requestState and one input request", what, r)
	}
	for k := range requests {
		key = k
	}
	return state, key
}

// String describes the reply for failure messages.
func (r rpcReply) String() string {
	if r.Error != nil {
		return fmt.Sprintf("HTTP %d, error %d %q", r.status, r.Error.Code, r.Error.Message)
	}
	b, _ := json.Marshal(r.Result)
	return fmt.Sprintf("HTTP %d, result %.400s", r.status, b)
}
