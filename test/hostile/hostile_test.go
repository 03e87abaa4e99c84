package hostile

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// Expected JSON-RPC outcomes besides a specific error code.
const (
	// success: a result, no error (HTTP 200), or 202 with no body.
	success = 0
	// bare: the spec fixes the status only; the body may be plain text, or
	// a JSON-RPC error whose code the spec defines.
	bare = 1
)

// specCodes are the JSON-RPC error codes MCP allows a server to emit.
var specCodes = map[int]bool{-32700: true, -32600: true, -32601: true, -32602: true, -32603: true,
	-32020: true, -32021: true, -32022: true, -32002: true}

type hostileCase struct {
	name   string
	req    request
	status int
	code   int // a JSON-RPC error code, success or bare
	// check, when set, asserts more about the answer.
	check func(t *testing.T, r response)
}

// fixtures are real identifiers minted by the running system, for the
// tampering and replay cases.
type fixtures struct {
	aliceToolsCursor, bobToolsCursor, alicePromptsCursor, aliceResourcesCursor string
	aliceSession, bobSession                                                   string
}

// TestHostileInput sends malformed and hostile requests to a running
// Switchboard (separate processes: two demo backends, aggregator, indexer
// over PostgreSQL, gateway) and checks each answer's HTTP status and
// JSON-RPC code against the MCP specification; then that every process is
// still up and the gateway still serves.
func TestHostileInput(t *testing.T) {
	s := startStack(t)
	c := newClient(s)
	s.waitIndexed(t, c)
	fx := gatherFixtures(t, c)

	cases := hostileCases(fx)
	if len(cases) < 60 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := c.do(t, tc.req)
			t.Logf("answer: %d %.200s", r.status, r.body)
			assertOutcome(t, tc, r)
			if tc.check != nil && !t.Failed() {
				tc.check(t, r)
			}
		})
	}

	t.Run("after the table", func(t *testing.T) {
		s.checkAlive(t)
		// The gateway still serves both eras, and bob's session survived
		// alice's attempt to delete it.
		r := c.modern(t, "/mcp", aliceKey, "tools/call", `"name":"weather_forecast","arguments":{"city":"Oslo"}`, "Mcp-Name", "weather_forecast")
		if result, rerr, ok := r.rpc(); r.status != http.StatusOK || !ok || rerr != nil || result["content"] == nil {
			t.Errorf("valid Modern tools/call after the table: %d %s", r.status, r.body)
		}
		// The search tables survived the SQL cases.
		if resp := c.do(t, findTool("weather forecast for a city", "")); resp.status != http.StatusOK || !strings.Contains(string(resp.body), "weather_forecast") {
			t.Errorf("find_tool after the table: %d %.300s", resp.status, resp.body)
		}
		r = c.do(t, request{header: legacyHeaders(bobKey, fx.bobSession), body: legacyBody("tools/list", "")})
		if result, rerr, ok := r.rpc(); r.status != http.StatusOK || !ok || rerr != nil || len(toolNames(t, result)) == 0 {
			t.Errorf("bob's Legacy session after the table: %d %s", r.status, r.body)
		}
		s.checkAlive(t)
	})
}

func assertOutcome(t *testing.T, tc hostileCase, r response) {
	t.Helper()
	if r.status >= 500 {
		t.Fatalf("status %d (a 5xx), body %.300q", r.status, r.body)
	}
	if r.status != tc.status {
		t.Errorf("status %d, want %d; body %.300q", r.status, tc.status, r.body)
	}
	result, rerr, isRPC := r.rpc()
	switch tc.code {
	case success:
		if r.status == http.StatusAccepted {
			if len(r.body) != 0 {
				t.Errorf("202 with a body: %.300q", r.body)
			}
			return
		}
		if !isRPC || rerr != nil || result == nil {
			t.Errorf("want a result, got %.300q", r.body)
		}
	case bare:
		if isRPC && rerr != nil && !specCodes[rerr.Code] {
			t.Errorf("error code %d is not one MCP defines", rerr.Code)
		}
		if isRPC && rerr == nil {
			t.Errorf("want an error, got a result: %.300q", r.body)
		}
	default:
		if !isRPC || rerr == nil {
			t.Errorf("want JSON-RPC error %d, got %.300q", tc.code, r.body)
		} else if rerr.Code != tc.code {
			t.Errorf("JSON-RPC error %d (%s), want %d", rerr.Code, rerr.Message, tc.code)
		}
	}
}

func gatherFixtures(t *testing.T, c *client) *fixtures {
	t.Helper()
	fx := &fixtures{}
	fx.aliceToolsCursor = nextCursor(t, c.modern(t, "/mcp", aliceKey, "tools/list", ""))
	fx.bobToolsCursor = nextCursor(t, c.modern(t, "/mcp", bobKey, "tools/list", ""))
	fx.alicePromptsCursor = nextCursor(t, c.modern(t, "/mcp", aliceKey, "prompts/list", ""))
	fx.aliceResourcesCursor = nextCursor(t, c.modern(t, "/mcp", aliceKey, "resources/list", ""))
	fx.aliceSession = c.initialize(t, aliceKey)
	fx.bobSession = c.initialize(t, bobKey)
	return fx
}

// b64 is the =?base64?…?= form of a header value.
func b64(s string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=" }

// post is a POST with the given headers and body.
func post(path string, hs []header, body []byte) request {
	return request{path: path, header: hs, body: body}
}

// modernCall is a conforming Modern tools/call of weather_forecast with
// header overrides.
func modernCall(key string, args string, overrides ...string) request {
	hs := modernHeaders(key, "tools/call", append([]string{"Mcp-Name", "weather_forecast"}, overrides...)...)
	return post("/mcp", hs, modernBody("tools/call", `"name":"weather_forecast","arguments":`+args))
}

func modernList(key, method, params string, overrides ...string) request {
	return post("/mcp", modernHeaders(key, method, overrides...), modernBody(method, params))
}

func findTool(query string, keywords string) request {
	args := map[string]any{"tool_description": query}
	if keywords != "" {
		args["tool_keywords"] = []string{keywords}
	}
	a, _ := json.Marshal(args)
	return post("/mcp/optimized", modernHeaders(aliceKey, "tools/call", "Mcp-Name", "find_tool"),
		modernBody("tools/call", `"name":"find_tool","arguments":`+string(a)))
}

// rawPost is a raw HTTP/1.1 POST with extra header lines as written.
func rawPost(extraHeaderLines string, body string) []byte {
	return []byte("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + aliceKey +
		"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2026-07-28\r\n" +
		extraHeaderLines + "Content-Length: " + itoa(len(body)) + "\r\nConnection: close\r\n\r\n" + body)
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// onlyAliceTools asserts a tools/list or find_tool answer names no tool
// outside alice's view (the notes backend is bob's only).
func onlyAliceTools(t *testing.T, r response) {
	t.Helper()
	if strings.Contains(string(r.body), "notes_") {
		t.Errorf("alice's answer names bob's tools: %.400q", r.body)
	}
}

// searchWorked asserts find_tool answered with a tool result that is not
// an error: the query reached PostgreSQL as data and the search ran.
func searchWorked(t *testing.T, r response) {
	t.Helper()
	result, _, _ := r.rpc()
	if string(result["isError"]) == "true" {
		t.Errorf("find_tool failed: %.400q", r.body)
	}
	var structured struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	if err := json.Unmarshal(result["structuredContent"], &structured); err != nil {
		t.Errorf("find_tool result has no structuredContent: %.400q", r.body)
	}
	onlyAliceTools(t, r)
}

func unsupportedVersionData(requested string) func(t *testing.T, r response) {
	return func(t *testing.T, r response) {
		_, rerr, _ := r.rpc()
		var data struct {
			Supported []string `json:"supported"`
			Requested string   `json:"requested"`
		}
		if err := json.Unmarshal(rerr.Data, &data); err != nil || data.Requested != requested || !slices.Contains(data.Supported, "2026-07-28") {
			t.Errorf("-32022 data %s, want supported including 2026-07-28 and requested %q", rerr.Data, requested)
		}
	}
}

// tamperedCursor re-encodes a cursor's JSON with one member changed. The
// cursor is opaque to clients; an attacker reads it anyway.
func tamperedCursor(cursor, member string, value any) string {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return cursor + "x"
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return cursor + "x"
	}
	m[member] = value
	b, _ := json.Marshal(m)
	return base64.RawURLEncoding.EncodeToString(b)
}

func cursorParam(cursor string) string {
	b, _ := json.Marshal(cursor)
	return `"cursor":` + string(b)
}

func hostileCases(fx *fixtures) []hostileCase {
	const tl = "tools/list"
	alice := func(method string, overrides ...string) []header {
		return modernHeaders(aliceKey, method, overrides...)
	}
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	huge := strings.Repeat("x", maxBody+1024)
	forged := base64.RawURLEncoding.EncodeToString([]byte("forged session id, never minted by a gateway"))
	flipped := fx.aliceSession[:len(fx.aliceSession)-2] + map[bool]string{true: "AA", false: "BB"}[!strings.HasSuffix(fx.aliceSession, "AA")]

	return []hostileCase{
		// ---- bad JSON: -32700 at 400 (invalid JSON text) ----
		{name: "empty body", req: post("/mcp", alice(tl), []byte{}), status: 400, code: -32700},
		{name: "truncated object", req: post("/mcp", alice(tl), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/li`)), status: 400, code: -32700},
		{name: "not JSON", req: post("/mcp", alice(tl), []byte(`tools/list please`)), status: 400, code: -32700},
		{name: "trailing garbage", req: post("/mcp", alice(tl), append(modernBody(tl, ""), []byte(" trailing")...)), status: 400, code: -32700},
		{name: "two objects", req: post("/mcp", alice(tl), append(modernBody(tl, ""), modernBody(tl, "")...)), status: 400, code: -32700},
		{name: "byte order mark", req: post("/mcp", alice(tl), append([]byte("\xef\xbb\xbf"), modernBody(tl, "")...)), status: 400, code: -32700},
		{name: "single quotes", req: post("/mcp", alice(tl), []byte(`{'jsonrpc':'2.0','id':1,'method':'tools/list'}`)), status: 400, code: -32700},

		// ---- valid JSON that is not a request object: -32600 at 400 ----
		{name: "JSON null", req: post("/mcp", alice(tl), []byte(`null`)), status: 400, code: -32600},
		{name: "JSON number", req: post("/mcp", alice(tl), []byte(`42`)), status: 400, code: -32600},
		{name: "JSON string", req: post("/mcp", alice(tl), []byte(`"tools/list"`)), status: 400, code: -32600},

		// ---- batches: not in MCP since 2025-06-18 ----
		{name: "batch of one", req: post("/mcp", alice(tl), []byte(`[`+string(modernBody(tl, ""))+`]`)), status: 400, code: -32600},
		{name: "empty batch", req: post("/mcp", alice(tl), []byte(`[]`)), status: 400, code: -32600},
		{name: "batch after whitespace", req: post("/mcp", alice(tl), []byte(" \r\n\t["+string(modernBody(tl, ""))+","+string(modernBody(tl, ""))+"]")), status: 400, code: -32600},
		{name: "batch in a Legacy session", req: post("/mcp", legacyHeaders(aliceKey, fx.aliceSession), []byte(`[`+string(legacyBody(tl, ""))+`]`)), status: 400, code: -32600},

		// ---- wrong JSON types ----
		{name: "id object", req: post("/mcp", alice(tl), []byte(`{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list","params":{`+modernMeta+`}}`)), status: 400, code: -32600},
		{name: "id array", req: post("/mcp", alice(tl), []byte(`{"jsonrpc":"2.0","id":[1],"method":"tools/list","params":{`+modernMeta+`}}`)), status: 400, code: -32600},
		{name: "id boolean", req: post("/mcp", alice(tl), []byte(`{"jsonrpc":"2.0","id":true,"method":"tools/list","params":{`+modernMeta+`}}`)), status: 400, code: -32600},
		{name: "id null", req: post("/mcp", alice(tl), []byte(`{"jsonrpc":"2.0","id":null,"method":"tools/list","params":{`+modernMeta+`}}`)), status: 400, code: -32600},
		{name: "method number", req: post("/mcp", alice(tl), []byte(`{"jsonrpc":"2.0","id":1,"method":7,"params":{`+modernMeta+`}}`)), status: 400, code: -32600},
		{name: "method empty", req: post("/mcp", alice(""), []byte(`{"jsonrpc":"2.0","id":1,"method":"","params":{`+modernMeta+`}}`)), status: 400, code: -32600},
		{name: "method object", req: post("/mcp", alice(tl), []byte(`{"jsonrpc":"2.0","id":1,"method":{"name":"tools/list"},"params":{`+modernMeta+`}}`)), status: 400, code: -32600},
		{name: "method member in capitals", req: post("/mcp", alice(tl), []byte(`{"jsonrpc":"2.0","id":1,"METHOD":"tools/list","params":{`+modernMeta+`}}`)), status: 400, code: -32600},
		{name: "jsonrpc 1.0", req: post("/mcp", alice(tl), []byte(`{"jsonrpc":"1.0","id":1,"method":"tools/list","params":{`+modernMeta+`}}`)), status: 400, code: -32600},
		{name: "jsonrpc missing", req: post("/mcp", alice(tl), []byte(`{"id":1,"method":"tools/list","params":{`+modernMeta+`}}`)), status: 400, code: -32600},
		{name: "params array", req: post("/mcp", alice(tl), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":[{`+modernMeta+`}]}`)), status: 400, code: -32602},
		{name: "params string", req: post("/mcp", alice(tl), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":"all"}`)), status: 400, code: -32602},
		{name: "_meta array", req: post("/mcp", alice(tl), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":[]}}`)), status: 400, code: -32602},
		{name: "protocolVersion number", req: post("/mcp", alice(tl), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":20260728,"io.modelcontextprotocol/clientCapabilities":{}}}}`)), status: 400, code: -32602},
		{name: "clientCapabilities string", req: post("/mcp", alice(tl), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":"all"}}}`)), status: 400, code: -32602},
		{name: "cursor number", req: modernList(aliceKey, tl, `"cursor":2`), status: 400, code: -32602},
		{name: "arguments array", req: modernCall(aliceKey, `["Oslo"]`), status: 400, code: -32602},
		{name: "tool name number", req: post("/mcp", alice("tools/call", "Mcp-Name", "7"), modernBody("tools/call", `"name":7`)), status: 400, code: -32602},

		// ---- invalid UTF-8: JSON text must be UTF-8 (RFC 8259 §8.1) ----
		{name: "invalid UTF-8 in method", req: post("/mcp", alice(tl), []byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\xff\",\"params\":{"+modernMeta+"}}")), status: 400, code: -32700},
		{name: "invalid UTF-8 in an argument", req: post("/mcp", alice("tools/call", "Mcp-Name", "weather_forecast"), modernBody("tools/call", "\"name\":\"weather_forecast\",\"arguments\":{\"city\":\"Os\xc0\xaflo\"}")), status: 400, code: -32700},
		{name: "invalid UTF-8 in a cursor", req: post("/mcp", alice(tl), modernBody(tl, "\"cursor\":\"\xfe\xfe\"")), status: 400, code: -32700},

		// ---- size and depth ----
		{name: "body over the limit", req: post("/mcp", alice(tl), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+modernMeta+`,"pad":"`+huge+`"}}`)), status: 413, code: bare},
		{name: "oversized tool arguments", req: modernCall(aliceKey, `{"city":"`+huge+`"}`), status: 413, code: bare},
		{name: "large tool arguments within the limit", req: modernCall(aliceKey, `{"city":"`+strings.Repeat("Oslo ", maxBody/8)+`"}`), status: 200, code: success},
		{name: "nesting beyond the parser's depth", req: post("/mcp", alice("tools/call", "Mcp-Name", "weather_forecast"), modernBody("tools/call", `"name":"weather_forecast","arguments":{"city":`+deep(20000)+`}`)), status: 400, code: -32700},
		{name: "nesting backends accept", req: post("/mcp", alice("tools/call", "Mcp-Name", "weather_forecast"), modernBody("tools/call", `"name":"weather_forecast","arguments":{"city":"Oslo","extra":`+deep(500)+`}`)), status: 200, code: success},
		// go-sdk servers refuse JSON nested deeper than 1000 levels, so
		// such a request can never be served: it is malformed for this
		// system and must be refused at the edge, not forwarded and
		// reported as an unavailable backend.
		{name: "nesting deeper than backends accept", req: post("/mcp", alice("tools/call", "Mcp-Name", "weather_forecast"), modernBody("tools/call", `"name":"weather_forecast","arguments":{"city":"Oslo","extra":`+deep(5000)+`}`)), status: 400, code: -32700},
		{name: "deep nesting in _meta", req: post("/mcp", alice(tl), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"x":`+deep(20000)+`}}}`)), status: 400, code: -32700},

		// ---- header injection and header rules ----
		{name: "CR in Mcp-Name", req: request{raw: rawPost("Mcp-Method: tools/call\r\nMcp-Name: weather_forecast\rX-Injected: 1\r\n", string(modernBody("tools/call", `"name":"weather_forecast","arguments":{"city":"Oslo"}`)))}, status: 400, code: bare},
		{name: "NUL in Mcp-Method", req: request{raw: rawPost("Mcp-Method: tools/list\x00admin\r\n", string(modernBody(tl, "")))}, status: 400, code: bare},
		{name: "header line without a colon", req: request{raw: rawPost("Mcp-Method tools/list\r\n", string(modernBody(tl, "")))}, status: 400, code: bare},
		{name: "oversized header", req: post("/mcp", alice(tl, "X-Padding", strings.Repeat("a", 2<<20)), modernBody(tl, "")), status: 431, code: bare},
		{name: "Mcp-Name decoding to CRLF", req: modernCall(aliceKey, `{"city":"Oslo"}`, "Mcp-Name", b64("weather_forecast\r\nX-Injected: 1")), status: 400, code: -32020},
		{name: "duplicated Mcp-Method, same value", req: post("/mcp", append(alice(tl), header{"Mcp-Method", tl}), modernBody(tl, "")), status: 400, code: -32020},
		{name: "duplicated Mcp-Method, different values", req: post("/mcp", append(alice(tl), header{"Mcp-Method", "tools/call"}), modernBody(tl, "")), status: 400, code: -32020},
		{name: "Mcp-Method mismatch", req: post("/mcp", alice("tools/call"), modernBody(tl, "")), status: 400, code: -32020},
		{name: "Mcp-Method in another case", req: post("/mcp", alice("TOOLS/LIST"), modernBody(tl, "")), status: 400, code: -32020},
		{name: "Mcp-Method missing", req: post("/mcp", alice(tl, "Mcp-Method", drop), modernBody(tl, "")), status: 400, code: -32020},
		{name: "MCP-Protocol-Version differs from _meta", req: post("/mcp", alice(tl, "Mcp-Protocol-Version", "2025-11-25"), modernBody(tl, "")), status: 400, code: -32020},
		{name: "MCP-Protocol-Version missing", req: post("/mcp", alice(tl, "Mcp-Protocol-Version", drop), modernBody(tl, "")), status: 400, code: -32020},
		{name: "Mcp-Name mismatch", req: modernCall(aliceKey, `{"city":"Oslo"}`, "Mcp-Name", "weather_current_conditions"), status: 400, code: -32020},
		{name: "Mcp-Name missing", req: modernCall(aliceKey, `{"city":"Oslo"}`, "Mcp-Name", drop), status: 400, code: -32020},
		{name: "Mcp-Name malformed base64", req: modernCall(aliceKey, `{"city":"Oslo"}`, "Mcp-Name", "=?base64?!!!?="), status: 400, code: -32020},
		{name: "Mcp-Name in base64 form", req: modernCall(aliceKey, `{"city":"Oslo"}`, "Mcp-Name", b64("weather_forecast")), status: 200, code: success},
		{name: "Mcp-Name duplicated", req: post("/mcp", append(alice("tools/call", "Mcp-Name", "weather_forecast"), header{"Mcp-Name", "notes_create_note"}), modernBody("tools/call", `"name":"weather_forecast","arguments":{"city":"Oslo"}`)), status: 400, code: -32020},
		{name: "Mcp-Name missing on resources/read", req: post("/mcp", alice("resources/read"), modernBody("resources/read", `"uri":"weather://stations/a"`)), status: 400, code: -32020},
		{name: "Mcp-Name mismatch on prompts/get", req: post("/mcp", alice("prompts/get", "Mcp-Name", "weather_pack_bag"), modernBody("prompts/get", `"name":"weather_plan_trip"`)), status: 400, code: -32020},
		{name: "Mcp-Param header missing", req: post("/mcp", alice("tools/call", "Mcp-Name", "weather_regional_report"), modernBody("tools/call", `"name":"weather_regional_report","arguments":{"region":"north"}`)), status: 400, code: -32020},
		{name: "Mcp-Param header mismatch", req: post("/mcp", alice("tools/call", "Mcp-Name", "weather_regional_report", "Mcp-Param-Region", "south"), modernBody("tools/call", `"name":"weather_regional_report","arguments":{"region":"north"}`)), status: 400, code: -32020},
		{name: "Mcp-Param header for an absent argument", req: post("/mcp", alice("tools/call", "Mcp-Name", "weather_forecast", "Mcp-Param-Region", "north"), modernBody("tools/call", `"name":"weather_forecast","arguments":{"city":"Oslo"}`)), status: 200, code: success},

		// ---- cursor tampering and replay ----
		{name: "garbage cursor", req: modernList(aliceKey, tl, cursorParam("!!not-a-cursor!!")), status: 400, code: -32602},
		{name: "cursor over 512 characters", req: modernList(aliceKey, tl, cursorParam(strings.Repeat("A", 600))), status: 400, code: -32602},
		{name: "cursor with a negative count", req: modernList(aliceKey, tl, cursorParam(tamperedCursor(fx.aliceToolsCursor, "d", -5))), status: 400, code: -32602},
		{name: "cursor with an extra member", req: modernList(aliceKey, tl, cursorParam(tamperedCursor(fx.aliceToolsCursor, "admin", true))), status: 400, code: -32602},
		{name: "cursor with its kind rewritten", req: modernList(aliceKey, "prompts/list", cursorParam(tamperedCursor(fx.aliceToolsCursor, "k", "prompts"))), status: 200, code: success},
		{name: "tools cursor replayed on prompts/list", req: modernList(aliceKey, "prompts/list", cursorParam(fx.aliceToolsCursor)), status: 400, code: -32602},
		{name: "tools cursor replayed on resources/list", req: modernList(aliceKey, "resources/list", cursorParam(fx.aliceToolsCursor)), status: 400, code: -32602},
		{name: "prompts cursor replayed on tools/list", req: modernList(aliceKey, tl, cursorParam(fx.alicePromptsCursor)), status: 400, code: -32602},
		{name: "resources cursor replayed on resources/templates/list", req: modernList(aliceKey, "resources/templates/list", cursorParam(fx.aliceResourcesCursor)), status: 400, code: -32602},
		{name: "bob's cursor replayed by alice", req: modernList(aliceKey, tl, cursorParam(fx.bobToolsCursor)), status: 200, code: success, check: onlyAliceTools},
		{name: "alice's cursor in bob's Legacy session, tampered", req: post("/mcp", legacyHeaders(bobKey, fx.bobSession), legacyBody(tl, `{"cursor":"`+fx.aliceToolsCursor+`x"}`)), status: 200, code: -32602},
		{name: "cursor on the optimizer's one-page list", req: post("/mcp/optimized", alice(tl), modernBody(tl, cursorParam(fx.aliceToolsCursor))), status: 400, code: -32602},
		{name: "empty cursor is the first page", req: modernList(aliceKey, tl, cursorParam("")), status: 200, code: success, check: onlyAliceTools},

		// ---- SQL metacharacters in find_tool ----
		{name: "find_tool: quote and DROP TABLE", req: findTool(`weather'; DROP TABLE tool_documents; --`, ""), status: 200, code: success, check: searchWorked},
		{name: "find_tool: OR 1=1", req: findTool(`' OR '1'='1`, `notes' OR 'x'='x`), status: 200, code: success, check: searchWorked},
		{name: "find_tool: LIKE wildcards", req: findTool(`%`, `_%_`), status: 200, code: success, check: searchWorked},
		{name: "find_tool: backslashes", req: findTool(`weather \\ \' \"`, `\`), status: 200, code: success, check: searchWorked},
		{name: "find_tool: dollar quoting", req: findTool(`$$ forecast $$; SELECT pg_sleep(30); $$`, `$1`), status: 200, code: success, check: searchWorked},
		{name: "find_tool: tsquery operators", req: findTool(`forecast & !weather | (city <-> :*)`, `'a':*`), status: 200, code: success, check: searchWorked},
		{name: "find_tool: NUL and control characters", req: findTool("forecast\x00\x01\x1b[31m", "\x00"), status: 200, code: success, check: searchWorked},
		{name: "find_tool in a Legacy session: quote and DROP TABLE", req: post("/mcp/optimized", legacyHeaders(aliceKey, fx.aliceSession), legacyBody("tools/call", `{"name":"find_tool","arguments":{"tool_description":"forecast'); DROP TABLE scopes CASCADE; --"}}`)), status: 200, code: success, check: searchWorked},
		{name: "find_tool: very long query", req: findTool(strings.Repeat("forecast weather ", 4000), ""), status: 200, code: success, check: onlyAliceTools},

		// ---- unknown and removed methods ----
		{name: "unknown method", req: modernList(aliceKey, "foo/bar", ""), status: 404, code: -32601},
		{name: "ping under Modern", req: modernList(aliceKey, "ping", ""), status: 404, code: -32601},
		{name: "logging/setLevel under Modern", req: modernList(aliceKey, "logging/setLevel", `"level":"debug"`), status: 404, code: -32601},
		{name: "resources/subscribe under Modern", req: modernList(aliceKey, "resources/subscribe", `"uri":"weather://stations/a"`), status: 404, code: -32601},
		{name: "initialize with Modern _meta", req: modernList(aliceKey, "initialize", `"protocolVersion":"2026-07-28","capabilities":{}`), status: 404, code: -32601},
		{name: "method name of 8 KiB", req: modernList(aliceKey, strings.Repeat("m", 8<<10), ""), status: 404, code: -32601},
		{name: "unknown method in a Legacy session", req: post("/mcp", legacyHeaders(aliceKey, fx.aliceSession), legacyBody("foo/bar", "")), status: 200, code: -32601},
		{name: "Modern method in a Legacy session", req: post("/mcp", legacyHeaders(aliceKey, fx.aliceSession), legacyBody("server/discover", "")), status: 200, code: -32601},

		// ---- wrong eras ----
		{name: "Modern _meta on a Legacy session", req: post("/mcp", legacyHeaders(aliceKey, fx.aliceSession), modernBody(tl, "")), status: 400, code: -32020},
		{name: "Modern request carrying a session id", req: post("/mcp", alice(tl, "Mcp-Session-Id", fx.aliceSession), modernBody(tl, "")), status: 200, code: success, check: onlyAliceTools},
		{name: "Legacy request without a session", req: post("/mcp", legacyHeaders(aliceKey, ""), legacyBody(tl, "")), status: 400, code: -32602},
		{name: "Legacy version in _meta", req: post("/mcp", alice(tl, "Mcp-Protocol-Version", "2025-06-18"), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-06-18","io.modelcontextprotocol/clientCapabilities":{}}}}`)), status: 400, code: -32022, check: unsupportedVersionData("2025-06-18")},
		{name: "missing _meta", req: post("/mcp", alice(tl), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`)), status: 400, code: -32602},
		{name: "missing clientCapabilities", req: post("/mcp", alice(tl), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)), status: 400, code: -32602},
		{name: "missing protocolVersion", req: post("/mcp", alice(tl), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}}`)), status: 400, code: -32602},

		// ---- wrong versions ----
		{name: "version 2099-01-01", req: post("/mcp", alice(tl, "Mcp-Protocol-Version", "2099-01-01"), []byte(strings.ReplaceAll(string(modernBody(tl, "")), "2026-07-28", "2099-01-01"))), status: 400, code: -32022, check: unsupportedVersionData("2099-01-01")},
		{name: "version 1900-01-01", req: post("/mcp", alice(tl, "Mcp-Protocol-Version", "1900-01-01"), []byte(strings.ReplaceAll(string(modernBody(tl, "")), "2026-07-28", "1900-01-01"))), status: 400, code: -32022, check: unsupportedVersionData("1900-01-01")},
		{name: "version with a trailing space", req: post("/mcp", alice(tl, "Mcp-Protocol-Version", "=?base64?"+base64.StdEncoding.EncodeToString([]byte("2026-07-28 "))+"?="), []byte(strings.ReplaceAll(string(modernBody(tl, "")), "2026-07-28", "2026-07-28 "))), status: 400, code: -32022},
		{name: "header 1900-01-01 without _meta", req: post("/mcp", legacyHeaders(aliceKey, "", "Mcp-Protocol-Version", "1900-01-01"), legacyBody(tl, "")), status: 400, code: -32022},
		{name: "header 2099-01-01 without _meta", req: post("/mcp", legacyHeaders(aliceKey, "", "Mcp-Protocol-Version", "2099-01-01"), legacyBody(tl, "")), status: 400, code: -32602},
		{name: "initialize asking for 2099-01-01", req: post("/mcp", legacyHeaders(aliceKey, "", "Mcp-Protocol-Version", drop), legacyBody("initialize", `{"protocolVersion":"2099-01-01","capabilities":{},"clientInfo":{"name":"h","version":"1"}}`)), status: 200, code: success, check: negotiated},
		{name: "initialize asking for 1900-01-01", req: post("/mcp", legacyHeaders(aliceKey, "", "Mcp-Protocol-Version", drop), legacyBody("initialize", `{"protocolVersion":"1900-01-01","capabilities":{},"clientInfo":{"name":"h","version":"1"}}`)), status: 200, code: success, check: negotiated},
		{name: "Legacy session with an unsupported version header", req: post("/mcp", legacyHeaders(aliceKey, fx.aliceSession, "Mcp-Protocol-Version", "2024-01-01"), legacyBody(tl, "")), status: 400, code: bare},

		// ---- Accept and Content-Type ----
		{name: "Accept missing", req: post("/mcp", alice(tl, "Accept", drop), modernBody(tl, "")), status: 400, code: bare},
		{name: "Accept JSON only", req: post("/mcp", alice(tl, "Accept", "application/json"), modernBody(tl, "")), status: 400, code: bare},
		{name: "Accept event stream only", req: post("/mcp", alice(tl, "Accept", "text/event-stream"), modernBody(tl, "")), status: 400, code: bare},
		{name: "Content-Type text/plain", req: post("/mcp", alice(tl, "Content-Type", "text/plain"), modernBody(tl, "")), status: 415, code: bare},
		{name: "Content-Type missing", req: post("/mcp", alice(tl, "Content-Type", drop), modernBody(tl, "")), status: 415, code: bare},
		{name: "Content-Type form", req: post("/mcp", alice(tl, "Content-Type", "application/x-www-form-urlencoded"), modernBody(tl, "")), status: 415, code: bare},
		{name: "Content-Type with charset", req: post("/mcp", alice(tl, "Content-Type", "application/json; charset=utf-8"), modernBody(tl, "")), status: 200, code: success},

		// ---- notifications and responses ----
		{name: "Modern notification without Mcp-Method", req: post("/mcp", alice("", "Mcp-Method", drop), []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{`+modernMeta+`,"requestId":1}}`)), status: 400, code: -32020},
		{name: "Modern notification", req: post("/mcp", alice("notifications/cancelled"), []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{`+modernMeta+`,"requestId":1}}`)), status: 202, code: success},
		{name: "Modern client sends a response", req: post("/mcp", alice(""), []byte(`{"jsonrpc":"2.0","id":5,"result":{"`+strings.TrimPrefix(modernMeta, `"`)+`}}`)), status: 400, code: bare},

		// ---- GET, DELETE and sessions ----
		{name: "GET without a session", req: request{method: http.MethodGet, header: []header{{"Authorization", "Bearer " + aliceKey}, {"Accept", "text/event-stream"}}}, status: 405, code: bare, check: allowPOST},
		{name: "DELETE without a session", req: request{method: http.MethodDelete, header: []header{{"Authorization", "Bearer " + aliceKey}}}, status: 405, code: bare, check: allowPOST},
		{name: "PUT", req: request{method: http.MethodPut, header: []header{{"Authorization", "Bearer " + aliceKey}}, body: modernBody(tl, "")}, status: 405, code: bare},
		{name: "forged session id on POST", req: post("/mcp", legacyHeaders(aliceKey, forged), legacyBody(tl, "")), status: 404, code: bare},
		{name: "tampered session id on POST", req: post("/mcp", legacyHeaders(aliceKey, flipped), legacyBody(tl, "")), status: 404, code: bare},
		{name: "session id of 16 KiB", req: post("/mcp", legacyHeaders(aliceKey, strings.Repeat("s", 16<<10)), legacyBody(tl, "")), status: 404, code: bare},
		{name: "alice's session presented by bob", req: post("/mcp", legacyHeaders(bobKey, fx.aliceSession), legacyBody(tl, "")), status: 404, code: bare},
		{name: "bob's session GET by alice", req: request{method: http.MethodGet, header: []header{{"Authorization", "Bearer " + aliceKey}, {"Accept", "text/event-stream"}, {"Mcp-Session-Id", fx.bobSession}}}, status: 404, code: bare},
		{name: "bob's session DELETE by alice", req: request{method: http.MethodDelete, header: []header{{"Authorization", "Bearer " + aliceKey}, {"Mcp-Session-Id", fx.bobSession}}}, status: 404, code: bare},
		{name: "forged session GET", req: request{method: http.MethodGet, header: []header{{"Authorization", "Bearer " + aliceKey}, {"Accept", "text/event-stream"}, {"Mcp-Session-Id", forged}}}, status: 404, code: bare},

		// ---- authentication, origin, host ----
		{name: "no credentials", req: post("/mcp", modernHeaders(aliceKey, tl, "Authorization", drop), modernBody(tl, "")), status: 401, code: bare},
		{name: "unknown API key", req: post("/mcp", modernHeaders("mallory-key", tl), modernBody(tl, "")), status: 401, code: bare},
		{name: "two bearer tokens in one Authorization header", req: post("/mcp", modernHeaders(aliceKey, tl, "Authorization", "Bearer "+aliceKey+" , Bearer "+bobKey), modernBody(tl, "")), status: 401, code: bare},
		{name: "foreign Origin", req: post("/mcp", alice(tl, "Origin", "http://evil.example"), modernBody(tl, "")), status: 403, code: bare},
		{name: "foreign Host on a loopback bind", req: post("/mcp", alice(tl, "Host", "evil.example"), modernBody(tl, "")), status: 403, code: bare},
	}
}

func negotiated(t *testing.T, r response) {
	t.Helper()
	result, _, _ := r.rpc()
	if string(result["protocolVersion"]) != `"2025-11-25"` {
		t.Errorf("initialize negotiated %s, want \"2025-11-25\"", result["protocolVersion"])
	}
}

func allowPOST(t *testing.T, r response) {
	t.Helper()
	if !strings.Contains(r.header.Get("Allow"), "POST") {
		t.Errorf("Allow: %q, want POST", r.header.Get("Allow"))
	}
}
