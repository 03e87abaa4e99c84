package backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/dualera"
	"github.com/switchboard-mcp/switchboard/services/oidcop"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

var (
	alice = oidcop.User{ID: "alice", Username: "alice", Password: "pw-alice"}
	bob   = oidcop.User{ID: "bob", Username: "bob", Password: "pw-bob"}
)

// exchangeAuth is a backend whose audience is the provider's client web
// (which can then introspect the tokens it gets), exchanged for by the
// aggregator as client api.
func exchangeAuth(p *oidcop.Provider) Auth {
	return Auth{Mode: AuthTokenExchange, Audience: oidcop.WebClient, TokenEndpoint: p.TokenEndpoint,
		ClientID: oidcop.APIClient, ClientSecret: oidcop.APISecret, Scopes: []string{"openid", "tools"}}
}

// Two callers reach the backend each with a token the real provider
// exchanged for their own: for the backend's audience, their subject,
// the configured scopes; kept per caller until it nears expiry, bounded.
func TestTokenExchangeWithARealProvider(t *testing.T) {
	p := oidcop.Start(t, alice, bob)
	rec := &authRecorder{}
	auth := exchangeAuth(p)
	auth.CacheEntries = 1
	c := newTestClient(Config{Name: "web", URL: startAuthRecorder(t, rec), Protocol: ProtocolModern, Auth: auth, Timeout: 10 * time.Second})
	t.Cleanup(c.Close)
	callAs := func(subject, token string) string {
		t.Helper()
		ctx, err := c.WithCaller(context.Background(), subject, token)
		if err != nil {
			t.Fatalf("%s: %v", subject, err)
		}
		if res, err := c.Call(ctx, echoCall(`{}`)); err != nil || res.IsError {
			t.Fatalf("call as %s: %v %+v", subject, err, res)
		}
		got, ok := strings.CutPrefix(rec.last(), "Bearer ")
		if !ok || got == token {
			t.Fatalf("the backend got %q, not an exchanged bearer token", rec.last())
		}
		info := p.Introspect(t, oidcop.WebClient, oidcop.WebSecret, got)
		if info["active"] != true || info["sub"] != subject || !strings.Contains(info["scope"].(string), "tools") {
			t.Fatalf("the token %s reached the backend with is %v", subject, info)
		}
		return got
	}
	aliceToken := p.CallerToken(t, alice.Username, alice.Password, "switchboard")
	bobToken := p.CallerToken(t, bob.Username, bob.Password, "switchboard")
	a1 := callAs("alice", aliceToken)
	if a2 := callAs("alice", aliceToken); a2 != a1 {
		t.Error("alice's exchanged token was not reused")
	}
	b1 := callAs("bob", bobToken)
	if b1 == a1 {
		t.Fatal("bob reached the backend with alice's token")
	}
	if n := c.tokens.cached(); n != 1 {
		t.Errorf("%d exchanged tokens cached, bound 1", n)
	}
	// alice's entry was evicted by bob's: a new exchange.
	if a3 := callAs("alice", aliceToken); a3 == a1 {
		t.Error("an evicted token was reused")
	}
	// Cached only until RefreshBefore ahead of its expiry (the provider
	// issues tokens for 300 s): five minutes on, alice's is exchanged anew.
	a4 := callAs("alice", aliceToken)
	c.tokens.now = func() time.Time { return time.Now().Add(5 * time.Minute) }
	if a5 := callAs("alice", aliceToken); a5 == a4 {
		t.Error("a token past its use-by time was reused")
	}
	c.tokens.now = time.Now

	// No caller token: refused before anything is sent.
	n := len(rec.seen)
	if _, err := c.WithCaller(context.Background(), "carol", ""); !errors.Is(err, ErrCallerCredential) {
		t.Errorf("no token: %v", err)
	}
	// A token the provider refuses to exchange: a TokenError naming the
	// OAuth error, quoting no token.
	_, err := c.WithCaller(context.Background(), "mallory", "not-a-token")
	var te *TokenError
	if !errors.As(err, &te) || !errors.Is(err, ErrTokenExchange) || te.Grant != "token-exchange" || te.Code == "" || strings.Contains(err.Error(), "not-a-token") {
		t.Errorf("a refused exchange: %v", err)
	}
	// A wrong client secret: refused by the provider, secret not quoted.
	bad := exchangeAuth(p)
	bad.ClientSecret = "wrong-secret"
	cb := newTestClient(Config{Name: "web", URL: c.cfg.URL, Protocol: ProtocolModern, Auth: bad, Timeout: 10 * time.Second})
	t.Cleanup(cb.Close)
	_, err = cb.WithCaller(context.Background(), "alice", aliceToken)
	if !errors.As(err, &te) || strings.Contains(err.Error(), "wrong-secret") || strings.Contains(err.Error(), aliceToken) {
		t.Errorf("a wrong client secret: %v", err)
	}
	if len(rec.seen) != n {
		t.Error("a call without a token reached the backend")
	}
}

// headerLog records the Authorization of every POST a backend gets.
type headerLog struct {
	mu   sync.Mutex
	auth []string
}

// The gateway's own identity from the client credentials grant goes on
// every request, listings included, one token reused until it nears its
// expiry; a refused client is a TokenError for a call.
func TestClientCredentialsWithARealProvider(t *testing.T) {
	p := oidcop.Start(t)
	srv := mcp.NewServer(&mcp.Implementation{Name: "cc", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	log := &headerLog{}
	router := dualera.New(srv, nil, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			log.mu.Lock()
			log.auth = append(log.auth, r.Header.Get("Authorization"))
			log.mu.Unlock()
		}
		router.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	auth := Auth{Mode: AuthClientCredentials, TokenEndpoint: p.TokenEndpoint, ClientID: oidcop.ServiceClient, ClientSecret: oidcop.ServiceSecret, Scopes: []string{"tools"}}
	c := newTestClient(Config{Name: "cc", URL: ts.URL, Protocol: ProtocolModern, Auth: auth, Timeout: 10 * time.Second})
	t.Cleanup(c.Close)
	if _, err := c.ListAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, err := c.WithCaller(context.Background(), "alice", "ignored-caller-token")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(ctx, echoCall(`{}`)); err != nil {
		t.Fatal(err)
	}
	log.mu.Lock()
	seen := slices.Compact(slices.Clone(log.auth))
	log.mu.Unlock()
	if len(seen) != 1 || !strings.HasPrefix(seen[0], "Bearer ") || len(seen[0]) < 20 || strings.Contains(seen[0], "ignored-caller-token") {
		t.Fatalf("the backend saw Authorization %q, want one client credentials token throughout", seen)
	}
	bad := auth
	bad.ClientSecret = "wrong"
	cb := newTestClient(Config{Name: "cc", URL: ts.URL, Protocol: ProtocolModern, Auth: bad, Timeout: 10 * time.Second})
	t.Cleanup(cb.Close)
	var te *TokenError
	if _, err := cb.WithCaller(context.Background(), "alice", ""); !errors.As(err, &te) || te.Grant != "client-credentials" || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("a refused client: %v", err)
	}
}

// A backend's 401 with a challenge is a ChallengeError for that call; the
// session stays, and the refused token is forgotten: the caller's next
// call exchanges again and goes through.
func TestBackendChallengeIsTheCallersAnswer(t *testing.T) {
	rec := &authRecorder{}
	real := startAuthRecorder(t, rec)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The first caller's exchanged token is refused.
		if r.Header.Get("Authorization") == "Bearer exchanged-1" && r.Header.Get("Mcp-Method") == "tools/call" {
			w.Header().Add("WWW-Authenticate", `Bearer realm="gh", error="invalid_token"`)
			w.Header().Add("WWW-Authenticate", "Bearer resource_metadata=\"https://gh.example/.well-known/oauth-protected-resource\"\r\n")
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		proxyTo(t, real, w, r)
	}))
	t.Cleanup(front.Close)
	c := newTestClient(Config{Name: "gh", URL: front.URL, Protocol: ProtocolModern, Auth: startExchanger(t), Timeout: 5 * time.Second})
	t.Cleanup(c.Close)
	caller := fakeJWT(`{"aud":"switchboard","sub":"x"}`)
	ctx, _ := c.WithCaller(context.Background(), "x", caller)
	_, err := c.Call(ctx, echoCall(`{}`))
	var ch *ChallengeError
	if !errors.As(err, &ch) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("a 401 challenge: %v", err)
	}
	want := `Bearer realm="gh", error="invalid_token", Bearer resource_metadata="https://gh.example/.well-known/oauth-protected-resource"`
	if ch.Challenge != want {
		t.Errorf("challenge %q, want %q", ch.Challenge, want)
	}
	ctx, _ = c.WithCaller(context.Background(), "x", caller)
	if _, err := c.Call(ctx, echoCall(`{}`)); err != nil {
		t.Fatalf("the next call (%s): %v", callerAuthorization(ctx), err)
	}
	if st := c.Status(); st.Failure != FailureNone {
		t.Errorf("the challenge counted as a backend failure: %+v", st)
	}
}

// A backend's 403 (the credential is taken but does not allow the call:
// an insufficient_scope challenge) is a ChallengeError for that call too,
// with its status, not an outage; the token is not forgotten (exchanging
// again would bring the same scopes), and the backend stays healthy.
func TestBackendForbiddenIsTheCallersAnswer(t *testing.T) {
	real := startAuthRecorder(t, &authRecorder{})
	var forbidden atomic.Int32
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") == "tools/call" {
			if r.Header.Get("Authorization") != "Bearer exchanged-1" {
				t.Errorf("the second call carried %q, not the first call's token", r.Header.Get("Authorization"))
			}
			forbidden.Add(1)
			w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="repo admin"`)
			w.WriteHeader(http.StatusForbidden)
			return
		}
		proxyTo(t, real, w, r)
	}))
	t.Cleanup(front.Close)
	c := newTestClient(Config{Name: "gh", URL: front.URL, Protocol: ProtocolModern, Auth: startExchanger(t), Timeout: 5 * time.Second})
	t.Cleanup(c.Close)
	caller := fakeJWT(`{"aud":"switchboard","sub":"x"}`)
	for range 2 {
		ctx, _ := c.WithCaller(context.Background(), "x", caller)
		_, err := c.Call(ctx, echoCall(`{}`))
		var ch *ChallengeError
		if !errors.As(err, &ch) || errors.Is(err, ErrUnavailable) || ch.Status != http.StatusForbidden || !ch.Caller {
			t.Fatalf("a 403 challenge: %v", err)
		}
		if want := `Bearer error="insufficient_scope", scope="repo admin"`; ch.Challenge != want {
			t.Errorf("challenge %q, want %q", ch.Challenge, want)
		}
	}
	if forbidden.Load() != 2 {
		t.Errorf("%d calls reached the backend, want 2", forbidden.Load())
	}
	if st := c.Status(); st.Failure != FailureNone || st.State == Unhealthy {
		t.Errorf("the refusal counted as a backend failure: %+v", st)
	}
}

// A client-credentials token the backend refuses (HTTP 401: revoked or
// rotated at the provider) is not sent again until its expiry: the
// aggregator's own request (here a listing; a handshake, a probe) is
// sent once more with a new token, a call carrying the refused one fails
// alone, and the next call gets the new one. A backend refusing every
// token costs at most one grant a request.
func TestRefusedClientCredentialsTokenIsReplaced(t *testing.T) {
	rec := &authRecorder{}
	real := startAuthRecorder(t, rec)
	var refuseAll atomic.Bool
	var refused atomic.Int32
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refuseAll.Load() || r.Header.Get("Authorization") == "Bearer service-token-0001" {
			refused.Add(1)
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		proxyTo(t, real, w, r)
	}))
	t.Cleanup(front.Close)
	c := newTestClient(Config{Name: "cc", URL: front.URL, Protocol: ProtocolModern, Auth: startServiceTokens(t, "3600"), Timeout: 5 * time.Second})
	t.Cleanup(c.Close)
	ctx, err := c.WithCaller(context.Background(), "alice", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListAll(context.Background()); err != nil {
		t.Fatalf("a listing after its token was refused: %v", err)
	}
	var ch *ChallengeError
	if _, err := c.Call(ctx, echoCall(`{}`)); !errors.As(err, &ch) {
		t.Fatalf("a call with the refused token: %v", err)
	}
	if ctx, err = c.WithCaller(context.Background(), "alice", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(ctx, echoCall(`{}`)); err != nil || rec.last() != "Bearer service-token-0002" {
		t.Fatalf("the next call, with %q: %v", rec.last(), err)
	}
	if st := c.Status(); st.Failure != FailureNone {
		t.Errorf("the refused token counted as a backend failure: %+v", st)
	}

	grants := func() int {
		n, _ := strconv.Atoi(strings.TrimPrefix(c.tokens.last(), "Bearer service-token-"))
		return n
	}
	before := grants()
	refuseAll.Store(true)
	refused.Store(0)
	for range 3 {
		if _, err := c.ListAll(context.Background()); err == nil {
			t.Fatal("a listing went through a backend refusing every token")
		}
	}
	// Each request was sent at most twice, with one new token between.
	if n, sent := grants()-before, int(refused.Load()); n == 0 || 2*n > sent {
		t.Fatalf("%d grants for %d refused requests", n, sent)
	}
}

// On the go-sdk paths (here a call on a Legacy session of its own, as a
// streamed call wanting log messages takes) the backend's 401 challenge is
// the same ChallengeError: the transport keeps it for the call.
func TestBackendChallengeOnOwnSession(t *testing.T) {
	rec := &authRecorder{}
	real := startAuthRecorder(t, rec)
	// The first caller's exchanged token is refused.
	expired := "Bearer exchanged-1"
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if r.Header.Get("Authorization") == expired && bytes.Contains(body, []byte(`"method":"tools/call"`)) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gh", error="invalid_token"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		proxyTo(t, real, w, r)
	}))
	t.Cleanup(front.Close)
	c := newTestClient(Config{Name: "gh", URL: front.URL, Protocol: ProtocolLegacy, Auth: startExchanger(t), Timeout: 5 * time.Second})
	t.Cleanup(c.Close)
	ctx, err := c.WithCaller(context.Background(), "x", fakeJWT(`{"aud":"switchboard","sub":"expired"}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CallToolStreamed(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}, false, "info", func(string, any) {})
	var ch *ChallengeError
	if !errors.As(err, &ch) || ch.Challenge != `Bearer realm="gh", error="invalid_token"` {
		t.Fatalf("a 401 challenge on a session of the call's own: %v", err)
	}
	ctx, _ = c.WithCaller(context.Background(), "y", fakeJWT(`{"aud":"switchboard","sub":"fine"}`))
	if _, err := c.CallToolStreamed(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}, false, "info", func(string, any) {}); err != nil {
		t.Fatalf("the next caller's call: %v", err)
	}
}

// Concurrent calls of one caller with a cold cache make one exchange.
func TestConcurrentCallsShareOneExchange(t *testing.T) {
	p := oidcop.Start(t, alice)
	c := newTestClient(Config{Name: "web", URL: "http://127.0.0.1:1/mcp", Protocol: ProtocolModern, Auth: exchangeAuth(p), Timeout: 10 * time.Second})
	t.Cleanup(c.Close)
	token := p.CallerToken(t, alice.Username, alice.Password, "switchboard")
	var wg sync.WaitGroup
	got := make([]string, 8)
	errs := make([]error, len(got))
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, err := c.WithCaller(context.Background(), "alice", token)
			got[i], errs[i] = callerAuthorization(ctx), err
		}()
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil || got[i] == "" || got[i] != got[0] {
			t.Fatalf("call %d: %q, %v; want the one exchanged token %q", i, got[i], errs[i], got[0])
		}
	}
}

// Concurrent requests of a clientCredentials backend with a cold (or
// expired) cache make one grant, as concurrent exchanges of one caller
// do: every call, probe and listing page asked the token endpoint itself.
func TestConcurrentRequestsShareOneGrant(t *testing.T) {
	c := newTestClient(Config{Name: "cc", URL: "http://127.0.0.1:1/mcp", Protocol: ProtocolModern, Auth: startServiceTokens(t, "3600"), Timeout: 10 * time.Second})
	t.Cleanup(c.Close)
	var wg sync.WaitGroup
	got := make([]string, 16)
	errs := make([]error, len(got))
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, err := c.WithCaller(context.Background(), "alice", "")
			got[i], errs[i] = callerAuthorization(ctx), err
		}()
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil || got[i] != "Bearer service-token-0001" {
			t.Fatalf("call %d: %q, %v; want the one grant's token", i, got[i], errs[i])
		}
	}
	if last := c.tokens.last(); last != "Bearer service-token-0001" {
		t.Fatalf("the last token issued is %q: more than one grant", last)
	}
}

// A token-exchange response without expires_in says nothing of how long
// the token lives, so it is used for the one call it was asked for and
// never cached, not even until the caller's own token expires: every call
// exchanges again.
func TestExchangedTokenWithoutExpiryIsUsedOnce(t *testing.T) {
	n := 0
	var mu sync.Mutex
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		token := "exchanged-" + strconv.Itoa(n)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token":"`+token+`","token_type":"Bearer","issued_token_type":"urn:ietf:params:oauth:token-type:access_token"}`)
	}))
	c, caller := exchangeClient(t, endpoint)
	var got []string
	for range 2 {
		ctx, err := c.WithCaller(context.Background(), "alice", caller)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, callerAuthorization(ctx))
	}
	if got[0] == got[1] || n != 2 || c.tokens.cached() != 0 {
		t.Fatalf("authorizations %q after %d exchanges, %d cached; want a new exchange per call and none cached", got, n, c.tokens.cached())
	}
}

// One exchange serves every concurrent call of a caller: the call that
// began it going away (its client gave up) does not end it for the
// others, which get the token.
func TestSharedExchangeOutlivesTheCallThatBeganIt(t *testing.T) {
	release := make(chan struct{})
	var asked sync.WaitGroup
	asked.Add(1)
	var once sync.Once
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(asked.Done)
		<-release
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token":"exchanged-1","token_type":"Bearer","expires_in":300}`)
	}))
	c, caller := exchangeClient(t, endpoint)
	first, giveUp := context.WithCancel(context.Background())
	firstErr := make(chan error, 1)
	go func() {
		_, err := c.WithCaller(first, "alice", caller)
		firstErr <- err
	}()
	asked.Wait() // the first call's exchange is at the endpoint
	second := make(chan string, 1)
	go func() {
		ctx, err := c.WithCaller(context.Background(), "alice", caller)
		if err != nil {
			t.Error(err)
		}
		second <- callerAuthorization(ctx)
	}()
	giveUp()
	if err := <-firstErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("the call that gave up: %v", err)
	}
	close(release)
	if got := <-second; got != "Bearer exchanged-1" {
		t.Fatalf("the other call: %q, want the shared exchange's token", got)
	}
}

// A token the endpoint issues that cannot go in a header as it is (a
// control character in it) is the endpoint's bad answer, invalid_response,
// never cached and never sent to the backend as if the backend were down.
func TestExchangedTokenMustFitAHeader(t *testing.T) {
	n := 0
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token":"bad\u0001token","token_type":"Bearer","expires_in":300}`)
	}))
	c, caller := exchangeClient(t, endpoint)
	for range 2 {
		_, err := c.WithCaller(context.Background(), "alice", caller)
		var te *TokenError
		if !errors.As(err, &te) || te.Code != "invalid_response" {
			t.Fatalf("an unusable token: %v, want invalid_response", err)
		}
	}
	if n != 2 || c.tokens.cached() != 0 {
		t.Fatalf("%d exchanges, %d cached; want each call to ask and none cached", n, c.tokens.cached())
	}
}

// exchangeClient is a client of a backend whose calls exchange alice's
// token (returned, valid for an hour) at endpoint, closed with it.
func exchangeClient(t *testing.T, endpoint *httptest.Server) (*Client, string) {
	t.Helper()
	t.Cleanup(endpoint.Close)
	auth := Auth{Mode: AuthTokenExchange, Audience: "web", TokenEndpoint: endpoint.URL, ClientID: "api", ClientSecret: "s", CacheEntries: 8}
	c := newTestClient(Config{Name: "web", URL: "http://127.0.0.1:1/mcp", Protocol: ProtocolModern, Auth: auth, Timeout: 10 * time.Second})
	t.Cleanup(c.Close)
	return c, fakeJWT(`{"sub":"alice","aud":"switchboard","exp":` + strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10) + `}`)
}

// expires_in is read as providers write it: a number, or a number in a
// string (Azure AD's v1 endpoint), however large, or shorter than
// RefreshBefore; each keeps the token for the next request rather than
// asking for a grant per request.
func TestServiceTokenLifetimes(t *testing.T) {
	for _, expiresIn := range []string{"3600", `"3599"`, "1e300", "20"} {
		auth := startServiceTokens(t, expiresIn)
		auth.RefreshBefore = 30 * time.Second
		c := newTestClient(Config{Name: "cc", URL: "http://127.0.0.1:1/mcp", Protocol: ProtocolModern, Auth: auth, Timeout: 10 * time.Second})
		t.Cleanup(c.Close)
		var got []string
		for _, who := range []string{"alice", "bob"} {
			ctx, err := c.WithCaller(context.Background(), who, "")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, callerAuthorization(ctx))
		}
		if got[0] != "Bearer service-token-0001" || got[1] != got[0] {
			t.Errorf("expires_in %s: tokens %q, want one grant's token kept", expiresIn, got)
		}
	}
}

// One caller cannot take the cache from the others: a client that renews
// its token often (or one presenting many tokens) leaves the tokens it
// moved on from in the cache until they expire, and were they not bounded
// per caller they would push every other caller's token out, costing each
// of them an exchange per call. The caller keeps its most recent tokens.
func TestOneCallersTokensLeaveTheOthersCached(t *testing.T) {
	var mu sync.Mutex
	exchanges := map[string]int{} // by subject token
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		mu.Lock()
		exchanges[r.PostForm.Get("subject_token")]++
		n := len(exchanges)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"access_token":"exchanged-%d","token_type":"Bearer","expires_in":3600}`, n)
	}))
	c, _ := exchangeClient(t, endpoint) // 8 entries
	exp := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	token := func(sub string, i int) string {
		return fakeJWT(`{"sub":"` + sub + `","aud":"switchboard","exp":` + exp + `,"jti":"` + strconv.Itoa(i) + `"}`)
	}
	call := func(sub, tok string) {
		t.Helper()
		if _, err := c.WithCaller(context.Background(), sub, tok); err != nil {
			t.Fatalf("%s: %v", sub, err)
		}
	}
	bob := token("bob", 0)
	call("bob", bob)
	for i := range 20 {
		call("alice", token("alice", i))
	}
	call("bob", bob)
	call("alice", token("alice", 19))
	mu.Lock()
	defer mu.Unlock()
	if exchanges[bob] != 1 || exchanges[token("alice", 19)] != 1 {
		t.Fatalf("bob's token was exchanged %d times, alice's latest %d; want each once (cached)", exchanges[bob], exchanges[token("alice", 19)])
	}
	if n := c.tokens.cached(); n >= c.tokens.auth.CacheEntries {
		t.Fatalf("%d tokens cached, as many as the cache holds: alice's fill it", n)
	}
}

// A token endpoint that cannot be reached, or whose answer holds no
// usable token, fails the call with "unreachable" or "invalid_response"
// alone, which is all a client may learn; the operator who has to fix it
// finds why in the log (a certificate not trusted, a token type that is
// not Bearer), without the caller's token or the client secret.
func TestTokenEndpointFailuresSayWhyInTheLog(t *testing.T) {
	untrusted := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	notBearer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token":"exchanged-1","token_type":"N_A","expires_in":300}`)
	}))
	for _, tc := range []struct {
		endpoint  *httptest.Server
		code, why string
	}{
		{untrusted, "unreachable", "certificate"},
		{notBearer, "invalid_response", "N_A"},
	} {
		t.Cleanup(tc.endpoint.Close)
		var log testkit.LogBuffer
		auth := Auth{Mode: AuthTokenExchange, Audience: "web", TokenEndpoint: tc.endpoint.URL, ClientID: "api", ClientSecret: "exchange-client-secret", CacheEntries: 8}
		c := newTestClientLogging(Config{Name: "web", URL: "http://127.0.0.1:1/mcp", Protocol: ProtocolModern, Auth: auth, Timeout: 10 * time.Second}, debugLogger(&log))
		t.Cleanup(c.Close)
		caller := fakeJWT(`{"sub":"alice","aud":"switchboard"}`)
		_, err := c.WithCaller(context.Background(), "alice", caller)
		var te *TokenError
		if !errors.As(err, &te) || te.Code != tc.code {
			t.Fatalf("%s: %v, want %s", tc.endpoint.URL, err, tc.code)
		}
		text := log.String()
		if !strings.Contains(text, tc.why) {
			t.Errorf("%s: the log does not say why (%s):\n%s", tc.code, tc.why, text)
		}
		if strings.Contains(text, caller) || strings.Contains(text, "exchange-client-secret") || strings.Contains(text, "exchanged-1") {
			t.Errorf("%s: the log holds a token or the secret:\n%s", tc.code, text)
		}
	}
}
