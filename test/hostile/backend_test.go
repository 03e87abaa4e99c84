package hostile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// rawBackend is a hostile MCP backend written by hand: a Legacy
// (2025-11-25) server over plain HTTP whose answers to everything but the
// handshake are answer's, so a test can send what no real server would.
type rawBackend struct {
	srv *httptest.Server
	// answer writes the response to one request (method, its id and
	// params as sent).
	answer func(w http.ResponseWriter, method string, id, params json.RawMessage)
}

// newRawBackend starts a raw backend; answer handles every request but
// initialize and ping.
func newRawBackend(t *testing.T, answer func(w http.ResponseWriter, method string, id, params json.RawMessage)) *rawBackend {
	t.Helper()
	b := &rawBackend{answer: answer}
	b.srv = httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(b.srv.Close)
	return b
}

// config is the aggregator's entry for the backend.
func (b *rawBackend) config(name string) config.Backend {
	return config.Backend{Name: name, URL: b.srv.URL + "/mcp", Protocol: config.ProtocolLegacy}
}

func (b *rawBackend) serve(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
	case http.MethodDelete:
		return
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if json.Unmarshal(body, &m) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if m.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if m.Method == "initialize" {
		w.Header().Set("Mcp-Session-Id", "raw-session")
		writeResult(w, m.ID, map[string]any{"protocolVersion": config.ProtocolLegacy,
			"capabilities": map[string]any{"tools": map[string]any{}}, "serverInfo": map[string]any{"name": "raw", "version": "1"}})
		return
	}
	if m.Method == "ping" {
		writeResult(w, m.ID, map[string]any{})
		return
	}
	b.answer(w, m.Method, m.ID, m.Params)
}

// writeResult writes a JSON-RPC result for id.
func writeResult(w http.ResponseWriter, id json.RawMessage, result any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

// listAllTools walks tools/list to its end as a Modern client of key and
// returns every name, or the first page that was not a result.
func (c *client) listAllTools(t *testing.T, key string) ([]string, error) {
	t.Helper()
	var names []string
	cursor := ""
	for range 100 {
		params := ""
		if cursor != "" {
			params = cursorParam(cursor)
		}
		r := c.modern(t, "/mcp", key, "tools/list", params)
		result, rerr, ok := r.rpc()
		if r.status != http.StatusOK || !ok || rerr != nil {
			return names, fmt.Errorf("tools/list: %d %.300s", r.status, r.body)
		}
		names = append(names, toolNames(t, result)...)
		cursor = ""
		if next := result["nextCursor"]; next != nil && json.Unmarshal(next, &cursor) != nil {
			return names, fmt.Errorf("nextCursor %s", next)
		}
		if cursor == "" {
			return names, nil
		}
	}
	return names, errors.New("tools/list never ends")
}

// TestBulkyToolsListed: a backend whose tools have descriptions of
// 20 MiB each (each tools/list page of its own within the 32 MiB a
// message may hold) does not break tools/list: every tool, the other
// backend's and its own, is listed across pages, where a page of
// aggregator.pageSize tools made one gRPC message past what the gateway
// receives and every principal's tools/list failed.
func TestBulkyToolsListed(t *testing.T) {
	const bulky = 4
	description := strings.Repeat("d", 20<<20)
	raw := newRawBackend(t, pagedTools("big_", description, bulky, new(atomic.Int64)))
	_, c := startHarness(t, false, func(cfg *config.Config) {
		cfg.Aggregator.Backends = append(cfg.Aggregator.Backends, raw.config("bulky"))
	})
	testkit.Eventually(t, "every tool of both backends listed", 90*time.Second, func() error {
		names, err := c.listAllTools(t, bobKey)
		if err != nil {
			return err
		}
		for _, want := range []string{"weather_forecast", "bulky_big_0", "bulky_big_3"} {
			if !slices.Contains(names, want) {
				return fmt.Errorf("%s not listed in %d tools", want, len(names))
			}
		}
		return nil
	})
}

// TestHugeResultOnOwnSession: a call that runs on a backend session of
// its own (a Legacy client that set a log level: the backend's log
// messages are relayed) and whose backend answers with a JSON result of
// 256 MiB fails with a JSON-RPC error, and the aggregator does not read
// the whole answer into memory: a message from a backend is bounded
// (32 MiB) on this path as on the others.
func TestHugeResultOnOwnSession(t *testing.T) {
	const size = 256 << 20
	raw := newRawBackend(t, func(w http.ResponseWriter, method string, id, params json.RawMessage) {
		switch method {
		case "tools/list":
			writeResult(w, id, map[string]any{"tools": []any{map[string]any{"name": "huge", "inputSchema": map[string]any{"type": "object"}}}})
		case "tools/call":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(id)+`,"result":{"content":[{"type":"text","text":"`)
			chunk := strings.Repeat("h", 1<<20)
			for range size >> 20 {
				if _, err := io.WriteString(w, chunk); err != nil {
					return
				}
			}
			_, _ = io.WriteString(w, `"}]}}`)
		default:
			http.Error(w, "no", http.StatusBadRequest)
		}
	})
	c, cl := startHarness(t, false, func(cfg *config.Config) {
		cfg.Aggregator.Backends = append(cfg.Aggregator.Backends, raw.config("big"))
	})
	cl.waitListed(t, bobKey, "big_huge", 30*time.Second)
	pid := c.Aggregator.Pid()
	before := procStatus(t, pid, "VmHWM")
	session := cl.initialize(t, bobKey)
	if r := cl.do(t, request{header: legacyHeaders(bobKey, session), body: legacyBody("logging/setLevel", `{"level":"debug"}`)}); r.status != http.StatusOK {
		t.Fatalf("logging/setLevel: %d %s", r.status, r.body)
	}
	r := cl.do(t, request{header: legacyHeaders(bobKey, session), body: legacyBody("tools/call", `{"name":"big_huge","arguments":{}}`)})
	grown := procStatus(t, pid, "VmHWM") - before
	t.Logf("answer %d %.300q; aggregator peak grew %d MiB", r.status, r.body, grown>>20)
	if _, rerr, ok := sseOrJSON(r); !ok || rerr == nil || !specCodes[rerr.Code] {
		t.Errorf("answer %d %.300q, want a JSON-RPC error MCP defines", r.status, r.body)
	}
	// Unbounded, the peak grew by over 3 GiB; bounded, by well under 128
	// MiB: 512 MiB tells the two apart on a loaded machine.
	if grown > 512<<20 {
		t.Errorf("the aggregator's peak memory grew by %d MiB reading a %d MiB answer", grown>>20, size>>20)
	}
}

// sseOrJSON decodes a Legacy answer: a JSON body, or the last event of an
// event stream.
func sseOrJSON(r response) (map[string]json.RawMessage, *rpcError, bool) {
	if strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
		events := strings.Split(strings.TrimSpace(string(r.body)), "\n\n")
		last := events[len(events)-1]
		if i := strings.Index(last, "data: "); i >= 0 {
			r.body = []byte(last[i+len("data: "):])
		}
	}
	return r.rpc()
}

// TestEndlessListingIsBounded: a backend whose tools/list pages each hold
// a tool of 30 MiB, 40 pages long, gets its listing refused once it
// passes what a listing may hold, instead of the aggregator keeping
// every page (over a GiB, and up to listing.MaxPages of 32 MiB each); the
// other backend's tools are listed meanwhile.
func TestEndlessListingIsBounded(t *testing.T) {
	const pages = 40
	description := strings.Repeat("d", 30<<20)
	var served atomic.Int64
	raw := newRawBackend(t, pagedTools("t", description, pages, &served))
	c, cl := startHarness(t, false, func(cfg *config.Config) {
		cfg.Aggregator.Backends = append(cfg.Aggregator.Backends, raw.config("endless"))
	})
	cl.waitListed(t, bobKey, "weather_forecast", 60*time.Second)
	t.Logf("the endless backend served %d pages", served.Load())
	// Unbounded, the peak passed 8 GiB; bounded, it stays within a few
	// copies of the 128 MiB a listing may hold while it is decoded (about
	// 500 to 800 MiB, as the collector runs): 2 GiB tells the two apart
	// on a loaded machine.
	if grown := procStatus(t, c.Aggregator.Pid(), "VmHWM"); grown > 2<<30 {
		t.Errorf("the aggregator's peak memory is %d MiB", grown>>20)
	}
}

// TestBackendRateLimitReachesTheClient: a backend that answers a call
// 429 with Retry-After has refused it unread and asks to be asked again
// later: the client gets the rate limit's answer with the backend's wait
// (HTTP 429, Retry-After, error 429), not "the server is unavailable",
// and the backend's other requests and its health are untouched (its
// shared session is kept).
func TestBackendRateLimitReachesTheClient(t *testing.T) {
	var calls atomic.Int32
	raw := newRawBackend(t, func(w http.ResponseWriter, method string, id, params json.RawMessage) {
		switch method {
		case "tools/list":
			writeResult(w, id, map[string]any{"tools": []any{map[string]any{"name": "busy", "inputSchema": map[string]any{"type": "object"}}}})
		case "tools/call":
			calls.Add(1)
			w.Header().Set("Retry-After", "7")
			http.Error(w, "slow down", http.StatusTooManyRequests)
		default:
			http.Error(w, "no", http.StatusBadRequest)
		}
	})
	_, cl := startHarness(t, false, func(cfg *config.Config) {
		cfg.Aggregator.Backends = append(cfg.Aggregator.Backends, raw.config("limited"))
	})
	cl.waitListed(t, bobKey, "limited_busy", 30*time.Second)
	for range 2 {
		r := cl.do(t, post("/mcp", modernHeaders(bobKey, "tools/call", "Mcp-Name", "limited_busy"), modernBody("tools/call", `"name":"limited_busy","arguments":{}`)))
		_, rerr, ok := r.rpc()
		if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "7" || !ok || rerr == nil || rerr.Code != 429 {
			t.Fatalf("a call the backend limits: HTTP %d, Retry-After %q, %s; want 429 with Retry-After 7 and error 429", r.status, r.header.Get("Retry-After"), r.body)
		}
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("the backend got %d calls, want 2 (each sent once)", n)
	}
	if names, err := cl.listAllTools(t, bobKey); err != nil || !slices.Contains(names, "limited_busy") {
		t.Fatalf("after the refusals the backend's tools: %v, %v", names, err)
	}
}

// waitListed polls until tools/list, walked to its end as the holder of
// key, lists tool.
func (c *client) waitListed(t *testing.T, key, tool string, deadline time.Duration) {
	t.Helper()
	testkit.Eventually(t, tool+" listed", deadline, func() error {
		names, err := c.listAllTools(t, key)
		if err == nil && !slices.Contains(names, tool) {
			err = fmt.Errorf("listed %v", names)
		}
		return err
	})
}

// pagedTools answers tools/list with pages of one tool each, named
// prefix and the page's number, of description, pages long, counting the
// pages it served; it refuses every other method.
func pagedTools(prefix, description string, pages int, served *atomic.Int64) func(http.ResponseWriter, string, json.RawMessage, json.RawMessage) {
	return func(w http.ResponseWriter, method string, id, params json.RawMessage) {
		if method != "tools/list" {
			http.Error(w, "no", http.StatusBadRequest)
			return
		}
		var p struct{ Cursor string }
		_ = json.Unmarshal(params, &p)
		i, _ := strconv.Atoi(p.Cursor)
		page := map[string]any{"tools": []any{map[string]any{"name": fmt.Sprintf("%s%d", prefix, i), "description": description,
			"inputSchema": map[string]any{"type": "object"}}}}
		if i+1 < pages {
			page["nextCursor"] = strconv.Itoa(i + 1)
		}
		served.Add(1)
		writeResult(w, id, page)
	}
}

// TestOwnSessionRefusalOutlivesTheSessionsEnd: a Legacy backend that
// answers GET and DELETE with 405 (MCP allows both: no stream, no
// deletion by clients) and refuses a call outright (a plain 400, a 401
// challenge). A Legacy client that set a log level has its calls run on
// a backend session of their own; the refusal must reach it as the raw
// route reports it. Before, the 405 answering the DELETE that ends that
// session was kept as the call's failure in place of the refusal, and
// the client was told the backend was unavailable ("retry later").
func TestOwnSessionRefusalOutlivesTheSessionsEnd(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		_ = json.Unmarshal(body, &m)
		if m.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		switch m.Method {
		case "initialize":
			w.Header().Set("Mcp-Session-Id", "s1")
			writeResult(w, m.ID, map[string]any{"protocolVersion": config.ProtocolLegacy,
				"capabilities": map[string]any{"tools": map[string]any{}, "logging": map[string]any{}}, "serverInfo": map[string]any{"name": "raw", "version": "1"}})
		case "ping", "logging/setLevel":
			writeResult(w, m.ID, map[string]any{})
		case "tools/list":
			var tools []any
			for _, name := range []string{"plain400", "challenge", "ok"} {
				tools = append(tools, map[string]any{"name": name, "inputSchema": map[string]any{"type": "object"}})
			}
			writeResult(w, m.ID, map[string]any{"tools": tools})
		case "tools/call":
			switch m.Params.Name {
			case "ok":
				writeResult(w, m.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": "fine"}}})
			case "plain400":
				http.Error(w, "bad input", http.StatusBadRequest)
			default:
				w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="x"`)
				http.Error(w, "nope", http.StatusUnauthorized)
			}
		default:
			http.Error(w, "no", http.StatusBadRequest)
		}
	}))
	t.Cleanup(srv.Close)
	_, c := startHarness(t, false, func(cfg *config.Config) {
		cfg.Aggregator.Backends = append(cfg.Aggregator.Backends, config.Backend{Name: "r", URL: srv.URL + "/mcp", Protocol: config.ProtocolLegacy})
	})
	c.waitListed(t, bobKey, "r_plain400", 30*time.Second)
	call := func(session, tool string) (map[string]json.RawMessage, *rpcError) {
		r := c.do(t, request{header: legacyHeaders(bobKey, session), body: legacyBody("tools/call", `{"name":"`+tool+`","arguments":{}}`)})
		result, rerr, ok := r.rpc()
		if !ok {
			t.Fatalf("%s: %d %.300s", tool, r.status, r.body)
		}
		return result, rerr
	}
	for _, tool := range []string{"r_plain400", "r_challenge", "r_ok"} {
		session := c.initialize(t, bobKey)
		_, plain := call(session, tool)
		if r := c.do(t, request{header: legacyHeaders(bobKey, session), body: legacyBody("logging/setLevel", `{"level":"debug"}`)}); r.status != http.StatusOK {
			t.Fatalf("logging/setLevel: %d %s", r.status, r.body)
		}
		result, own := call(session, tool)
		switch {
		case tool == "r_ok" && (own != nil || !strings.Contains(string(result["content"]), "fine")):
			t.Errorf("%s on a session of its own: %+v %s", tool, own, result["content"])
		case tool != "r_ok" && (plain == nil || own == nil || own.Code != plain.Code || own.Message != plain.Message):
			t.Errorf("%s on a session of its own: %+v; want what the plain route says: %+v", tool, own, plain)
		}
	}
}
