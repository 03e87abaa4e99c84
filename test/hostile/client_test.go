package hostile

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// modernMeta is the _meta of a valid 2026-07-28 request.
const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"hostile","version":"1"}}`

// header is one request header line; a request may repeat a name.
type header struct{ name, value string }

// drop, as a header value in an override, removes the header.
const drop = "\x00drop"

type request struct {
	method string // HTTP method; POST when empty
	path   string // /mcp when empty
	header []header
	body   []byte
	// raw, when set, is written to the gateway's socket as is, for
	// requests net/http refuses to send (control characters in headers).
	raw []byte
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// rpc decodes a JSON-RPC response body; ok is false when the body is not
// one.
func (r response) rpc() (result map[string]json.RawMessage, rerr *rpcError, ok bool) {
	var env struct {
		JSONRPC string                     `json:"jsonrpc"`
		Result  map[string]json.RawMessage `json:"result"`
		Error   *rpcError                  `json:"error"`
	}
	if json.Unmarshal(r.body, &env) != nil || env.JSONRPC != "2.0" {
		return nil, nil, false
	}
	return env.Result, env.Error, true
}

type client struct {
	stack *stack
	http  *http.Client
}

func newClient(s *stack) *client {
	return &client{stack: s, http: &http.Client{
		Timeout:       90 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

func (c *client) do(t *testing.T, r request) response {
	t.Helper()
	if r.raw != nil {
		return c.doRaw(t, r.raw)
	}
	method, path := r.method, r.path
	if method == "" {
		method = http.MethodPost
	}
	if path == "" {
		path = "/mcp"
	}
	req, err := http.NewRequest(method, c.stack.base+path, bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	if r.body == nil {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	for _, h := range r.header {
		if h.name == "Host" {
			req.Host = h.value
			continue
		}
		req.Header[http.CanonicalHeaderKey(h.name)] = append(req.Header[http.CanonicalHeaderKey(h.name)], h.value)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: body}
}

func (c *client) doRaw(t *testing.T, raw []byte) response {
	t.Helper()
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(c.stack.base, "http://"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := conn.Write(raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read raw response: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: body}
}

// modernHeaders are the headers a conforming Modern client sends for
// method as the principal of key; overrides replace (or, with drop,
// remove) headers by name, and add new ones.
func modernHeaders(key, method string, overrides ...string) []header {
	hs := []header{
		{"Authorization", "Bearer " + key},
		{"Content-Type", "application/json"},
		{"Accept", "application/json, text/event-stream"},
		{"Mcp-Protocol-Version", "2026-07-28"},
		{"Mcp-Method", method},
	}
	return applyOverrides(hs, overrides)
}

// legacyHeaders are the headers of a 2025-11-25 request in session.
func legacyHeaders(key, session string, overrides ...string) []header {
	hs := []header{
		{"Authorization", "Bearer " + key},
		{"Content-Type", "application/json"},
		{"Accept", "application/json, text/event-stream"},
		{"Mcp-Protocol-Version", "2025-11-25"},
	}
	if session != "" {
		hs = append(hs, header{"Mcp-Session-Id", session})
	}
	return applyOverrides(hs, overrides)
}

func applyOverrides(hs []header, overrides []string) []header {
	for i := 0; i+1 < len(overrides); i += 2 {
		name, value := overrides[i], overrides[i+1]
		replaced := false
		for j := 0; j < len(hs); j++ {
			if strings.EqualFold(hs[j].name, name) {
				if value == drop {
					hs = append(hs[:j], hs[j+1:]...)
					j--
				} else {
					hs[j].value = value
				}
				replaced = true
			}
		}
		if !replaced && value != drop {
			hs = append(hs, header{name, value})
		}
	}
	return hs
}

// modernBody is a Modern request; params are members added after _meta.
func modernBody(method, params string) []byte {
	if params != "" {
		params = "," + params
	}
	return []byte(`{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":{` + modernMeta + params + `}}`)
}

// legacyBody is a Legacy request; params is the whole params object.
func legacyBody(method, params string) []byte {
	if params == "" {
		params = "{}"
	}
	return []byte(`{"jsonrpc":"2.0","id":9,"method":"` + method + `","params":` + params + `}`)
}

// modern sends a Modern request to path and returns the response.
func (c *client) modern(t *testing.T, path, key, method, params string, overrides ...string) response {
	t.Helper()
	return c.do(t, request{path: path, header: modernHeaders(key, method, overrides...), body: modernBody(method, params)})
}

// initialize opens a Legacy session as the principal of key.
func (c *client) initialize(t *testing.T, key string) string {
	t.Helper()
	r := c.do(t, request{header: legacyHeaders(key, "", "Mcp-Protocol-Version", drop),
		body: legacyBody("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"hostile","version":"1"}}`)})
	id := r.header.Get("Mcp-Session-Id")
	if r.status != http.StatusOK || id == "" {
		t.Fatalf("initialize: %d %s", r.status, r.body)
	}
	ack := c.do(t, request{header: legacyHeaders(key, id), body: []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)})
	if ack.status != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d %s", ack.status, ack.body)
	}
	return id
}

// nextCursor lists method and returns the page's nextCursor.
func nextCursor(t *testing.T, r response) string {
	t.Helper()
	result, rerr, ok := r.rpc()
	if r.status != http.StatusOK || !ok || rerr != nil {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	var cursor string
	if err := json.Unmarshal(result["nextCursor"], &cursor); err != nil || cursor == "" {
		t.Fatalf("list has no nextCursor: %s", r.body)
	}
	return cursor
}

// toolNames returns the names in a tools/list result.
func toolNames(t *testing.T, result map[string]json.RawMessage) []string {
	t.Helper()
	var tools []struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(result["tools"], &tools); err != nil {
		t.Fatalf("tools: %v", err)
	}
	names := make([]string, len(tools))
	for i, tl := range tools {
		names[i] = tl.Name
	}
	return names
}
