package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"

	"github.com/switchboard-mcp/switchboard/services/backenderr"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// withLeaks adds tools that quote their arguments back, as careless
// servers do: reject in a JSON-RPC error (message and data), broken in a
// result marked isError, echoall in a normal result and a log message.
func withLeaks(b *testBackend) {
	add := func(name string, h mcp.ToolHandler) {
		b.server.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}}, h)
	}
	add("reject", func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args map[string]any
		_ = json.Unmarshal(req.Params.Arguments, &args)
		data, _ := json.Marshal(map[string]any{"input_value": args["key"]})
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("input_value='%v' is not a valid key; arguments %s", args["key"], req.Params.Arguments), Data: data}
	})
	add("broken", func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "upstream refused " + string(req.Params.Arguments)}}}, nil
	})
	// A front answers malformed's calls (frontOf).
	add("malformed", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	add("echoall", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Data: "calling upstream with " + string(req.Params.Arguments)})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
	})
}

// frontOf is a same-origin front for b: answer, when it answers a request
// (whose body it gets), takes the request; the rest go to b.
func frontOf(t *testing.T, b *testBackend, answer func(w http.ResponseWriter, r *http.Request, body []byte) bool) string {
	t.Helper()
	target, _ := url.Parse(b.url())
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if r.Method == http.MethodPost && answer(w, r, body) {
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	return front.URL
}

// The values of hidden tool-override arguments (global ones, a server's
// own, strings inside an object value) never reach a client through what
// the backend sends back, on every route a call takes: its JSON-RPC
// errors, results marked isError, normal results, relayed log messages;
// nor the log, which holds a malformed call's rejection. A short value
// ("acme") is left as it is.
func TestHiddenValuesNeverReachClients(t *testing.T) {
	const key, supportKey, nestedKey = "sk-live-51HqLyjWDarjtT1zdp7dc", "sk-support-9f8e7d6c5b4a", "nested-secret-value-42"
	t.Setenv("TEST_HIDDEN_KEY", key)
	t.Setenv("TEST_SUPPORT_KEY", supportKey)
	t.Setenv("TEST_NESTED_KEY", nestedKey)
	vault := newTestBackend(t, "vault", backendOptions{extra: withLeaks})
	legacy := newTestBackend(t, "legacy", backendOptions{stateful: true, extra: withLeaks})
	front := frontOf(t, vault, func(w http.ResponseWriter, _ *http.Request, body []byte) bool {
		if !bytes.Contains(body, []byte(`"name":"malformed"`)) {
			return false
		}
		http.Error(w, "bad request: "+string(body), http.StatusBadRequest)
		return true
	})
	hidden := `{key: {hidden: true, value: "${TEST_HIDDEN_KEY}"}, tenant: {hidden: true, value: acme}, config: {hidden: true, value: {token: "${TEST_NESTED_KEY}", region: eu}}}`
	var overrides strings.Builder
	for _, b := range []string{"vault", "legacy"} {
		for _, tool := range []string{"reject", "broken", "echoall", "malformed"} {
			fmt.Fprintf(&overrides, "    - {backend: %s, tool: %s, arguments: %s}\n", b, tool, hidden)
		}
	}
	full, err := config.Load(writeFile(t, "switchboard.yaml", `
aggregator:
  catalogTTL: 1h
  backends:
    - {name: vault, url: `+front+`, timeout: 5s}
    - {name: legacy, url: `+legacy.url()+`, protocol: "2025-11-25", timeout: 5s}
  toolOverrides:
`+overrides.String()+`
servers:
  - name: support
    backends: [vault]
    toolOverrides:
      - backend: vault
        tool: echoall
        arguments: {key: {hidden: true, value: "${TEST_SUPPORT_KEY}"}}
`))
	if err != nil {
		t.Fatal(err)
	}
	logs := &testkit.LogBuffer{}
	h, err := startAggregatorWith(t, full, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	secrets := []string{key, supportKey, nestedKey}
	check := func(what, text string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s holds a hidden value: %s", what, text)
			}
		}
	}
	call := func(server, name string, rc *aggregatorv1.RequestContext) (*aggregatorv1.CallToolResponse, error) {
		return h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: principal("alice"), Server: server, Name: name, ArgumentsJson: `{"query":"x"}`, Context: rc})
	}

	for _, name := range []string{"vault_reject", "legacy_reject"} {
		_, err := call("", name, nil)
		wantStatus(t, err, codes.Unknown, commonv1.ErrorReason_ERROR_REASON_BACKEND_ERROR)
		be, ok := backenderr.From(err)
		if !ok || be.GetCode() != jsonrpc.CodeInvalidParams || !strings.Contains(be.GetMessage(), "input_value='[redacted]'") || !strings.Contains(be.GetDataJson(), `"input_value":"[redacted]"`) {
			t.Errorf("%s: %v (detail %v)", name, err, be)
		}
		check(name+"'s error", err.Error()+be.GetMessage()+be.GetDataJson())
	}
	for _, name := range []string{"vault_broken", "legacy_broken"} {
		resp, err := call("", name, nil)
		if err != nil || !resp.GetIsError() || !strings.Contains(resp.GetResultJson(), "[redacted]") {
			t.Fatalf("%s: %v %v", name, resp, err)
		}
		check(name+"'s result", resp.GetResultJson())
	}
	for _, tc := range []struct {
		server, name, why string
		rc                *aggregatorv1.RequestContext
	}{
		{"", "vault_echoall", "plain", nil},
		{"support", "vault_echoall", "a server's own override", nil},
		{"", "legacy_echoall", "plain", nil},
		{"", "legacy_echoall", "held for the client's input", &aggregatorv1.RequestContext{ClientCapabilitiesJson: `{"elicitation":{}}`}},
	} {
		resp, err := call(tc.server, tc.name, tc.rc)
		if err != nil {
			t.Fatalf("%s (%s): %v", tc.name, tc.why, err)
		}
		text := resultText(t, resp.GetResultJson())
		if !strings.Contains(text, `"tenant":"acme"`) || !strings.Contains(text, `"region":"eu"`) || !strings.Contains(text, "[redacted]") {
			t.Errorf("%s (%s): %s", tc.name, tc.why, text)
		}
		check(tc.name+" ("+tc.why+")", resp.GetResultJson())
	}
	for _, name := range []string{"vault_echoall", "legacy_echoall"} {
		// A Legacy backend's log messages come on a session of the
		// call's own.
		notes, resp := streamCall(t, h.gateway, &aggregatorv1.CallToolRequest{Principal: principal("alice"), Name: name, ArgumentsJson: `{}`,
			Context: &aggregatorv1.RequestContext{LogLevel: "info"}})
		if len(notes) != 1 {
			t.Errorf("%s streamed: notifications %v", name, notes)
		}
		for _, n := range notes {
			check(name+"'s log message", n.GetParamsJson())
		}
		check(name+" streamed", resp.GetResultJson())
	}
	_, err = call("", "vault_malformed", nil)
	wantStatus(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)

	out := logs.String()
	if !strings.Contains(out, "backend rejected a request as malformed") {
		t.Errorf("the rejection is not logged:\n%s", out)
	}
	check("the log", out)
}

// A backend's 401 to a static backend refuses the aggregator's own
// credential: the caller gets the generic error without the challenge,
// which the log keeps, redacted.
func TestStaticBackendChallengeStaysWithTheOperator(t *testing.T) {
	const token = "locked-static-token-0123"
	t.Setenv("TEST_LOCKED_TOKEN", token)
	locked := newTestBackend(t, "locked", backendOptions{tools: []string{"open"}})
	front := frontOf(t, locked, func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if r.Header.Get("Mcp-Method") != "tools/call" {
			return false
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="locked", error="invalid_token", error_description="`+r.Header.Get("Authorization")+` expired"`)
		w.WriteHeader(http.StatusUnauthorized)
		return true
	})
	logs := &testkit.LogBuffer{}
	h, err := startAggregatorLogging(t, parseConfig(t, `
aggregator:
  catalogTTL: 1h
  backends:
    - name: locked
      url: `+front+`
      headers: {Authorization: "Bearer ${TEST_LOCKED_TOKEN}"}
`), slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.gateway.CallTool(context.Background(), &aggregatorv1.CallToolRequest{Principal: principal("alice"), Name: "locked_open", ArgumentsJson: `{}`})
	be, ok := backenderr.From(err)
	if !ok {
		t.Fatalf("a static backend's 401: %v", err)
	}
	var data map[string]any
	if json.Unmarshal([]byte(be.GetDataJson()), &data) != nil || data["reason"] != "unauthorized" || data["httpStatus"] != float64(401) || data["wwwAuthenticate"] != nil {
		t.Errorf("a static backend's 401: data %s", be.GetDataJson())
	}
	if strings.Contains(err.Error()+be.GetMessage()+be.GetDataJson(), "realm") {
		t.Errorf("the challenge reached the caller: %v", err)
	}
	out := logs.String()
	if !strings.Contains(out, `realm=\"locked\"`) || strings.Contains(out, token) {
		t.Errorf("the log must hold the challenge, redacted:\n%s", out)
	}
	if b := backendHealth(t, h, "locked"); b.GetHealth() != aggregatorv1.BackendHealth_BACKEND_HEALTH_HEALTHY {
		t.Errorf("the 401 counted against the backend's health: %v", b)
	}
}

// A Legacy backend's HTTP error answering one request on the session
// every caller shares (a subscription: a 403 from an auth layer that does
// not let the static credential watch that resource, a 503 from a load
// balancer; an unsubscribe) fails that request alone: the session is kept with its other
// subscriptions, not dropped and opened again as after an outage, and the
// backend stays healthy.
func TestStaticRefusalKeepsTheSharedSession(t *testing.T) {
	uris := []string{"docs://open", "docs://locked", "docs://busy"}
	b := newTestBackend(t, "docs", backendOptions{stateful: true, subscribe: true, extra: func(b *testBackend) {
		for _, uri := range uris {
			b.server.AddResource(&mcp.Resource{URI: uri, Name: uri}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "read"}}}, nil
			})
		}
	}})
	var unsubscribes atomic.Int32
	front := frontOf(t, b, func(w http.ResponseWriter, _ *http.Request, body []byte) bool {
		if bytes.Contains(body, []byte(`"resources/unsubscribe"`)) {
			unsubscribes.Add(1)
			w.WriteHeader(http.StatusForbidden)
			return true
		}
		if !bytes.Contains(body, []byte(`"resources/subscribe"`)) {
			return false
		}
		switch {
		case bytes.Contains(body, []byte(`"docs://locked"`)):
			w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="docs:locked"`)
			w.WriteHeader(http.StatusForbidden)
		case bytes.Contains(body, []byte(`"docs://busy"`)):
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			return false
		}
		return true
	})
	h := startAggregatorFile(t, `
aggregator:
  catalogTTL: 1h
  backends:
    - name: docs
      url: `+front+`
      protocol: "2025-11-25"
      headers: {Authorization: "Bearer static-docs-token"}
`)
	testkit.Eventually(t, "resources listed", 10*time.Second, func() bool {
		r, err := h.gateway.ListResources(context.Background(), &aggregatorv1.ListResourcesRequest{Principal: principal("alice")})
		return err == nil && len(r.GetResources()) == len(uris)
	})
	open := startWatch(t, h.gateway, "docs://open")
	if got := open.first.GetSubscribedResourceUris(); !slices.Equal(got, []string{"docs://open"}) {
		t.Fatalf("subscribed %v, want docs://open", got)
	}
	handshakes, subscribes := b.received("initialize"), b.received("resources/subscribe")
	for _, uri := range []string{"docs://locked", "docs://busy"} {
		if got := startWatch(t, h.gateway, uri).first.GetSubscribedResourceUris(); len(got) != 0 {
			t.Fatalf("subscribed %v, want %s left out", got, uri)
		}
		if again, resubscribed := b.received("initialize")-handshakes, b.received("resources/subscribe")-subscribes; again != 0 || resubscribed != 0 {
			t.Fatalf("the answer to %s cost the shared session: %d handshakes and %d subscriptions renewed after it", uri, again, resubscribed)
		}
	}
	// A refused unsubscribe (the last watcher of docs://open leaves) ends
	// no session either: subscribing again needs no new handshake.
	open.cancel()
	testkit.Eventually(t, "the unsubscribe refused", 10*time.Second, func() bool { return unsubscribes.Load() == 1 })
	if got := startWatch(t, h.gateway, "docs://open").first.GetSubscribedResourceUris(); !slices.Equal(got, []string{"docs://open"}) {
		t.Fatalf("subscribed %v again, want docs://open", got)
	}
	if again := b.received("initialize") - handshakes; again != 0 {
		t.Errorf("the refused unsubscribe cost the shared session: %d handshakes after it", again)
	}
	if st := backendHealth(t, h, "docs"); st.GetHealth() != aggregatorv1.BackendHealth_BACKEND_HEALTH_HEALTHY {
		t.Errorf("the answers counted against the backend's health: %v", st)
	}
}
