package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/gateway/internal/auth"
	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/rpc"
)

// specErrorCodes are the JSON-RPC error codes MCP lets a server emit:
// the JSON-RPC standard ones, the three 2026-07-28 defines in its reserved
// range, and the 2025-11-25 resource-not-found.
var specErrorCodes = map[int]bool{
	wire.CodeParseError: true, wire.CodeInvalidRequest: true, wire.CodeMethodNotFound: true, wire.CodeInvalidParams: true,
	wire.CodeInternalError: true, wire.CodeHeaderMismatch: true, wire.CodeMissingCapability: true, wire.CodeUnsupportedVer: true,
	wire.CodeResourceNotFound: true,
}

// jsonRPCSeeds are request bodies for both fuzz targets below: valid
// messages of both eras, and malformed ones of every kind the hostile
// input test sends over the wire.
var jsonRPCSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + modernMeta + `}}`,
	`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{` + modernMeta + `,"name":"alpha_echo","arguments":{"text":"hi"}}}`,
	`{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{` + modernMeta + `}}`,
	`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
	`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`,
	`{"jsonrpc":"2.0","id":3,"result":{}}`,
	`{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"x"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
	``, `{`, `}`, `null`, `true`, `"x"`, `1`, `[]`, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, ` [1]`,
	`{"jsonrpc":"1.0","id":1,"method":"tools/list"}`,
	`{"id":1,"method":"tools/list"}`,
	`{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`,
	`{"jsonrpc":"2.0","id":[1],"method":"tools/list"}`,
	`{"jsonrpc":"2.0","id":null,"method":"tools/list"}`,
	`{"jsonrpc":"2.0","id":true,"method":"tools/list"}`,
	`{"jsonrpc":"2.0","id":1,"method":7}`,
	`{"jsonrpc":"2.0","id":1,"method":""}`,
	`{"jsonrpc":"2.0","id":1,"method":null}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":[1,2]}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":"x"}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":[]}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":7}}}`,
	`{"jsonrpc":"2.0","id":1,"METHOD":"tools/list"}`,
	`{"JSONRPC":"2.0","id":1,"method":"tools/list"}`,
	`{"jsonrpc":"2.0","Id":1,"method":"tools/list"}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/list"} trailing`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/list"}{"jsonrpc":"2.0"}`,
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/\xff\"}",
	"\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}",
	`{"jsonrpc":"2.0","id":1e400,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":-0.5,"method":"ping"}`,
	strings.Repeat(`{"a":`, 200) + `1` + strings.Repeat(`}`, 200),
	`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":` + strings.Repeat(`{"a":`, 100) + `1` + strings.Repeat(`}`, 100) + `}`,
}

// strictMessage decodes body the way JSON-RPC 2.0 defines it: member names
// are case-sensitive, and the text is exactly one JSON object.
func strictMessage(body []byte) (map[string]json.RawMessage, bool) {
	if !json.Valid(body) {
		return nil, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || m == nil {
		return nil, false
	}
	return m, true
}

// FuzzParseMessage checks JSON-RPC decoding: it never panics, every
// failure is a standard JSON-RPC error, and anything it accepts really is
// one JSON-RPC 2.0 request, notification or response, with the members
// spelled exactly as the specification spells them.
func FuzzParseMessage(f *testing.F) {
	for _, s := range jsonRPCSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		msg, id, rerr := wire.Parse(body)
		if rerr != nil {
			if rerr.Code != wire.CodeParseError && rerr.Code != wire.CodeInvalidRequest && rerr.Code != wire.CodeInvalidParams {
				t.Fatalf("wire.Parse(%q) failed with %d, not a JSON-RPC request error", body, rerr.Code)
			}
			if !json.Valid(body) && rerr.Code != wire.CodeParseError && !bytes.HasPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("[")) {
				t.Fatalf("wire.Parse(%q): invalid JSON answered %d, want %d", body, rerr.Code, wire.CodeParseError)
			}
			if id != nil && validID(id) == nil {
				t.Fatalf("wire.Parse(%q) echoes id %s, which is not a string or number", body, id)
			}
			return
		}
		m, ok := strictMessage(body)
		if !ok {
			t.Fatalf("parseMessage accepted %q, which is not one JSON object", body)
		}
		if string(m["jsonrpc"]) != `"2.0"` {
			t.Fatalf("parseMessage accepted %q without \"jsonrpc\":\"2.0\"", body)
		}
		if !bytes.Equal(msg.ID, m["id"]) || !bytes.Equal(id, msg.ID) {
			t.Fatalf("wire.Parse(%q): id %s / %s, the body has %s", body, msg.ID, id, m["id"])
		}
		if msg.ID != nil && validID(msg.ID) == nil {
			t.Fatalf("wire.Parse(%q) accepted id %s", body, msg.ID)
		}
		if msg.IsResponse {
			_, hasResult := m["result"]
			_, hasError := m["error"]
			if _, hasMethod := m["method"]; hasMethod || msg.ID == nil || !(hasResult || hasError) {
				t.Fatalf("wire.Parse(%q) took a non-response for a response", body)
			}
			return
		}
		var method string
		if json.Unmarshal(m["method"], &method) != nil || method == "" || method != msg.Method {
			t.Fatalf("wire.Parse(%q) read method %q, the body has %s", body, msg.Method, m["method"])
		}
		if p, has := m["params"]; has && string(p) != "null" {
			var o map[string]json.RawMessage
			if json.Unmarshal(p, &o) != nil || o == nil {
				t.Fatalf("wire.Parse(%q) accepted params %s, not an object", body, p)
			}
		}
	})
}

// FuzzClassifyRequest sends arbitrary bodies with arbitrary era markers
// (protocol version header, Mcp-Method, session id, media types) through
// the whole /mcp POST path of a gateway over fake services. Whatever the
// era decision, the answer is never a 5xx, every error is a JSON-RPC error
// with a spec code at the status the spec ties to it, and a body that is
// not a valid JSON-RPC message never gets a success.
func FuzzClassifyRequest(f *testing.F) {
	handler := fuzzGateway(f)

	// A real Legacy session of alice, so fuzzed session traffic reaches
	// the Legacy dispatch too.
	init := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(jsonRPCSeeds[4]))
	init.Header.Set("Authorization", "Bearer alice-key")
	init.Header.Set("Content-Type", "application/json")
	init.Header.Set("Accept", "application/json, text/event-stream")
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, init)
	session := rec.Header().Get("Mcp-Session-Id")
	if rec.Code != http.StatusOK || session == "" {
		f.Fatalf("initialize: %d %q", rec.Code, rec.Body.String())
	}

	for i, s := range jsonRPCSeeds {
		f.Add([]byte(s), "2026-07-28", "tools/list", uint8(i))
		f.Add([]byte(s), "", "", uint8(i*7))
	}
	f.Add([]byte(jsonRPCSeeds[1]), "2026-07-28", "tools/call", uint8(0))
	f.Add([]byte(jsonRPCSeeds[0]), "2099-01-01", "tools/list", uint8(0))
	f.Add([]byte(jsonRPCSeeds[0]), "1900-01-01", "tools/list", uint8(0))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), "2025-11-25", "", uint8(1))

	contentTypes := []string{"application/json", "application/json; charset=utf-8", "text/plain", ""}
	accepts := []string{"application/json, text/event-stream", "application/json", "*/*", ""}
	f.Fuzz(func(t *testing.T, body []byte, version, mcpMethod string, knobs uint8) {
		r := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		r = r.WithContext(ctx)
		r.Header.Set("Authorization", "Bearer alice-key")
		r.Header["Content-Type"] = []string{contentTypes[knobs&3]}
		r.Header["Accept"] = []string{accepts[(knobs>>2)&3]}
		if version != "" {
			r.Header["Mcp-Protocol-Version"] = []string{version}
		}
		if mcpMethod != "" {
			r.Header["Mcp-Method"] = []string{mcpMethod}
		}
		switch (knobs >> 4) & 3 {
		case 1:
			r.Header.Set("Mcp-Session-Id", session)
		case 2:
			r.Header.Set("Mcp-Session-Id", "forged-"+session[:8])
		}
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, r)

		status := w.Code
		if status >= 500 {
			t.Fatalf("status %d for %q: %s", status, body, w.Body.String())
		}
		_, _, parseErr := wire.Parse(body)
		switch status {
		case http.StatusAccepted:
			if parseErr != nil {
				t.Fatalf("malformed body %q accepted with 202", body)
			}
			return
		case http.StatusTooManyRequests:
			// Relayed cancellations are rate limited per principal (the
			// fuzzer sends thousands as alice): a well-formed
			// notifications/cancelled may be refused, as a rate limit.
			msg, _, _ := wire.Parse(body)
			if msg == nil || msg.Method != "notifications/cancelled" {
				t.Fatalf("status 429 for %q: %s", body, w.Body.String())
			}
			var env struct {
				Error *wire.Error `json:"error"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil || env.Error == nil || env.Error.Code != wire.CodeRateLimited || w.Header().Get("Retry-After") == "" {
				t.Fatalf("429 for %q is not a rate limit's answer (error code 429 with Retry-After): %v %s", body, w.Header(), w.Body.String())
			}
			return
		case http.StatusOK, http.StatusBadRequest, http.StatusNotFound, http.StatusUnsupportedMediaType:
		default:
			t.Fatalf("status %d for %q: %s", status, body, w.Body.String())
		}
		if ct := w.Header().Get("Content-Type"); strings.HasPrefix(ct, "text/event-stream") {
			// A stream (subscriptions/listen) only answers a valid request.
			if parseErr != nil || status != http.StatusOK {
				t.Fatalf("stream opened with %d for %q", status, body)
			}
			return
		}
		var env struct {
			JSONRPC string          `json:"jsonrpc"`
			Result  json.RawMessage `json:"result"`
			Error   *wire.Error     `json:"error"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil || env.JSONRPC != "2.0" || (env.Result == nil) == (env.Error == nil) {
			t.Fatalf("status %d with a body that is not one JSON-RPC response: %q (request %q)", status, w.Body.String(), body)
		}
		if env.Error == nil {
			if status != http.StatusOK {
				t.Fatalf("a result with status %d", status)
			}
			if parseErr != nil {
				t.Fatalf("malformed body %q (%v) got a result: %s", body, parseErr, w.Body.String())
			}
			return
		}
		if !specErrorCodes[env.Error.Code] {
			t.Fatalf("error code %d is not one MCP defines (request %q)", env.Error.Code, body)
		}
		// A malformed body is 400, or 415 when it is not even said to be
		// JSON.
		if want := http.StatusBadRequest; parseErr != nil && knobs&3 >= 2 {
			if status != http.StatusUnsupportedMediaType {
				t.Fatalf("malformed body %q of Content-Type %q answered %d, want 415", body, contentTypes[knobs&3], status)
			}
		} else if parseErr != nil && status != want {
			t.Fatalf("malformed body %q answered %d, want 400", body, status)
		}
		if status == http.StatusNotFound && env.Error.Code != wire.CodeMethodNotFound && (knobs>>4)&3 == 0 {
			// Without a session id a 404 can only mean an unknown method.
			t.Fatalf("404 with code %d for %q", env.Error.Code, body)
		}
	})
}

// fuzzGateway is startBackends plus startGateway for any testing.TB (those
// take *testing.T), serving the handler in process: the fake aggregator
// and indexer over real gRPC, the gateway with the usual test config.
func fuzzGateway(tb testing.TB) http.Handler {
	tb.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	b := newBackends()
	// beta_slow reports on channels nobody reads here; drain them so
	// fuzzed calls of it never block the fake aggregator.
	stop := make(chan struct{})
	tb.Cleanup(func() { close(stop) })
	go func() {
		for {
			select {
			case <-b.slowStarted:
			case <-b.slowEnded:
			case <-stop:
				return
			}
		}
	}()
	b.serve(tb)

	cfg := testGatewayConfig(b)
	cfg.Timeouts.Request = config.Duration(500 * time.Millisecond)
	aggConn, err := rpc.Dial(cfg.Aggregator, config.TLS{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { aggConn.Close() })
	idxConn, err := rpc.Dial(cfg.Indexer, config.TLS{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { idxConn.Close() })
	deps := Deps{
		Aggregator: aggregatorv1.NewAggregatorServiceClient(aggConn),
		Indexer:    indexerv1.NewIndexerServiceClient(idxConn),
		Log:        log,
	}
	if deps.Auth, err = auth.New(cfg.Auth, nil); err != nil {
		tb.Fatal(err)
	}
	gw, err := New(cfg, deps)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(gw.Stop)
	return gw.Handler()
}

// validID returns id if it is a JSON string or number (JSON-RPC's rule for
// ids), else nil.
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

// TestCancellationFloodIsRateLimited: a Legacy session's cancellations of
// requests not running here are relayed within a per-principal rate; past
// its burst the answer is a rate limit's, as every other one the gateway
// gives (error code 429 in an HTTP 429, Retry-After, data.retryAfterSeconds).
func TestCancellationFloodIsRateLimited(t *testing.T) {
	handler := fuzzGateway(t)
	post := func(body, session string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer alice-key")
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			r.Header.Set("Mcp-Session-Id", session)
		}
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, r)
		return w
	}
	init := post(jsonRPCSeeds[4], "")
	session := init.Header().Get("Mcp-Session-Id")
	if init.Code != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d %q", init.Code, init.Body.String())
	}
	for i := range 100 {
		w := post(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}`, i), session)
		if w.Code == http.StatusAccepted {
			continue
		}
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" {
			t.Fatalf("cancellation %d: %d, Retry-After %q; want 202 or 429 with Retry-After 1", i, w.Code, w.Header().Get("Retry-After"))
		}
		var env struct {
			ID    json.RawMessage `json:"id"`
			Error struct {
				Code int `json:"code"`
				Data struct {
					RetryAfterSeconds int `json:"retryAfterSeconds"`
				} `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil || string(env.ID) != "null" || env.Error.Code != wire.CodeRateLimited || env.Error.Data.RetryAfterSeconds != 1 {
			t.Fatalf("cancellation %d refused with %s (%v); want a rate limit's error, id null", i, w.Body.String(), err)
		}
		if i < 20 {
			t.Fatalf("refused at cancellation %d, inside the burst of 20", i)
		}
		return
	}
	t.Fatal("100 cancellations at once were all relayed; want the rate to refuse some")
}
