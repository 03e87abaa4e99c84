package edge

import (
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
)

// TestRepeatedMembersRefusedInBothEras: a request naming a member twice
// is read two ways (rawjson.Get takes the first, decoders and go-sdk
// backends the last): a client capabilities object naming "extensions" twice had the
// tasks extension reach backends, whose own task id then reached the
// client. Such a request is refused before anything reads it, in either
// era, with HTTP 400: -32600 when the envelope repeats a member, -32602
// when its params do (_meta and arguments included); the aggregator is
// not asked, and a Legacy initialize opens no session.
func TestRepeatedMembersRefusedInBothEras(t *testing.T) {
	b := startBackends(t)
	_, srv := startGateway(t, b, testGatewayConfig(b))
	url := srv.URL + "/mcp"
	tasksTwice := strings.Replace(modernMeta, `clientCapabilities":{}`, `clientCapabilities":{"extensions":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`, 1)
	session := initializeOn(t, url, "alice-key")
	cases := []struct {
		name   string
		header map[string]string
		body   string
		code   int
		id     string
	}{
		{"Modern: extensions twice", modernHeaders("tools/call", "Mcp-Name", "alpha_echo"),
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + tasksTwice + `,"name":"alpha_echo","task":{}}}`, wire.CodeInvalidParams, "1"},
		{"Modern: method twice", modernHeaders("tools/call", "Mcp-Name", "alpha_echo"),
			`{"jsonrpc":"2.0","id":2,"method":"tools/list","method":"tools/call","params":{` + modernMeta + `,"name":"alpha_echo"}}`, wire.CodeInvalidRequest, "2"},
		{"Legacy: an argument twice", legacyHeaders("alice-key", session),
			`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"alpha_echo","arguments":{"text":"a","text":"b"}}}`, wire.CodeInvalidParams, "3"},
		{"Legacy: initialize with extensions twice", legacyHeaders("alice-key", ""),
			`{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"extensions":{},"extensions":{"io.modelcontextprotocol/tasks":{}}},"clientInfo":{"name":"raw","version":"1"}}}`, wire.CodeInvalidParams, "4"},
	}
	for _, tc := range cases {
		calls := b.agg.Calls("CallTool")
		resp := send(t, http.MethodPost, url, tc.header, tc.body)
		id, _, rerr := resp.rpc(t)
		if resp.status != http.StatusBadRequest || rerr == nil || rerr.Code != tc.code || string(id) != tc.id {
			t.Errorf("%s: HTTP %d %s; want 400 with %d and id %s", tc.name, resp.status, resp.body, tc.code, tc.id)
		}
		if got := b.agg.Calls("CallTool"); got != calls {
			t.Errorf("%s: the aggregator was asked (%d calls, %d before)", tc.name, got, calls)
		}
		if s := resp.header.Get("Mcp-Session-Id"); s != "" {
			t.Errorf("%s: a session was opened", tc.name)
		}
	}
}
