package backend

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/dualera"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// debugLogger logs into l at debug level, as the clients' tests read it.
func debugLogger(l *testkit.LogBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// startLeaky is a real go-sdk server, in both eras, whose tools quote their
// arguments and the call's Authorization back, as careless servers do:
// reject in a JSON-RPC error (message and data), fail in a result marked
// isError, echo in a normal result (text and structured content) and in a
// log message. A call of the tool malformed is answered HTTP 400 with the
// request's body, as some proxies do.
func startLeaky(t *testing.T) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "leaky", Version: "1"}, nil)
	quote := func(req *mcp.CallToolRequest) string {
		return fmt.Sprintf("arguments %s, authorization %q", req.Params.Arguments, req.Extra.Header.Get("Authorization"))
	}
	args := func(req *mcp.CallToolRequest) map[string]any {
		var m map[string]any
		_ = json.Unmarshal(req.Params.Arguments, &m)
		return m
	}
	add := func(name string, h mcp.ToolHandler) {
		srv.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}}, h)
	}
	add("reject", func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		a := args(req)
		data, _ := json.Marshal(map[string]any{"input_value": a["key"], "odd": a["odd"], "authorization": req.Extra.Header.Get("Authorization")})
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("input_value='%v' rejected; %s", a["key"], quote(req)), Data: data}
	})
	add("fail", func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "upstream refused: " + quote(req)}}}, nil
	})
	add("echo", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Data: "calling upstream with " + quote(req)})
		a := args(req)
		a["authorization"] = req.Extra.Header.Get("Authorization")
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done: " + quote(req)}}, StructuredContent: a}, nil
	})
	add("ask", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if _, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "sure?", RequestedSchema: map[string]any{"type": "object"}}); err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "asked: " + quote(req)}}}, nil
	})
	router := dualera.New(srv, nil, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"name":"malformed"`)) {
				http.Error(w, "bad request: "+string(body), http.StatusBadRequest)
				return
			}
		}
		router.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// leakCall is a tools/call of tool with arguments args.
func leakCall(tool string, args []byte) *Call {
	var p ParamsBuilder
	p.String("name", tool)
	p.Raw("arguments", args)
	return &Call{Method: "tools/call", Name: tool, Params: p.Bytes()}
}

// leaked names the first secret found in text, as it is, JSON-escaped
// either way, or in any string of text read as JSON; "" for none.
func leaked(text string, secrets ...string) string {
	var strs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			strs = append(strs, v)
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for k, e := range v {
				strs = append(strs, k)
				walk(e)
			}
		}
	}
	var v any
	if json.Unmarshal([]byte(text), &v) == nil {
		walk(v)
	}
	for _, s := range secrets {
		html, _ := json.Marshal(s)
		var plain bytes.Buffer
		enc := json.NewEncoder(&plain)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s)
		forms := []string{s, string(html[1 : len(html)-1]), strings.TrimSpace(plain.String())[1 : len(strings.TrimSpace(plain.String()))-1],
			url.QueryEscape(s), url.PathEscape(s)}
		for _, f := range forms {
			if strings.Contains(text, f) {
				return s
			}
		}
		for _, str := range strs {
			if strings.Contains(str, s) {
				return s
			}
		}
	}
	return ""
}

// The strings of hidden argument values (Config.Hidden) that a backend
// sends back are cut out of everything the client gets and the log holds:
// its JSON-RPC errors (message and data), the rejection of a malformed
// call, results marked isError, normal results and the log messages
// relayed for a call, in either era and on a session of the call's own.
// Values shorter than MinRedactedHidden stay. What is cut out of a JSON
// text leaves it valid JSON.
func TestHiddenValuesAreRedactedFromAnswers(t *testing.T) {
	const key = "sk-live-0123456789abcdef"
	// A value that JSON escapes (quotes, and <>& escaped by encoding/json).
	const odd = `pw<&>"q"-and-more`
	args, _ := json.Marshal(map[string]any{"key": key, "odd": odd, "tenant": "acme"})
	url := startLeaky(t)
	for _, protocol := range []string{ProtocolModern, ProtocolLegacy} {
		t.Run(protocol, func(t *testing.T) {
			logs := &testkit.LogBuffer{}
			c := newTestClientLogging(Config{Name: "leaky", URL: url, Protocol: protocol, Timeout: 5 * time.Second,
				Hidden: []string{"acme", key, odd}}, debugLogger(logs))
			t.Cleanup(c.Close)
			ctx := context.Background()
			check := func(what, text string) {
				t.Helper()
				if s := leaked(text, key, odd); s != "" {
					t.Errorf("%s holds %q: %s", what, s, text)
				}
			}

			_, err := c.Call(ctx, leakCall("reject", args))
			var perr *ProtocolError
			if !errors.As(err, &perr) || perr.Code != jsonrpc.CodeInvalidParams {
				t.Fatalf("reject: %v", err)
			}
			check("a JSON-RPC error's message", perr.Message)
			check("a JSON-RPC error's data", perr.Data)
			if !strings.Contains(perr.Message, "[redacted]") || !json.Valid([]byte(perr.Data)) || !strings.Contains(perr.Data, "[redacted]") {
				t.Errorf("reject: message %q, data %s", perr.Message, perr.Data)
			}

			res, err := c.Call(ctx, leakCall("fail", args))
			if err != nil || !res.IsError {
				t.Fatalf("fail: %v %+v", err, res)
			}
			check("a result marked isError", res.JSON)
			if !json.Valid([]byte(res.JSON)) || !strings.Contains(res.JSON, "[redacted]") || !strings.Contains(res.JSON, "acme") {
				t.Errorf("fail: %s", res.JSON)
			}

			var notes []string
			call := leakCall("echo", args)
			if protocol == ProtocolModern {
				call.LogLevel, call.Notify = "info", func(_ string, params []byte) { notes = append(notes, string(params)) }
			}
			res, err = c.Call(ctx, call)
			if err != nil || res.IsError {
				t.Fatalf("echo: %v %+v", err, res)
			}
			check("a result", res.JSON)
			if !json.Valid([]byte(res.JSON)) || !strings.Contains(res.JSON, `"tenant":"acme"`) {
				t.Errorf("echo: %s", res.JSON)
			}
			if protocol == ProtocolModern && len(notes) != 1 {
				t.Errorf("echo's log messages: %q", notes)
			}
			for _, n := range notes {
				check("a relayed log message", n)
			}

			_, err = c.Call(ctx, leakCall("malformed", args))
			if !errors.Is(err, ErrMalformedRequest) {
				t.Fatalf("malformed: %v", err)
			}
			check("a rejection", err.Error())

			// A session of the call's own (go-sdk), as a streamed call
			// wanting a Legacy backend's log messages takes.
			var emitted []string
			own, err := c.CallToolStreamed(ctx, &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(args)}, false, "info", func(_ string, p any) {
				b, _ := json.Marshal(p)
				emitted = append(emitted, string(b))
			})
			if err != nil {
				t.Fatal(err)
			}
			text, _ := json.Marshal(own)
			check("a result on a session of its own", string(text))
			if len(emitted) != 1 {
				t.Errorf("log messages on a session of its own: %q", emitted)
			}
			for _, n := range emitted {
				check("a log message on a session of its own", n)
			}
			_, err = c.CallToolStreamed(ctx, &mcp.CallToolParams{Name: "reject", Arguments: json.RawMessage(args)}, false, "", func(string, any) {})
			if !errors.As(err, &perr) {
				t.Fatalf("reject on a session of its own: %v", err)
			}
			check("an error on a session of its own", perr.Message+perr.Data)

			check("the log", logs.String())
		})
	}
}

// A backend's 401 challenge is the caller's to act on only when the
// refused credential is the caller's own (tokenExchange): then it is
// passed on, redacted. A refused static or client-credentials credential
// is the aggregator's own: the call fails without the challenge, which
// the log keeps, redacted.
func TestChallengeIsForwardedOnlyForTheCallersCredential(t *testing.T) {
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") == "tools/call" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="locked", error="invalid_token", error_description="refused `+r.Header.Get("Authorization")+`"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		dualEraEcho("locked").ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	for _, tc := range []struct {
		name    string
		cfg     Config
		forward bool
	}{
		{"static", Config{Headers: map[string]string{"Authorization": "Bearer static-secret-0123"}}, false},
		{"clientCredentials", Config{Auth: func() Auth { a := startExchanger(t); a.Mode = AuthClientCredentials; return a }()}, false},
		{"tokenExchange", Config{Auth: startExchanger(t)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &testkit.LogBuffer{}
			cfg := tc.cfg
			cfg.Name, cfg.URL, cfg.Protocol, cfg.Timeout = "locked", front.URL, ProtocolModern, 5*time.Second
			c := newTestClientLogging(cfg, debugLogger(logs))
			t.Cleanup(c.Close)
			ctx, err := c.WithCaller(context.Background(), "alice", fakeJWT(`{"sub":"alice","aud":"switchboard"}`))
			if err != nil {
				t.Fatal(err)
			}
			token := strings.TrimPrefix(callerAuthorization(ctx), "Bearer ")
			if token == "" {
				token = "static-secret-0123"
			}
			_, err = c.Call(ctx, echoCall(`{}`))
			var ch *ChallengeError
			if !errors.As(err, &ch) || errors.Is(err, ErrUnavailable) {
				t.Fatalf("a 401: %v", err)
			}
			if strings.Contains(err.Error(), token) {
				t.Errorf("the error quotes the refused credential: %v", err)
			}
			if tc.forward {
				if !strings.HasPrefix(ch.Challenge, `Bearer realm="locked", error="invalid_token"`) || !strings.Contains(ch.Challenge, "[redacted]") {
					t.Errorf("the caller's challenge: %q", ch.Challenge)
				}
			} else {
				if ch.Challenge != "" {
					t.Errorf("the challenge to the aggregator's own credential reached the caller: %q", ch.Challenge)
				}
				if out := logs.String(); !strings.Contains(out, `realm=\"locked\"`) {
					t.Errorf("the log lacks the challenge:\n%s", out)
				}
			}
			if out := logs.String(); strings.Contains(out, token) {
				t.Errorf("the log holds the refused credential:\n%s", out)
			}
			if st := c.Status(); st.Failure != FailureNone {
				t.Errorf("the 401 counted as a backend failure: %+v", st)
			}
		})
	}
}

// The call's own Authorization (an exchanged token, the shared
// client-credentials token) is cut out of a backend's errors; the shared
// token is cut out of its results too, while a caller's exchanged token is
// the caller's own.
func TestCallTokensAreRedactedFromErrors(t *testing.T) {
	url := startLeaky(t)
	for _, mode := range []string{AuthTokenExchange, AuthClientCredentials} {
		t.Run(mode, func(t *testing.T) {
			logs := &testkit.LogBuffer{}
			auth := startExchanger(t)
			auth.Mode = mode
			c := newTestClientLogging(Config{Name: "leaky", URL: url, Protocol: ProtocolModern, Auth: auth, Timeout: 5 * time.Second}, debugLogger(logs))
			t.Cleanup(c.Close)
			ctx, err := c.WithCaller(context.Background(), "alice", fakeJWT(`{"sub":"alice","aud":"switchboard"}`))
			if err != nil {
				t.Fatal(err)
			}
			token := strings.TrimPrefix(callerAuthorization(ctx), "Bearer ")
			if !strings.HasPrefix(token, "exchanged-") {
				t.Fatalf("authorization %q", callerAuthorization(ctx))
			}
			_, err = c.Call(ctx, leakCall("reject", []byte(`{}`)))
			var perr *ProtocolError
			if !errors.As(err, &perr) {
				t.Fatalf("reject: %v", err)
			}
			if strings.Contains(perr.Message+perr.Data, token) || !strings.Contains(perr.Message, `authorization "Bearer [redacted]"`) {
				t.Errorf("the error quotes the call's token: %q %s", perr.Message, perr.Data)
			}
			res, err := c.Call(ctx, leakCall("fail", []byte(`{}`)))
			if err != nil || strings.Contains(res.JSON, token) {
				t.Errorf("a result marked isError: %v %+v", err, res)
			}
			res, err = c.Call(ctx, leakCall("echo", []byte(`{}`)))
			if err != nil {
				t.Fatal(err)
			}
			if own := strings.Contains(res.JSON, token); own != (mode == AuthTokenExchange) {
				t.Errorf("a result holds the call's token: %v (the caller's own exchanged token stays, the shared one goes): %s", own, res.JSON)
			}
			// Kept beyond the call (a task's result), it holds none.
			if kept := c.RedactKept(ctx, res.JSON); strings.Contains(kept, token) || !json.Valid([]byte(kept)) {
				t.Errorf("a kept result holds the call's token: %s", kept)
			}
			if strings.Contains(logs.String(), token) {
				t.Errorf("the log holds the token:\n%s", logs.String())
			}
		})
	}
}

// The redactor's sets: configured credentials of any length leave error
// texts and logs, only those of MinRedactedHidden bytes or more leave
// results; hidden values shorter than that stay everywhere; a JSON text
// stays valid JSON, whatever the escapes around a secret.
func TestRedactorSets(t *testing.T) {
	r := newRedactor(Config{
		URL:     "https://user:pw@backend.example/mcp",
		Headers: map[string]string{"X-Api-Version": "2", "Authorization": "Bearer tok-0123456789"},
		Hidden:  []string{"eu", "n-secret-value", `quote"d-secret`},
	}, nil)
	ctx := context.Background()
	if got := r.shared().redactText(`v2 with tok-0123456789 for user:pw and eu`); got != `v[redacted] with [redacted] for [redacted] and eu` {
		t.Errorf("an error text: %q", got)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"v":"2","region":"eu"}`, `{"v":"2","region":"eu"}`},
		{`{"a":"x\n-secret-value"}`, `{"a":"x\n-secret-value"}`},
		{`{"a":"\n-secret-value and n-secret-value"}`, `{"a":"\n-secret-value and [redacted]"}`},
		{`{"n-secret-value":[1, "\u006e-secret-value"]}`, `{"[redacted]":[1, "[redacted]"]}`},
		{`{"a":"say \"quote\"d-secret\" now"}`, `{"a":"say \"[redacted]\" now"}`},
		{`{"a":"Bearer tok-0123456789","b":"tok-0123456789"}`, `{"a":"[redacted]","b":"[redacted]"}`},
	} {
		got := r.forResult(ctx, false).redactJSON(tc.in)
		if got != tc.want || !json.Valid([]byte(got)) {
			t.Errorf("redactJSON(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
	if in := `{"a": "nothing to see"}`; r.forResult(ctx, false).redactJSON(in) != in {
		t.Error("a text without secrets changed")
	}
}

// A secret is cut out as URL query and path encoding write it, from a
// plain text and from the strings of a JSON text alike (a backend's
// "fetch https://api/?key=... failed"), a secret without any letter or
// digit too.
func TestRedactorCutsURLEncodedSecrets(t *testing.T) {
	const key = "AbCdEf0123+/xyz=="
	const bare = "+/+/&?=+/"
	r := newRedactor(Config{Hidden: []string{key, bare}}, nil)
	ctx := context.Background()
	type cutter interface {
		redactText(string) string
		redactJSON(string) string
	}
	sets := map[string]cutter{"a result": r.forResult(ctx, false), "an error": r.forCall(ctx), "a log": r.shared()}
	for _, encoded := range []string{url.QueryEscape(key), url.PathEscape(key), url.QueryEscape(bare), url.PathEscape(bare)} {
		text := "fetch https://api/?key=" + encoded + " failed"
		js, _ := json.Marshal(map[string]string{"error": text})
		for name, set := range sets {
			if got := set.redactText(text); got != "fetch https://api/?key=[redacted] failed" {
				t.Errorf("%s, as a text: %q", name, got)
			}
			if got := set.redactJSON(string(js)); got != `{"error":"fetch https://api/?key=[redacted] failed"}` {
				t.Errorf("%s, as JSON: %s", name, got)
			}
		}
	}
}

// A key in the backend URL's query is cut out on its own, as written and
// decoded, wherever a backend quotes it ("invalid api key ..."), also
// with the query's parameters in another order: only the whole query was
// cut, so a backend naming the key it got passed it to the caller, the
// log and results. A short value (region=eu) stays.
func TestRedactorCutsQueryValues(t *testing.T) {
	const key = "sk-live-4f9a8b7c6d5e"
	const escaped = "k%2Bey/with+plus%3D%3D"
	r := newRedactor(Config{URL: "https://backend.example/mcp?api_key=" + key + "&region=eu&token=" + escaped}, nil)
	ctx := context.Background()
	for _, text := range []string{
		"invalid api key " + key + " for region eu",
		"upstream GET /v1?region=eu&api_key=" + key + " failed",
		"token k+ey/with plus== refused in eu",
	} {
		for name, got := range map[string]string{
			"an error": r.forCall(ctx).redactText(text),
			"a log":    r.shared().redactText(text),
			"a result": r.forResult(ctx, false).redactJSON(`{"m":"` + text + `"}`),
		} {
			if strings.Contains(got, key) || strings.Contains(got, "k+ey/with plus==") {
				t.Errorf("%s keeps a value of the URL's query: %q", name, got)
			}
			if !strings.Contains(got, "eu") {
				t.Errorf("%s lost a short value of the query: %q", name, got)
			}
		}
	}
}

// A Basic credential configured as a header has its password cut out
// decoded too, as a URL's is: only the header's value and its base64
// part were, so a backend quoting the password it was given passed it
// on.
func TestRedactorCutsABasicHeadersPassword(t *testing.T) {
	const pw = "correct-horse-battery"
	basic := base64.StdEncoding.EncodeToString([]byte("svc:" + pw))
	r := newRedactor(Config{Headers: map[string]string{"Authorization": "Basic " + basic}}, nil)
	ctx := context.Background()
	text := "user svc: password " + pw + " is wrong"
	for name, got := range map[string]string{
		"an error": r.forCall(ctx).redactText(text),
		"a log":    r.shared().redactText(text),
		"a result": r.forResult(ctx, false).redactJSON(`{"m":"` + text + `"}`),
	} {
		if strings.Contains(got, pw) || !strings.Contains(got, "user svc:") {
			t.Errorf("%s: %q", name, got)
		}
	}
}

// startServiceTokens is a client-credentials token endpoint that answers
// each request with a new token, whose expires_in is the JSON value
// expiresIn or, when it is empty, absent: no stated time (every request
// then gets a new one).
func startServiceTokens(t *testing.T, expiresIn string) Auth {
	t.Helper()
	var n atomic.Int32
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		exp := ""
		if expiresIn != "" {
			exp = `,"expires_in":` + expiresIn
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"access_token":"service-token-%04d","token_type":"Bearer"%s}`, n.Add(1), exp)
	}))
	t.Cleanup(endpoint.Close)
	return Auth{Mode: AuthClientCredentials, Audience: "leaky", TokenEndpoint: endpoint.URL, ClientID: "api", ClientSecret: "service-client-secret"}
}

// A client-credentials token is the aggregator's own, shared by every
// caller: a call's own token never reaches its caller, even when it is not
// the last one issued (a refresh came between, or the token endpoint gives
// every call a new token), in a result or a relayed notification, on the
// raw path or a session of the call's own.
func TestClientCredentialsTokenNeverReachesACaller(t *testing.T) {
	leaky := startLeaky(t)
	for _, tc := range []struct {
		name      string
		expiresIn string
	}{{"refreshed", "3600"}, {"uncached", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &testkit.LogBuffer{}
			c := newTestClientLogging(Config{Name: "leaky", URL: leaky, Protocol: ProtocolModern, Auth: startServiceTokens(t, tc.expiresIn), Timeout: 5 * time.Second}, debugLogger(logs))
			t.Cleanup(c.Close)
			ctx, err := c.WithCaller(context.Background(), "alice", "")
			if err != nil {
				t.Fatal(err)
			}
			own := bearer(callerAuthorization(ctx))
			if tc.expiresIn != "" {
				// The cached token expires; the next call gets a new one.
				c.tokens.mu.Lock()
				c.tokens.service = nil
				c.tokens.mu.Unlock()
			}
			other, err := c.WithCaller(context.Background(), "bob", "")
			if err != nil {
				t.Fatal(err)
			}
			if next := bearer(callerAuthorization(other)); !strings.HasPrefix(own, "service-token-") || next == own || c.tokens.last() == "Bearer "+own {
				t.Fatalf("tokens %q then %q, last %q", own, next, c.tokens.last())
			}
			check := func(what, text string) {
				t.Helper()
				if strings.Contains(text, own) {
					t.Errorf("%s holds the call's client-credentials token: %s", what, text)
				}
			}
			var notes []string
			call := leakCall("echo", []byte(`{}`))
			call.LogLevel, call.Notify = "info", func(_ string, params []byte) { notes = append(notes, string(params)) }
			res, err := c.Call(ctx, call)
			if err != nil || res.IsError {
				t.Fatalf("echo: %v %+v", err, res)
			}
			check("a result", res.JSON)
			if !strings.Contains(res.JSON, "[redacted]") || len(notes) != 1 {
				t.Errorf("echo: %s, log messages %q", res.JSON, notes)
			}
			for _, n := range notes {
				check("a relayed log message", n)
			}
			var emitted []string
			streamed, err := c.CallToolStreamed(ctx, &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{}`)}, false, "info", func(_ string, p any) {
				b, _ := json.Marshal(p)
				emitted = append(emitted, string(b))
			})
			if err != nil {
				t.Fatal(err)
			}
			text, _ := json.Marshal(streamed)
			check("a result on a session of its own", string(text))
			if len(emitted) != 1 {
				t.Errorf("log messages on a session of its own: %q", emitted)
			}
			for _, n := range emitted {
				check("a log message on a session of its own", n)
			}
			check("the log", logs.String())
		})
	}
}

// isErrorFixture is a tokenExchange backend's redactor with a few
// configured secrets, a call's context carrying an exchanged token (a
// JWT) and a result marked isError that does not hold it.
func isErrorFixture() (*redactor, context.Context, string, string) {
	cfg := Config{
		Auth:    Auth{Mode: AuthTokenExchange, TokenEndpoint: "https://auth.example/token", ClientID: "api", ClientSecret: "exchange-client-secret"},
		Headers: map[string]string{"X-Api-Key": "static-key-0123456789"},
		Hidden:  []string{"n-secret-value", "sk-live-0123456789abcdef"},
	}
	r := newRedactor(cfg, newTokenSource(cfg.Auth, time.Second, slog.Default()))
	token := fakeJWT(`{"sub":"alice","aud":"github","scope":"repo read:org","exp":4102444800,"iat":1700000000,"jti":"` + strings.Repeat("0123456789abcdef", 8) + `"}`)
	ctx := context.WithValue(context.Background(), callerKey{}, &callerCred{authorization: "Bearer " + token})
	text := `{"content":[{"type":"text","text":"upstream refused the request: quota exceeded for project 42, retry in 30s"}],"isError":true}`
	return r, ctx, token, text
}

// A call held for the client's input is answered with the credential its
// requests carried, the first round's: its result loses that token, not
// only the retry's own.
func TestHeldCallLosesItsOwnClientCredentialsToken(t *testing.T) {
	leaky := startLeaky(t)
	for _, tc := range []struct {
		name      string
		expiresIn string
	}{{"refreshed", "3600"}, {"uncached", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestClient(Config{Name: "leaky", URL: leaky, Protocol: ProtocolLegacy, Auth: startServiceTokens(t, tc.expiresIn), Timeout: 5 * time.Second})
			t.Cleanup(c.Close)
			first, err := c.WithCaller(context.Background(), "alice", "")
			if err != nil {
				t.Fatal(err)
			}
			own := bearer(callerAuthorization(first))
			caps := &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}}
			asked, err := c.CallToolAsking(first, &mcp.CallToolParams{Name: "ask", Arguments: json.RawMessage(`{}`)}, caps, "alice", Notify{})
			if err != nil || len(asked.InputRequests) != 1 {
				t.Fatalf("first round: %+v %v", asked, err)
			}
			if tc.expiresIn != "" {
				c.tokens.mu.Lock()
				c.tokens.service = nil
				c.tokens.mu.Unlock()
			}
			retry, err := c.WithCaller(context.Background(), "alice", "")
			if err != nil {
				t.Fatal(err)
			}
			if bearer(callerAuthorization(retry)) == own || c.tokens.last() == "Bearer "+own {
				t.Fatalf("the retry's token is the first round's %q", own)
			}
			answers := map[string]json.RawMessage{}
			for key := range asked.InputRequests {
				answers[key] = json.RawMessage(`{"action":"accept","content":{}}`)
			}
			done, err := c.ResumeHeld(retry, asked.RequestState, "alice", answers, Notify{})
			if err != nil || len(done.Content) != 1 {
				t.Fatalf("last round: %+v %v", done, err)
			}
			text, _ := json.Marshal(done)
			if strings.Contains(string(text), own) || !strings.Contains(string(text), "[redacted]") {
				t.Errorf("the held call's result: %s", text)
			}
		})
	}
}

// A result marked isError that does not hold the call's own token costs
// what a normal result costs: no set of secrets is built for it. One that
// holds the token loses it.
func TestIsErrorResultBuildsNoSetWithoutTheToken(t *testing.T) {
	r, ctx, token, text := isErrorFixture()
	normal := testing.AllocsPerRun(100, func() { _ = r.forResult(ctx, false).redactJSON(text) })
	isError := testing.AllocsPerRun(100, func() { _ = r.forResult(ctx, true).redactJSON(text) })
	if isError > normal {
		t.Errorf("a result marked isError without the token: %v allocations, a normal result %v", isError, normal)
	}
	errText := testing.AllocsPerRun(100, func() { _ = r.forCall(ctx).redactText("upstream refused the request") })
	logText := testing.AllocsPerRun(100, func() { _ = r.shared().redactText("upstream refused the request") })
	if errText > logText {
		t.Errorf("an error text without the token: %v allocations, a log line %v", errText, logText)
	}
	leak := `{"content":[{"type":"text","text":"refused Bearer ` + token + `"}],"isError":true}`
	if got := r.forResult(ctx, true).redactJSON(leak); got != `{"content":[{"type":"text","text":"refused Bearer [redacted]"}],"isError":true}` {
		t.Errorf("a result marked isError holding the token: %s", got)
	}
	if got := r.forCall(ctx).redactText("refused " + url.QueryEscape(token)); got != "refused [redacted]" {
		t.Errorf("an error text holding the token: %s", got)
	}
}

// The cost of redacting a tokenExchange backend's result: normal, marked
// isError (the call's own token is cut out too), and marked isError with
// the token in it.
func BenchmarkRedactResult(b *testing.B) {
	r, ctx, token, text := isErrorFixture()
	leak := `{"content":[{"type":"text","text":"refused Bearer ` + token + `"}],"isError":true}`
	for _, bc := range []struct {
		name    string
		isError bool
		text    string
	}{{"normal", false, text}, {"isError", true, text}, {"isErrorHoldingToken", true, leak}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = r.forResult(ctx, bc.isError).redactJSON(bc.text)
			}
		})
	}
}

// A stdio server's credentials are in its environment: the values of
// variables named as credentials leave its results, errors and logs as an
// HTTP backend's headers do; other values, and short ones, stay.
func TestRedactorCutsStdioCredentials(t *testing.T) {
	r := newRedactor(Config{Command: []string{"server"}, Env: map[string]string{
		"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp-0123456789abcdef", "API_KEY": "k-0123456789", "MODE": "production", "DB_PASSWORD": "short",
	}}, nil)
	ctx := context.Background()
	if got := r.shared().redactText(`ghp-0123456789abcdef k-0123456789 in production, password short`); got != `[redacted] [redacted] in production, password short` {
		t.Errorf("an error text: %q", got)
	}
	if got := r.forResult(ctx, false).redactJSON(`{"echo":"k-0123456789","mode":"production"}`); got != `{"echo":"[redacted]","mode":"production"}` {
		t.Errorf("a result: %s", got)
	}
}

// leakyStdioServer is a stdio MCP server (sh) whose one tool's
// description quotes its API key, as a server that documents the
// endpoint it was configured with does.
const leakyStdioServer = `#!/bin/sh
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p')
  case "$line" in
    *'"method":"initialize"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"leaky","version":"1"}}}\n' "$id" ;;
    *'"method":"tools/list"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"search","description":"Searches https://api.example.com/?key=%s","inputSchema":{"type":"object"}}]}}\n' "$id" "$MY_API_KEY" ;;
    *'"method":"ping"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{}}\n' "$id" ;;
    *'"id":'*) printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no such method"}}\n' "$id" ;;
  esac
done
`

// listedUntil lists c until it answers, within 30 s.
func listedUntil(t *testing.T, c *Client) *Lists {
	t.Helper()
	var lists *Lists
	testkit.Eventually(t, "the backend listed", 30*time.Second, func() error {
		var err error
		lists, err = c.ListAll(t.Context())
		return err
	})
	return lists
}

// A listing is sent back too, and goes further than a result: to every
// client (tools/list, find_tool), into the indexer's database and the
// pinning digests. A stdio server's credential (its env) quoted in a
// tool's description leaves the listing as it leaves results; it once
// reached them verbatim.
func TestStdioListingLosesTheServersCredential(t *testing.T) {
	const key = "sk-live-0123456789abcdef"
	script := filepath.Join(t.TempDir(), "leaky.sh")
	if err := os.WriteFile(script, []byte(leakyStdioServer), 0o755); err != nil {
		t.Fatal(err)
	}
	c := newTestClient(Config{Name: "leaky", Command: []string{script}, Env: map[string]string{"MY_API_KEY": key}, Timeout: 10 * time.Second})
	defer c.Close()
	lists := listedUntil(t, c)
	if len(lists.Tools) != 1 {
		t.Fatalf("tools %+v", lists.Tools)
	}
	defs := bytes.Join(lists.Definitions.Tools, nil)
	if desc := lists.Tools[0].Description; strings.Contains(desc, key) || bytes.Contains(defs, []byte(key)) || !strings.Contains(desc, "key="+redactedText) {
		t.Errorf("the listing carries the server's credential: description %q, definitions %s", desc, defs)
	}
}

// An HTTP backend's configured credential quoted in its listings (the
// descriptions of a tool, a resource, a template, a prompt and its
// argument) leaves every one of them, typed and as listed, as it leaves
// results.
func TestListingsLoseTheBackendsCredentials(t *testing.T) {
	const key = "sk-live-0123456789abcdef"
	srv := mcp.NewServer(&mcp.Implementation{Name: "leaky", Version: "1"}, nil)
	quoting := "Uses https://api.example.com/?key=" + key
	srv.AddTool(&mcp.Tool{Name: "search", Description: quoting, InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	srv.AddResource(&mcp.Resource{URI: "file:///data", Name: "data", Description: quoting},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{}, nil
		})
	srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "file:///data/{name}", Name: "item", Description: quoting},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{}, nil
		})
	srv.AddPrompt(&mcp.Prompt{Name: "ask", Description: quoting, Arguments: []*mcp.PromptArgument{{Name: "q", Description: quoting}}},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer ts.Close()
	c := newTestClient(Config{Name: "leaky", URL: ts.URL, Headers: map[string]string{"X-Api-Key": key}, Timeout: 10 * time.Second})
	defer c.Close()
	lists := listedUntil(t, c)
	if len(lists.Tools) != 1 || len(lists.Resources) != 1 || len(lists.ResourceTemplates) != 1 || len(lists.Prompts) != 1 {
		t.Fatalf("lists %+v", lists)
	}
	typed, _ := json.Marshal([]any{lists.Tools, lists.Resources, lists.ResourceTemplates, lists.Prompts})
	d := lists.Definitions
	defs := bytes.Join(slices.Concat(d.Tools, d.Resources, d.ResourceTemplates, d.Prompts), []byte(","))
	for what, text := range map[string]string{"typed": string(typed), "as listed": string(defs)} {
		if s := leaked(text, key); s != "" {
			t.Errorf("the listing %s carries the backend's credential: %s", what, text)
		}
	}
	if want := "key=" + redactedText; lists.Tools[0].Description != "Uses https://api.example.com/?"+want || lists.Prompts[0].Arguments[0].Description != lists.Tools[0].Description {
		t.Errorf("descriptions %q, %q; want the credential replaced by %s", lists.Tools[0].Description, lists.Prompts[0].Arguments[0].Description, redactedText)
	}
}
