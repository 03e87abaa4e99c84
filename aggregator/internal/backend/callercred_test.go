package backend

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/dualera"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// fakeJWT is a token with the given payload; the signature is not looked
// at here (the gateway verified it).
func fakeJWT(payload string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(payload)) + ".c2ln"
}

// startExchanger is a token endpoint that answers every exchange with a
// new token, valid for an hour, and an Auth that uses it. Its client
// secret is a realistic one: the redactor cuts a configured secret of any
// length out of error texts (a one-letter one out of every word).
func startExchanger(t *testing.T) Auth {
	t.Helper()
	var n atomic.Int32
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"access_token":"exchanged-%d","token_type":"Bearer","expires_in":3600,"issued_token_type":"urn:ietf:params:oauth:token-type:access_token"}`, n.Add(1))
	}))
	t.Cleanup(endpoint.Close)
	return Auth{Mode: AuthTokenExchange, Audience: "github", TokenEndpoint: endpoint.URL, ClientID: "api", ClientSecret: "exchange-client-secret", CacheEntries: 8}
}

// authRecorder is a real go-sdk server in both eras that records the
// Authorization of each tools/call it receives.
type authRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (a *authRecorder) last() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.seen) == 0 {
		return "<none>"
	}
	return a.seen[len(a.seen)-1]
}

func startAuthRecorder(t *testing.T, a *authRecorder) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "rec", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		a.mu.Lock()
		a.seen = append(a.seen, req.Extra.Header.Get("Authorization"))
		a.mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	ts := httptest.NewServer(dualera.New(srv, nil, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

// A tokenExchange backend gets each caller's exchanged token on that
// caller's calls, never the caller's own, in either era and on the
// plain-call session too; no token is refused before anything is sent.
func TestExchangedTokenReachesTheBackend(t *testing.T) {
	for _, protocol := range []string{ProtocolAuto, ProtocolModern, ProtocolLegacy} {
		t.Run(protocol, func(t *testing.T) {
			rec := &authRecorder{}
			c := newTestClient(Config{Name: "gh", URL: startAuthRecorder(t, rec), Protocol: protocol, Auth: startExchanger(t),
				Headers: map[string]string{"X-Static": "s"}, Timeout: 5 * time.Second})
			t.Cleanup(c.Close)
			alice, bob := fakeJWT(`{"sub":"alice","aud":"switchboard"}`), fakeJWT(`{"sub":"bob","aud":["x","switchboard"]}`)
			for i := 0; i < 3; i++ { // auto moves plain calls to a Legacy session meanwhile
				for _, tok := range []string{alice, bob} {
					ctx, err := c.WithCaller(context.Background(), "s", tok)
					if err != nil {
						t.Fatal(err)
					}
					if res, err := c.Call(ctx, echoCall(`{}`)); err != nil || res.IsError {
						t.Fatalf("call: %v %+v", err, res)
					}
					if got := rec.last(); got != callerAuthorization(ctx) || !strings.HasPrefix(got, "Bearer exchanged-") {
						t.Fatalf("backend saw Authorization %q, want the exchanged token %q", got, callerAuthorization(ctx))
					}
				}
			}
			n := len(rec.seen)
			if _, err := c.WithCaller(context.Background(), "s", ""); !errors.Is(err, ErrCallerCredential) {
				t.Errorf("no token: %v, want ErrCallerCredential", err)
			}
			if len(rec.seen) != n {
				t.Error("a refused caller reached the backend")
			}
		})
	}
}

// A static backend ignores the caller's token: it never leaves the
// aggregator.
func TestStaticBackendNeverSendsTheCallersToken(t *testing.T) {
	rec := &authRecorder{}
	c := newTestClient(Config{Name: "s", URL: startAuthRecorder(t, rec), Headers: map[string]string{"Authorization": "Bearer static"}, Timeout: 5 * time.Second})
	t.Cleanup(c.Close)
	ctx, err := c.WithCaller(context.Background(), "s", fakeJWT(`{"aud":"s"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(ctx, echoCall(`{}`)); err != nil {
		t.Fatal(err)
	}
	if got := rec.last(); got != "Bearer static" {
		t.Fatalf("backend saw %q", got)
	}
}

// A caller's credential is never carried to another origin: a redirect
// there is refused before anything is sent, like the static headers.
func TestCallerCredentialIsNotRedirected(t *testing.T) {
	var reached atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Add(1) }))
	defer other.Close()
	rec := &authRecorder{}
	real := startAuthRecorder(t, rec)
	var redirect atomic.Bool
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if redirect.Load() {
			http.Redirect(w, r, other.URL+"/mcp", http.StatusTemporaryRedirect)
			return
		}
		proxyTo(t, real, w, r)
	}))
	defer front.Close()
	c := newTestClient(Config{Name: "gh", URL: front.URL, Protocol: ProtocolModern, Auth: startExchanger(t), Timeout: 5 * time.Second})
	defer c.Close()
	ctx, err := c.WithCaller(context.Background(), "s", fakeJWT(`{"sub":"alice","aud":"switchboard"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(ctx, echoCall(`{}`)); err != nil {
		t.Fatal(err)
	}
	redirect.Store(true)
	_, err = c.Call(ctx, echoCall(`{}`))
	if !errors.Is(err, ErrRedirected) {
		t.Fatalf("call redirected elsewhere: %v, want ErrRedirected", err)
	}
	if tok := strings.TrimPrefix(callerAuthorization(ctx), "Bearer "); strings.Contains(err.Error(), tok) {
		t.Error("the error quotes the token")
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("%d requests reached the other origin", n)
	}
}

// proxyTo forwards r to target as it is (a same-origin front for a real
// server).
func proxyTo(t *testing.T, target string, w http.ResponseWriter, r *http.Request) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, target+r.URL.RequestURI(), r.Body)
	if err != nil {
		t.Error(err)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			_, _ = w.Write(buf[:n])
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

// The go-sdk paths (a call on a session of its own: streamed with a log
// level, or held for the client's input) carry the caller's credential
// too: the transport takes it from the call's context.
func TestCallerCredentialOnOwnSessions(t *testing.T) {
	rec := &authRecorder{}
	c := newTestClient(Config{Name: "gh", URL: startAuthRecorder(t, rec), Protocol: ProtocolLegacy, Auth: startExchanger(t), Timeout: 5 * time.Second})
	t.Cleanup(c.Close)
	ctx, err := c.WithCaller(context.Background(), "alice", fakeJWT(`{"sub":"alice","aud":"switchboard"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := callerAuthorization(ctx)
	if _, err := c.CallToolStreamed(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}, true, "info", func(string, any) {}); err != nil {
		t.Fatal(err)
	}
	if got := rec.last(); got != want {
		t.Fatalf("a streamed call on its own session reached the backend with %q, want %q", got, want)
	}
	res, err := c.CallToolAsking(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}, &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}}, "alice\x00echo", Notify{})
	if err != nil || res.IsError {
		t.Fatalf("a call that may be held: %v %+v", err, res)
	}
	if got := rec.last(); got != want {
		t.Fatalf("a call that may be held reached the backend with %q, want %q", got, want)
	}
}

// The backend's main session belongs to no caller, even when a caller's
// call is what opens it (the first call, or the first after the backend
// forgot the session): its handshake and its standalone stream carry no
// caller's token. A backend binding sessions to the user of their first
// request would otherwise serve, or refuse, everyone as that caller.
func TestMainSessionOpenedByACallCarriesNoCallersToken(t *testing.T) {
	for _, protocol := range []string{ProtocolModern, ProtocolLegacy} {
		t.Run(protocol, func(t *testing.T) {
			srv := mcp.NewServer(&mcp.Implementation{Name: "rec", Version: "1"}, nil)
			mcp.AddTool(srv, &mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
			})
			inner := dualera.New(srv, nil, nil)
			var mu sync.Mutex
			var seen []string // each request: its method (GET for a stream) and Authorization
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				what := r.Method
				if r.Method == http.MethodPost {
					body, _ := io.ReadAll(r.Body)
					r.Body = io.NopCloser(bytes.NewReader(body))
					var m struct {
						Method string `json:"method"`
					}
					_ = json.Unmarshal(body, &m)
					what = m.Method
				}
				mu.Lock()
				seen = append(seen, what+" "+r.Header.Get("Authorization"))
				mu.Unlock()
				inner.ServeHTTP(w, r)
			}))
			t.Cleanup(ts.Close)
			c := newTestClient(Config{Name: "gh", URL: ts.URL, Protocol: protocol, Auth: startExchanger(t), Timeout: 5 * time.Second})
			t.Cleanup(c.Close)
			alice, err := c.WithCaller(context.Background(), "alice", fakeJWT(`{"sub":"alice","aud":"switchboard"}`))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Call(alice, echoCall(`{}`)); err != nil {
				t.Fatal(err)
			}
			stream := map[string]string{ProtocolModern: "subscriptions/listen", ProtocolLegacy: "GET"}[protocol]
			testkit.Eventually(t, "the session's standalone stream opened", 5*time.Second, func() bool {
				mu.Lock()
				defer mu.Unlock()
				return slices.ContainsFunc(seen, func(s string) bool { return strings.HasPrefix(s, stream+" ") })
			})
			mu.Lock()
			defer mu.Unlock()
			for _, s := range seen {
				if !strings.HasPrefix(s, "tools/call ") && strings.HasSuffix(s, " "+callerAuthorization(alice)) {
					t.Errorf("the main session's %q carried alice's exchanged token (requests: %q)", s, seen)
				}
			}
		})
	}
}
