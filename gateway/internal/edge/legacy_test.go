package edge

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

func legacyHeaders(key, sessionID string) map[string]string {
	h := map[string]string{
		"Authorization": "Bearer " + key,
		"Content-Type":  "application/json",
		"Accept":        "application/json, text/event-stream",
	}
	if sessionID != "" {
		h["Mcp-Session-Id"] = sessionID
		h["Mcp-Protocol-Version"] = mcpspec.Legacy
	}
	return h
}

const initializeBody = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// initializeOn runs the Legacy handshake on url and returns the session id.
func initializeOn(t *testing.T, url, key string) string {
	t.Helper()
	resp := send(t, http.MethodPost, url, legacyHeaders(key, ""), initializeBody)
	_, res, rerr := resp.rpc(t)
	id := resp.header.Get("Mcp-Session-Id")
	if resp.status != 200 || rerr != nil || id == "" || string(res["protocolVersion"]) != `"2025-11-25"` {
		t.Fatalf("initialize: %d %s (session %q)", resp.status, resp.body, id)
	}
	if res["resultType"] != nil || res["serverInfo"] == nil {
		t.Fatalf("initialize result shape: %s", resp.body)
	}
	resp = send(t, http.MethodPost, url, legacyHeaders(key, id), `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if resp.status != http.StatusAccepted {
		t.Fatalf("initialized: %d", resp.status)
	}
	return id
}

// TestLegacySessionAcrossReplicas mints a session on one gateway and uses
// it on another with the same key; another principal cannot use it, and
// after DELETE on one replica it is gone on both.
func TestLegacySessionAcrossReplicas(t *testing.T) {
	b := startBackends(t)
	_, one := startGateway(t, b, testGatewayConfig(b))
	_, two := startGateway(t, b, testGatewayConfig(b))
	id := initializeOn(t, one.URL+"/mcp", "alice-key")

	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
	resp := send(t, http.MethodPost, two.URL+"/mcp", legacyHeaders("alice-key", id), list)
	if _, res, rerr := resp.rpc(t); resp.status != 200 || rerr != nil || res["resultType"] != nil || res["cacheScope"] != nil || string(res["nextCursor"]) != `"tools:2"` {
		t.Fatalf("list on replica two: %d %s", resp.status, resp.body)
	}
	// The GET stream works on the other replica too.
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, two.URL+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer alice-key")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", id)
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != 200 || stream.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET stream: %v %v", err, stream)
	}
	lines := bufio.NewScanner(stream.Body)
	if !lines.Scan() || lines.Text() != "event: prime" {
		t.Fatalf("GET stream starts with %q", lines.Text())
	}
	cancel()
	stream.Body.Close()

	// Bob presenting alice's session id is treated as an unknown session.
	resp = send(t, http.MethodPost, two.URL+"/mcp", legacyHeaders("bob-key", id), list)
	if resp.status != http.StatusNotFound {
		t.Fatalf("other principal: %d %s", resp.status, resp.body)
	}
	// Tampering with the id breaks the seal.
	tampered := id[:len(id)-2] + "AA"
	if tampered == id {
		tampered = id[:len(id)-2] + "BB"
	}
	if resp = send(t, http.MethodPost, two.URL+"/mcp", legacyHeaders("alice-key", tampered), list); resp.status != http.StatusNotFound {
		t.Fatalf("tampered id: %d", resp.status)
	}

	del := send(t, http.MethodDelete, one.URL+"/mcp", legacyHeaders("alice-key", id), "")
	if del.status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", del.status, del.body)
	}
	// The replica that served the DELETE refuses the id at once; the other
	// hears of it through the indexer's revocation stream, ahead of any
	// request, so it never asks per request.
	resp = send(t, http.MethodPost, one.URL+"/mcp", legacyHeaders("alice-key", id), list)
	if resp.status != http.StatusNotFound {
		t.Fatalf("after DELETE on the same replica: %d %s", resp.status, resp.body)
	}
	testkit.Eventually(t, "the other replica to refuse the deleted session", 10*time.Second, func() bool {
		resp = send(t, http.MethodPost, two.URL+"/mcp", legacyHeaders("alice-key", id), list)
		return resp.status == http.StatusNotFound
	})
	{
		_, _, rerr := resp.rpc(t)
		if rerr == nil {
			t.Fatalf("404 without JSON-RPC error: %s", resp.body)
		}
	}
}

// TestLegacySessionRevocationFailsOpen: with the indexer unreachable a
// session keeps working (principal-bound and expiring), and revocations this
// replica saw stay effective from its local cache.
func TestLegacySessionRevocationFailsOpen(t *testing.T) {
	b := startBackends(t)
	_, gw := startGateway(t, b, testGatewayConfig(b))
	url := gw.URL + "/mcp"
	live := initializeOn(t, url, "alice-key")
	deleted := initializeOn(t, url, "alice-key")
	if resp := send(t, http.MethodDelete, url, legacyHeaders("alice-key", deleted), ""); resp.status != http.StatusNoContent {
		t.Fatalf("DELETE: %d", resp.status)
	}
	b.down.Store(true)
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	if resp := send(t, http.MethodPost, url, legacyHeaders("alice-key", live), ping); resp.status != 200 || string(resp.body) != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Fatalf("ping with indexer down: %d %s", resp.status, resp.body)
	}
	if resp := send(t, http.MethodPost, url, legacyHeaders("alice-key", deleted), ping); resp.status != http.StatusNotFound {
		t.Fatalf("deleted session with indexer down: %d", resp.status)
	}
}

// TestLegacyWire checks Legacy-only methods and transport errors.
func TestLegacyWire(t *testing.T) {
	b := startBackends(t)
	_, gw := startGateway(t, b, testGatewayConfig(b))
	url := gw.URL + "/mcp"
	id := initializeOn(t, url, "alice-key")
	// A session with a log level streams its calls (see
	// TestCallNotificationsReachSDKClients); the plain-JSON cases below use
	// one without.
	leveled := initializeOn(t, url, "alice-key")
	cases := []struct {
		name   string
		header map[string]string
		body   string
		status int
		code   int
	}{
		{"ping", legacyHeaders("alice-key", id), `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 200, 0},
		{"setLevel", legacyHeaders("alice-key", leveled), `{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`, 200, 0},
		{"setLevel without level", legacyHeaders("alice-key", leveled), `{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{}}`, 200, wire.CodeInvalidParams},
		{"unknown method", legacyHeaders("alice-key", id), `{"jsonrpc":"2.0","id":4,"method":"server/discover","params":{}}`, 200, wire.CodeMethodNotFound},
		{"missing resource", legacyHeaders("alice-key", id), `{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"file:///x"}}`, 200, wire.CodeResourceNotFound},
		{"bad cursor", legacyHeaders("alice-key", id), `{"jsonrpc":"2.0","id":6,"method":"prompts/list","params":{"cursor":"tools:1"}}`, 200, wire.CodeInvalidParams},
		{"input required", legacyHeaders("alice-key", id), `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"alpha_ask"}}`, 200, wire.CodeInternalError},
		{"client response", legacyHeaders("alice-key", id), `{"jsonrpc":"2.0","id":8,"result":{}}`, 202, 0},
		{"ping before initialize", legacyHeaders("alice-key", ""), `{"jsonrpc":"2.0","id":13,"method":"ping"}`, 200, 0},
		// A _meta naming the session's own revision is no Modern marker
		// (go-sdk reads it so): it was once refused -32022.
		{"session request with a Legacy _meta version", legacyHeaders("alice-key", id), `{"jsonrpc":"2.0","id":14,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}}`, 200, 0},
		{"no session", legacyHeaders("alice-key", ""), `{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{}}`, 400, wire.CodeInvalidParams},
		{"unknown session", legacyHeaders("alice-key", "s1.nonsense"), `{"jsonrpc":"2.0","id":10,"method":"tools/list","params":{}}`, 404, wire.CodeInvalidRequest},
		{"version differs from session", func() map[string]string {
			h := legacyHeaders("alice-key", id)
			h["Mcp-Protocol-Version"] = "2025-06-18"
			return h
		}(), `{"jsonrpc":"2.0","id":11,"method":"tools/list","params":{}}`, 400, wire.CodeInvalidRequest},
		{"unsupported version header", func() map[string]string {
			h := legacyHeaders("alice-key", "")
			h["Mcp-Protocol-Version"] = "1900-01-01"
			return h
		}(), `{"jsonrpc":"2.0","id":12,"method":"tools/list","params":{}}`, 400, wire.CodeUnsupportedVer},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := send(t, http.MethodPost, url, tc.header, tc.body)
			if resp.status != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.status, tc.status, resp.body)
			}
			if tc.status == 202 {
				return
			}
			_, _, rerr := resp.rpc(t)
			if tc.code == 0 && rerr != nil || tc.code != 0 && (rerr == nil || rerr.Code != tc.code) {
				t.Fatalf("error %+v, want code %d", rerr, tc.code)
			}
		})
	}
	// Results keep the backend's _meta except its serverInfo, which would
	// name the backend instead of this server.
	resp := send(t, http.MethodPost, url, legacyHeaders("alice-key", id), `{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"alpha_echo"}}`)
	if _, res, _ := resp.rpc(t); string(res["_meta"]) != `{"trace":"kept"}` || res["resultType"] != nil {
		t.Fatalf("Legacy tools/call result: %s", resp.body)
	}
	// A version other than the session's is a bad request on its GET
	// stream and its DELETE too, as on its POSTs; the session stays.
	wrongVersion := legacyHeaders("alice-key", id)
	wrongVersion["Mcp-Protocol-Version"] = "1900-01-01"
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		if resp := send(t, method, url, wrongVersion, ""); resp.status != http.StatusBadRequest {
			t.Fatalf("%s with another version: %d", method, resp.status)
		}
	}
	// A session or version header sent twice is refused on every method,
	// whichever value comes first: the session stays.
	for _, repeat := range []struct{ header, first, second string }{
		{"Mcp-Session-Id", id, "s1.other"},
		{"Mcp-Session-Id", "s1.other", id},
		{"Mcp-Protocol-Version", "2025-11-25", "2025-11-25"},
	} {
		for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
			req, err := http.NewRequest(method, url, strings.NewReader(`{"jsonrpc":"2.0","id":22,"method":"ping"}`))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range legacyHeaders("alice-key", id) {
				req.Header.Set(k, v)
			}
			req.Header[repeat.header] = []string{repeat.first, repeat.second}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), repeat.header+" header sent more than once") {
				t.Fatalf("%s with %s %q and %q: %d %s", method, repeat.header, repeat.first, repeat.second, resp.StatusCode, body)
			}
		}
	}
	if resp := send(t, http.MethodPost, url, legacyHeaders("alice-key", id), `{"jsonrpc":"2.0","id":21,"method":"ping"}`); resp.status != http.StatusOK {
		t.Fatalf("the session after the refused DELETE: %d %s", resp.status, resp.body)
	}
	if resp := send(t, http.MethodDelete, url, legacyHeaders("alice-key", "s1.nonsense"), ""); resp.status != http.StatusNotFound {
		t.Fatalf("DELETE unknown session: %d", resp.status)
	}
}

// TestLegacyAnswerMustBeAnInputResponse: a Legacy client's answer to an
// input request the gateway sent on its stream is checked as a Modern
// client's inputResponses are, by the same rule (each answer a result,
// an object, else -32602): an answer that is not one is refused, not
// handed on to the backend as the client's input.
func TestLegacyAnswerMustBeAnInputResponse(t *testing.T) {
	b := startBackends(t)
	_, srv := startGateway(t, b, testGatewayConfig(b))
	url := srv.URL + "/mcp"
	for _, result := range []string{`"yes"`, `42`, `[1,2]`, `null`} {
		t.Run(result, func(t *testing.T) {
			modern := send(t, http.MethodPost, url, modernHeaders("tools/call", "Mcp-Name", "alpha_ask"),
				`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+modernMeta+`,"name":"alpha_ask","inputResponses":{"ok":`+result+`}}}`)
			if _, _, rerr := modern.rpc(t); rerr == nil || rerr.Code != wire.CodeInvalidParams {
				t.Fatalf("Modern inputResponses answering %s: %d %s, want -32602", result, modern.status, modern.body)
			}

			sid, _ := initializeEliciting(t, url)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, lines := openStream(t, ctx, url, legacyHeaders("alice-key", sid), `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"alpha_ask","arguments":{}}}`)
			var asked struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if ev := nextEvent(t, lines); json.Unmarshal([]byte(ev), &asked) != nil || asked.Method != "elicitation/create" {
				t.Fatalf("first event %s", ev)
			}
			if r := send(t, http.MethodPost, url, legacyHeaders("alice-key", sid),
				`{"jsonrpc":"2.0","id":`+string(asked.ID)+`,"result":`+result+`}`); r.status != http.StatusAccepted {
				t.Fatalf("answer: %d %s", r.status, r.body)
			}
			var final struct {
				Error *wire.Error `json:"error"`
			}
			if ev := nextEvent(t, lines); json.Unmarshal([]byte(ev), &final) != nil || final.Error == nil || final.Error.Code != wire.CodeInvalidParams {
				t.Fatalf("the call answered %s: %s, want -32602 (not the backend's result)", result, ev)
			}
		})
	}
}

// TestLegacySDKOnSecondReplica runs a pinned go-sdk Legacy client whose
// requests alternate between two replicas, as a load balancer without
// stickiness would send them.
func TestLegacySDKOnSecondReplica(t *testing.T) {
	b := startBackends(t)
	_, one := startGateway(t, b, testGatewayConfig(b))
	_, two := startGateway(t, b, testGatewayConfig(b))
	targets := []string{strings.TrimPrefix(one.URL, "http://"), strings.TrimPrefix(two.URL, "http://")}
	var n atomic.Int64
	roundRobin := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.URL.Host = targets[(n.Add(1)-1)%2]
		r.Header.Set("Authorization", "Bearer alice-key")
		return http.DefaultTransport.RoundTrip(r)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "rr", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: one.URL + "/mcp", HTTPClient: &http.Client{Transport: roundRobin},
		MaxRetries: -1, DisableStandaloneSSE: true}, &mcp.ClientSessionOptions{ProtocolVersion: mcpspec.Legacy})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for i := range 4 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "beta_add", Arguments: map[string]any{"a": i, "b": 1}})
		if err != nil || toolText(t, res) != string(rune('1'+i)) {
			t.Fatalf("call %d: %+v %v", i, res, err)
		}
	}
	if n.Load() < 5 {
		t.Fatalf("only %d requests went out", n.Load())
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestGetStreamEndsWithItsSession: deleting a session ends its open GET
// stream on the replica that deleted it; the stream does not outlive the
// session however often its watch is reopened. On another replica the
// stream ends as soon as the revocation reaches it (the indexer's watch),
// not when the session expires: a stolen session id stops hearing of
// changes once its owner deletes the session.
func TestGetStreamEndsWithItsSession(t *testing.T) {
	b := startBackends(t)
	_, one := startGateway(t, b, testGatewayConfig(b))
	_, two := startGateway(t, b, testGatewayConfig(b))
	for name, streamAt := range map[string]string{"the same replica": one.URL, "another replica": two.URL} {
		t.Run(name, func(t *testing.T) {
			id := initializeOn(t, one.URL+"/mcp", "alice-key")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, streamAt+"/mcp", nil)
			req.Header.Set("Authorization", "Bearer alice-key")
			req.Header.Set("Accept", "text/event-stream")
			req.Header.Set("Mcp-Session-Id", id)
			stream, err := http.DefaultClient.Do(req)
			if err != nil || stream.StatusCode != 200 {
				t.Fatalf("GET stream: %v %v", err, stream)
			}
			defer stream.Body.Close()
			lines := bufio.NewScanner(stream.Body)
			if !lines.Scan() || lines.Text() != "event: prime" {
				t.Fatalf("GET stream starts with %q", lines.Text())
			}
			if del := send(t, http.MethodDelete, one.URL+"/mcp", legacyHeaders("alice-key", id), ""); del.status != http.StatusNoContent {
				t.Fatalf("DELETE: %d %s", del.status, del.body)
			}
			for lines.Scan() {
				// keep-alives until the stream ends
			}
			if ctx.Err() != nil {
				t.Fatal("the GET stream of a deleted session is still open")
			}
		})
	}
}
