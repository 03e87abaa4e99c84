package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

// modernMeta is a valid Modern _meta.
const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}`

type wireResponse struct {
	status int
	header http.Header
	body   []byte
}

// rpcBody decodes a JSON-RPC response body.
func (w wireResponse) rpc(t *testing.T) (id json.RawMessage, result map[string]json.RawMessage, rerr *wire.Error) {
	t.Helper()
	var env struct {
		ID     json.RawMessage            `json:"id"`
		Result map[string]json.RawMessage `json:"result"`
		Error  *wire.Error                `json:"error"`
	}
	if err := json.Unmarshal(w.body, &env); err != nil {
		t.Fatalf("body is not JSON-RPC (%d): %q", w.status, w.body)
	}
	return env.ID, env.Result, env.Error
}

func send(t *testing.T, method, url string, header map[string]string, body string) wireResponse {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return wireResponse{status: resp.StatusCode, header: resp.Header, body: b}
}

// modernHeaders are the headers a Modern client sends for method.
func modernHeaders(method string, extra ...string) map[string]string {
	h := map[string]string{
		"Authorization":        "Bearer alice-key",
		"Content-Type":         "application/json",
		"Accept":               "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28",
		"Mcp-Method":           method,
	}
	for i := 0; i+1 < len(extra); i += 2 {
		if extra[i+1] == "" {
			delete(h, extra[i])
		} else {
			h[extra[i]] = extra[i+1]
		}
	}
	return h
}

// TestModernWire checks the 2026-07-28 wire rules over raw HTTP: statuses,
// codes, ids kept on errors, and the members every result carries.
func TestModernWire(t *testing.T) {
	b := startBackends(t)
	_, srv := startGateway(t, b, testGatewayConfig(b))
	url := srv.URL + "/mcp"
	cases := []struct {
		name    string
		header  map[string]string
		body    string
		status  int
		code    int    // 0: success expected
		id      string // expected id in the response
		inError string // substring of the error message
	}{
		{"discover", modernHeaders("server/discover"), `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + modernMeta + `}}`, 200, 0, "1", ""},
		{"missing _meta", modernHeaders("tools/list"), `{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{}}`, 400, wire.CodeInvalidParams, `"a"`, "_meta"},
		{"missing clientCapabilities", modernHeaders("tools/list"), `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, 400, wire.CodeInvalidParams, "2", "clientCapabilities"},
		{"no version header", modernHeaders("tools/list", "Mcp-Protocol-Version", ""), `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{` + modernMeta + `}}`, 400, wire.CodeHeaderMismatch, "3", "Mcp-Protocol-Version"},
		{"version header differs", modernHeaders("tools/list", "Mcp-Protocol-Version", "2025-11-25"), `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{` + modernMeta + `}}`, 400, wire.CodeHeaderMismatch, "4", ""},
		{"future version", modernHeaders("tools/list", "Mcp-Protocol-Version", "2099-01-01"), `{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`, 400, wire.CodeUnsupportedVer, "5", ""},
		// Legacy is negotiated by initialize: declared per request it is
		// refused, and supported names what a retry may declare.
		{"legacy version per request", modernHeaders("tools/list", "Mcp-Protocol-Version", "2025-11-25"), `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}}`, 400, wire.CodeUnsupportedVer, "7", ""},
		{"ancient version", modernHeaders("tools/list", "Mcp-Protocol-Version", "1900-01-01"), `{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"1900-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`, 400, wire.CodeUnsupportedVer, "6", ""},
		{"missing Mcp-Method", modernHeaders("tools/list", "Mcp-Method", ""), `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{` + modernMeta + `}}`, 400, wire.CodeHeaderMismatch, "7", "Mcp-Method"},
		{"wrong Mcp-Method", modernHeaders("prompts/list"), `{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{` + modernMeta + `}}`, 400, wire.CodeHeaderMismatch, "8", ""},
		{"missing Mcp-Name", modernHeaders("tools/call"), `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{` + modernMeta + `,"name":"beta_add","arguments":{"a":1,"b":2}}}`, 400, wire.CodeHeaderMismatch, "9", "Mcp-Name"},
		{"base64 Mcp-Name", modernHeaders("tools/call", "Mcp-Name", "=?base64?YmV0YV9hZGQ=?="), `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{` + modernMeta + `,"name":"beta_add","arguments":{"a":1,"b":2}}}`, 200, 0, "10", ""},
		{"wrong Mcp-Name on read", modernHeaders("resources/read", "Mcp-Name", "file:///b.txt"), `{"jsonrpc":"2.0","id":11,"method":"resources/read","params":{` + modernMeta + `,"uri":"file:///a.txt"}}`, 400, wire.CodeHeaderMismatch, "11", ""},
		{"missing Mcp-Param", modernHeaders("tools/call", "Mcp-Name", "alpha_region"), `{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{` + modernMeta + `,"name":"alpha_region","arguments":{"region":"eu"}}}`, 400, wire.CodeHeaderMismatch, "12", "Mcp-Param-Region"},
		{"wrong Mcp-Param", modernHeaders("tools/call", "Mcp-Name", "alpha_region", "Mcp-Param-Region", "us"), `{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{` + modernMeta + `,"name":"alpha_region","arguments":{"region":"eu"}}}`, 400, wire.CodeHeaderMismatch, "13", ""},
		{"Mcp-Param for absent argument", modernHeaders("tools/call", "Mcp-Name", "alpha_region", "Mcp-Param-Region", "eu", "Mcp-Param-Count", "2"), `{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{` + modernMeta + `,"name":"alpha_region","arguments":{"region":"eu"}}}`, 400, wire.CodeHeaderMismatch, "14", ""},
		{"base64 Mcp-Param and integer", modernHeaders("tools/call", "Mcp-Name", "alpha_region", "Mcp-Param-Region", "=?base64?WsO8cmljaA==?=", "Mcp-Param-Count", "2"), `{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{` + modernMeta + `,"name":"alpha_region","arguments":{"region":"Zürich","count":2}}}`, 200, 0, "15", ""},
		{"unpadded base64 Mcp-Param", modernHeaders("tools/call", "Mcp-Name", "alpha_region", "Mcp-Param-Region", "=?base64?SGVsbG8?="), `{"jsonrpc":"2.0","id":40,"method":"tools/call","params":{` + modernMeta + `,"name":"alpha_region","arguments":{"region":"Hello"}}}`, 400, wire.CodeHeaderMismatch, "40", ""},
		{"unterminated sentinel is literal", modernHeaders("tools/call", "Mcp-Name", "alpha_region", "Mcp-Param-Region", "=?base64?SGVsbG8="), `{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{` + modernMeta + `,"name":"alpha_region","arguments":{"region":"=?base64?SGVsbG8="}}}`, 200, 0, "41", ""},
		// HTTP lets a header value carry bytes past ASCII; ones that are
		// not UTF-8 cannot be forwarded, and are the client's mistake.
		{"Mcp-Param not UTF-8", modernHeaders("tools/call", "Mcp-Name", "alpha_region", "Mcp-Param-Region", "\xffeu"), `{"jsonrpc":"2.0","id":52,"method":"tools/call","params":{` + modernMeta + `,"name":"alpha_region","arguments":{"region":"eu"}}}`, 400, wire.CodeHeaderMismatch, "52", "Mcp-Param-Region"},
		{"header mismatch before unsupported version", modernHeaders("server/discover"), `{"jsonrpc":"2.0","id":42,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"v999.0.0","io.modelcontextprotocol/clientCapabilities":{}}}}`, 400, wire.CodeHeaderMismatch, "42", ""},
		{"member names are case-sensitive", modernHeaders("tools/list"), `{"JSONRPC":"2.0","id":43,"method":"tools/list","params":{` + modernMeta + `}}`, 400, wire.CodeInvalidRequest, "43", ""},
		{"removed ping", modernHeaders("ping"), `{"jsonrpc":"2.0","id":16,"method":"ping","params":{` + modernMeta + `}}`, 404, wire.CodeMethodNotFound, "16", ""},
		{"removed initialize", modernHeaders("initialize"), `{"jsonrpc":"2.0","id":17,"method":"initialize","params":{` + modernMeta + `}}`, 404, wire.CodeMethodNotFound, "17", ""},
		{"removed setLevel", modernHeaders("logging/setLevel"), `{"jsonrpc":"2.0","id":18,"method":"logging/setLevel","params":{` + modernMeta + `,"level":"info"}}`, 404, wire.CodeMethodNotFound, "18", ""},
		{"removed subscribe", modernHeaders("resources/subscribe"), `{"jsonrpc":"2.0","id":19,"method":"resources/subscribe","params":{` + modernMeta + `,"uri":"file:///a.txt"}}`, 404, wire.CodeMethodNotFound, "19", ""},
		{"unknown method", modernHeaders("foo/bar"), `{"jsonrpc":"2.0","id":20,"method":"foo/bar","params":{` + modernMeta + `}}`, 404, wire.CodeMethodNotFound, "20", ""},
		{"unknown tool", modernHeaders("tools/call", "Mcp-Name", "nope"), `{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{` + modernMeta + `,"name":"nope"}}`, 400, wire.CodeInvalidParams, "21", "nope"},
		{"missing resource", modernHeaders("resources/read", "Mcp-Name", "file:///x"), `{"jsonrpc":"2.0","id":22,"method":"resources/read","params":{` + modernMeta + `,"uri":"file:///x"}}`, 400, wire.CodeInvalidParams, "22", "not found"},
		{"bad cursor", modernHeaders("tools/list"), `{"jsonrpc":"2.0","id":23,"method":"tools/list","params":{` + modernMeta + `,"cursor":"prompts:1"}}`, 400, wire.CodeInvalidParams, "23", ""},
		{"non-string cursor", modernHeaders("tools/list"), `{"jsonrpc":"2.0","id":24,"method":"tools/list","params":{` + modernMeta + `,"cursor":7}}`, 400, wire.CodeInvalidParams, "24", "cursor"},
		{"empty cursor", modernHeaders("tools/list"), `{"jsonrpc":"2.0","id":25,"method":"tools/list","params":{` + modernMeta + `,"cursor":""}}`, 200, 0, "25", ""},
		{"null cursor", modernHeaders("tools/list"), `{"jsonrpc":"2.0","id":26,"method":"tools/list","params":{` + modernMeta + `,"cursor":null}}`, 200, 0, "26", ""},
		{"undeclared elicitation", modernHeaders("tools/call", "Mcp-Name", "alpha_ask"), `{"jsonrpc":"2.0","id":27,"method":"tools/call","params":{` + modernMeta + `,"name":"alpha_ask"}}`, 400, wire.CodeMissingCapability, "27", ""},
		{"listen without notifications", modernHeaders("subscriptions/listen"), `{"jsonrpc":"2.0","id":28,"method":"subscriptions/listen","params":{` + modernMeta + `}}`, 400, wire.CodeInvalidParams, "28", "notifications"},
		// The aggregator's refusals of these named its own API's fields
		// (params_json, input_responses_json).
		{"completion ref not an object", modernHeaders("completion/complete"), `{"jsonrpc":"2.0","id":49,"method":"completion/complete","params":{` + modernMeta + `,"ref":5,"argument":{"name":"a","value":"b"}}}`, 400, wire.CodeInvalidParams, "49", "ref is required: an object"},
		{"prompt argument null", modernHeaders("prompts/get", "Mcp-Name", "p"), `{"jsonrpc":"2.0","id":52,"method":"prompts/get","params":{` + modernMeta + `,"name":"p","arguments":{"who":null}}}`, 400, wire.CodeInvalidParams, "52", "strings"},
		{"completion argument not an object", modernHeaders("completion/complete"), `{"jsonrpc":"2.0","id":50,"method":"completion/complete","params":{` + modernMeta + `,"ref":{"type":"ref/prompt","name":"p"},"argument":"a"}}`, 400, wire.CodeInvalidParams, "50", "argument is required: an object"},
		{"an input response not an object", modernHeaders("tools/call", "Mcp-Name", "beta_add"), `{"jsonrpc":"2.0","id":51,"method":"tools/call","params":{` + modernMeta + `,"name":"beta_add","arguments":{"a":1,"b":2},"inputResponses":{"k":5}}}`, 400, wire.CodeInvalidParams, "51", "members are objects"},
		{"listen with null notifications", modernHeaders("subscriptions/listen"), `{"jsonrpc":"2.0","id":48,"method":"subscriptions/listen","params":{` + modernMeta + `,"notifications":null}}`, 400, wire.CodeInvalidParams, "48", "notifications"},
		{"parse error", modernHeaders("tools/list"), `{"jsonrpc":"2.0","id":29,`, 400, wire.CodeParseError, "null", ""},
		{"batch", modernHeaders("tools/list"), `[{"jsonrpc":"2.0","id":30,"method":"tools/list","params":{` + modernMeta + `}}]`, 400, wire.CodeInvalidRequest, "null", "batch"},
		{"wrong jsonrpc", modernHeaders("tools/list"), `{"jsonrpc":"1.0","id":31,"method":"tools/list"}`, 400, wire.CodeInvalidRequest, "31", ""},
		{"object id", modernHeaders("tools/list"), `{"jsonrpc":"2.0","id":{},"method":"tools/list"}`, 400, wire.CodeInvalidRequest, "null", ""},
		{"wrong content type", modernHeaders("tools/list", "Content-Type", "text/plain"), `{"jsonrpc":"2.0","id":32,"method":"tools/list","params":{` + modernMeta + `}}`, 415, wire.CodeInvalidRequest, "32", ""},
		{"wrong content type, not JSON", modernHeaders("tools/list", "Content-Type", "text/plain"), `not json`, 415, wire.CodeInvalidRequest, "null", "Content-Type"},
		{"Accept without SSE", modernHeaders("tools/list", "Accept", "application/json"), `{"jsonrpc":"2.0","id":33,"method":"tools/list","params":{` + modernMeta + `}}`, 400, wire.CodeInvalidRequest, "33", "Accept"},
		{"session id ignored", modernHeaders("tools/list", "Mcp-Session-Id", "whatever"), `{"jsonrpc":"2.0","id":34,"method":"tools/list","params":{` + modernMeta + `}}`, 200, 0, "34", ""},
		{"JSON null body", modernHeaders("tools/list"), `null`, 400, wire.CodeInvalidRequest, "null", "request object"},
		{"JSON number body", modernHeaders("tools/list"), `42`, 400, wire.CodeInvalidRequest, "null", "request object"},
		{"invalid UTF-8 in an argument", modernHeaders("tools/call", "Mcp-Name", "beta_add"), "{\"jsonrpc\":\"2.0\",\"id\":44,\"method\":\"tools/call\",\"params\":{" + modernMeta + ",\"name\":\"beta_add\",\"arguments\":{\"a\":\"Os\xc0\xaflo\"}}}", 400, wire.CodeParseError, "null", "UTF-8"},
		{"nesting deeper than backends accept", modernHeaders("tools/call", "Mcp-Name", "beta_add"), `{"jsonrpc":"2.0","id":45,"method":"tools/call","params":{` + modernMeta + `,"name":"beta_add","arguments":{"a":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}}}`, 400, wire.CodeParseError, "null", "nested"},
		{"brackets inside strings do not nest", modernHeaders("tools/call", "Mcp-Name", "beta_add"), `{"jsonrpc":"2.0","id":46,"method":"tools/call","params":{` + modernMeta + `,"name":"beta_add","arguments":{"a":1,"b":2,"note":"` + strings.Repeat("[{", 600) + `\""}}}`, 200, 0, "46", ""},
		// Checked before the ping a Legacy client may send before
		// initialize: such a ping was once answered 200.
		{"ping naming an unsupported version", modernHeaders("ping", "Mcp-Protocol-Version", "2026-01-01"), `{"jsonrpc":"2.0","id":47,"method":"ping"}`, 400, wire.CodeUnsupportedVer, "47", ""},
		{"no era markers", modernHeaders("tools/list", "Mcp-Protocol-Version", ""), `{"jsonrpc":"2.0","id":35,"method":"tools/list","params":{}}`, 400, wire.CodeInvalidParams, "35", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := send(t, http.MethodPost, url, tc.header, tc.body)
			if resp.status != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.status, tc.status, resp.body)
			}
			id, result, rerr := resp.rpc(t)
			if string(id) != tc.id {
				t.Fatalf("id %s, want %s", id, tc.id)
			}
			if tc.code == 0 {
				if rerr != nil {
					t.Fatalf("unexpected error %+v", rerr)
				}
				if string(result["resultType"]) != `"complete"` {
					t.Fatalf("resultType = %s", result["resultType"])
				}
				var meta map[string]json.RawMessage
				if json.Unmarshal(result["_meta"], &meta) != nil || !bytes.Contains(meta[mcpspec.MetaServerInfo], []byte("switchboard-test")) {
					t.Fatalf("missing serverInfo in %s", resp.body)
				}
				return
			}
			if rerr == nil || rerr.Code != tc.code || !strings.Contains(rerr.Message, tc.inError) {
				t.Fatalf("error = %+v, want code %d containing %q", rerr, tc.code, tc.inError)
			}
			if tc.code == wire.CodeUnsupportedVer {
				data, _ := json.Marshal(rerr.Data)
				if !bytes.Contains(data, []byte(`"supported":["2026-07-28"]`)) || !bytes.Contains(data, []byte(`"requested"`)) {
					t.Fatalf("-32022 data = %s", data)
				}
			}
			if tc.code == wire.CodeMissingCapability && !strings.Contains(string(resp.body), `"requiredCapabilities":{"elicitation":{}}`) {
				t.Fatalf("-32021 data: %s", resp.body)
			}
		})
	}
}

// TestModernResults checks result shapes: discover, caching members, the
// last page without nextCursor, and notifications.
func TestModernResults(t *testing.T) {
	b := startBackends(t)
	_, srv := startGateway(t, b, testGatewayConfig(b))
	url := srv.URL + "/mcp"

	resp := send(t, http.MethodPost, url, modernHeaders("server/discover"), `{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{`+modernMeta+`}}`)
	_, res, _ := resp.rpc(t)
	if string(res["supportedVersions"]) != `["2026-07-28","2025-11-25"]` || string(res["cacheScope"]) != `"private"` || string(res["ttlMs"]) != "60000" {
		t.Fatalf("discover = %s", resp.body)
	}
	var caps map[string]json.RawMessage
	_ = json.Unmarshal(res["capabilities"], &caps)
	if string(caps["tools"]) != `{"listChanged":true}` || string(caps["prompts"]) != `{"listChanged":true}` || caps["logging"] != nil {
		t.Fatalf("capabilities = %s", res["capabilities"])
	}

	resp = send(t, http.MethodPost, url, modernHeaders("tools/list"), `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+modernMeta+`,"cursor":"tools:4"}}`)
	_, res, _ = resp.rpc(t)
	if _, has := res["nextCursor"]; has || string(res["cacheScope"]) != `"private"` {
		t.Fatalf("last page = %s", resp.body)
	}
	resp = send(t, http.MethodPost, url, modernHeaders("resources/read", "Mcp-Name", "file:///a.txt"), `{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{`+modernMeta+`,"uri":"file:///a.txt"}}`)
	_, res, _ = resp.rpc(t)
	if string(res["cacheScope"]) != `"private"` || res["ttlMs"] == nil {
		t.Fatalf("read = %s", resp.body)
	}
	resp = send(t, http.MethodPost, url, modernHeaders("tools/call", "Mcp-Name", "beta_add"), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{`+modernMeta+`,"name":"beta_add","arguments":{"a":1,"b":1}}}`)
	_, res, _ = resp.rpc(t)
	if res["cacheScope"] != nil || res["ttlMs"] != nil || string(res["resultType"]) != `"complete"` ||
		!strings.Contains(string(res["_meta"]), `"trace":"kept"`) || !strings.Contains(string(res["_meta"]), "switchboard-test") {
		t.Fatalf("call = %s", resp.body)
	}

	// An input_required result reaches a client that declared elicitation,
	// without the stray content:null.
	withElicitation := strings.Replace(modernMeta, `clientCapabilities":{}`, `clientCapabilities":{"elicitation":{"form":{}}}`, 1)
	resp = send(t, http.MethodPost, url, modernHeaders("tools/call", "Mcp-Name", "alpha_ask"), `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{`+withElicitation+`,"name":"alpha_ask"}}`)
	_, res, _ = resp.rpc(t)
	if string(res["resultType"]) != `"input_required"` || !strings.HasPrefix(string(res["requestState"]), `"r1.`) || res["content"] != nil {
		t.Fatalf("input_required = %s", resp.body)
	}
	// The backend's state is sealed for alice and this tool: echoed by
	// alice it reaches the backend unsealed; forged, moved to another tool
	// or replayed by bob it is refused.
	sealed := string(res["requestState"])
	retry := func(key, tool, state string) wireResponse {
		return send(t, http.MethodPost, url, modernHeaders("tools/call", "Mcp-Name", tool, "Authorization", "Bearer "+key),
			`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{`+withElicitation+`,"name":"`+tool+`","inputResponses":{"ok":{"action":"accept","content":{}}},"requestState":`+state+`}}`)
	}
	if resp := retry("alice-key", "alpha_ask", sealed); resp.status != 200 || !strings.Contains(string(resp.body), "answered") {
		t.Fatalf("retry with the sealed state: %d %s", resp.status, resp.body)
	}
	for name, r := range map[string]wireResponse{
		"forged":       retry("alice-key", "alpha_ask", `"st-1"`),
		"other tool":   retry("alice-key", "alpha_echo", sealed),
		"other caller": retry("bob-key", "alpha_ask", sealed),
	} {
		if _, _, rerr := r.rpc(t); r.status != 400 || rerr == nil || rerr.Code != wire.CodeInvalidParams || !strings.Contains(rerr.Message, "requestState") {
			t.Errorf("%s state: %d %s", name, r.status, r.body)
		}
	}

	// Notifications: 202 with no body; without Mcp-Method, 400 -32020.
	resp = send(t, http.MethodPost, url, modernHeaders("notifications/cancelled"), `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`)
	if resp.status != http.StatusAccepted || len(resp.body) != 0 {
		t.Fatalf("notification: %d %q", resp.status, resp.body)
	}
	resp = send(t, http.MethodPost, url, modernHeaders("x", "Mcp-Method", ""), `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}`)
	if _, _, rerr := resp.rpc(t); resp.status != 400 || rerr == nil || rerr.Code != wire.CodeHeaderMismatch {
		t.Fatalf("notification without Mcp-Method: %d %s", resp.status, resp.body)
	}

	// GET and DELETE without a Legacy session: 405, Allow: POST.
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		resp = send(t, m, url, map[string]string{"Authorization": "Bearer alice-key", "Accept": "text/event-stream"}, "")
		if resp.status != http.StatusMethodNotAllowed || resp.header.Get("Allow") != "POST" {
			t.Fatalf("%s: %d Allow=%q", m, resp.status, resp.header.Get("Allow"))
		}
	}
}

// TestInputRequestsNeedTheirModes: an input request goes to a client only
// if it declared what the request needs, beyond the kind: a URL-mode
// elicitation needs elicitation.url, a sampling request offering tools or
// asking for other servers' context needs sampling.tools or
// sampling.context. Otherwise the client is told -32021 naming them (a
// URL a backend chose once reached a client that declared forms only).
func TestInputRequestsNeedTheirModes(t *testing.T) {
	b := newBackends()
	orig := b.agg.CallToolFunc
	b.agg.CallToolFunc = func(ctx context.Context, req *aggregatorv1.CallToolRequest) (*aggregatorv1.CallToolResponse, error) {
		if req.GetName() == "alpha_ask" {
			return &aggregatorv1.CallToolResponse{ResultType: "input_required",
				ResultJson: `{"resultType":"input_required","requestState":"st-1","inputRequests":{"u":{"method":"elicitation/create","params":{"mode":"url","url":"https://elsewhere.example/login","message":"log in","elicitationId":"e1"}},"s":{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":5,"tools":[{"name":"x","inputSchema":{"type":"object"}}],"includeContext":"allServers"}}}}`}, nil
		}
		return orig(ctx, req)
	}
	b.serve(t)
	_, srv := startGateway(t, b, testGatewayConfig(b))
	call := func(caps string) wireResponse {
		meta := strings.Replace(modernMeta, `clientCapabilities":{}`, `clientCapabilities":`+caps, 1)
		return send(t, http.MethodPost, srv.URL+"/mcp", modernHeaders("tools/call", "Mcp-Name", "alpha_ask"),
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+meta+`,"name":"alpha_ask"}}`)
	}
	resp := call(`{"elicitation":{"form":{}},"sampling":{}}`)
	_, _, rerr := resp.rpc(t)
	want := `{"requiredCapabilities":{"elicitation":{"url":{}},"sampling":{"context":{},"tools":{}}}}`
	var data []byte
	if rerr != nil {
		data, _ = json.Marshal(rerr.Data)
	}
	if resp.status != http.StatusBadRequest || rerr == nil || rerr.Code != wire.CodeMissingCapability || string(data) != want {
		t.Fatalf("a client that declared forms and plain sampling: %d %s, want -32021 with %s", resp.status, resp.body, want)
	}
	resp = call(`{"elicitation":{"url":{}},"sampling":{"tools":{},"context":{}}}`)
	if _, result, rerr := resp.rpc(t); resp.status != http.StatusOK || rerr != nil || !strings.Contains(string(result["inputRequests"]), `"mode":"url"`) {
		t.Fatalf("a client that declared them: %d %s", resp.status, resp.body)
	}
}
