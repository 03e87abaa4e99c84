package faults

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

// Raw Modern MCP requests, for the tests that look at members go-sdk's
// client does not show as sent (ttlMs, cacheScope, requestState).

// modernCaps are the client capabilities of the raw requests: enough for
// the confirm behaviour's elicitation.
const modernCaps = `{"elicitation":{"form":{}}}`

// rpcReply is a JSON-RPC response.
type rpcReply struct {
	status int
	Result map[string]json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// modernRPC sends one Modern request of method to url; name is the
// Mcp-Name (tool name or URI) when the method needs one, params the
// members after _meta. The answer may be JSON or the last event of SSE.
func modernRPC(t *testing.T, url, method, name, params string) rpcReply {
	t.Helper()
	if params != "" {
		params = "," + params
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":` + modernCaps + `,"io.modelcontextprotocol/clientInfo":{"name":"faults","version":"0"}}` + params + `}}`
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	client := &http.Client{Timeout: pollDeadline}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, name, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, name, err)
	}
	raw = mcpspec.LastMessage(resp.Header.Get("Content-Type"), raw)
	r := rpcReply{status: resp.StatusCode}
	if err := json.Unmarshal(raw, &r); err != nil || (r.Result == nil && r.Error == nil) {
		t.Fatalf("%s %s: %d %q is not a JSON-RPC response", method, name, resp.StatusCode, raw)
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
