package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/demobackend"
	"github.com/switchboard-mcp/switchboard/services/devstack"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

const replicasSpec = `
tools:
  - {name: log, description: Log at three levels., behaviour: log}
  - {name: ask, description: Ask the client to confirm., behaviour: ask}
  - {name: nap, description: Sleep for the duration asked., behaviour: sleep}
resources:
  - {uri: "alpha://readme", name: readme, text: "readme of {backend}"}
  - {uri: "alpha://notes", name: notes, text: "notes of {backend}"}
`

// replicaWait bounds every wait for a change to reach the other replica;
// it comes in milliseconds, but the machine is shared and slow.
const replicaWait = 30 * time.Second

// TestLegacySessionAcrossReplicas runs one go-sdk Legacy session over two
// gateway processes that share one aggregator, one indexer and one
// PostgreSQL: the session is created on B, its GET stream is held on A,
// and each request is sent to the replica the step names. What the
// session sets on one replica is honoured on the other, an answer to an
// input request reaches the replica waiting for it, and a deletion on B
// ends the session on A.
func TestLegacySessionAcrossReplicas(t *testing.T) {
	c, a, b := startReplicas(t, nil)
	rt := &replicaRouter{get: a, answers: b}
	rt.post.Store(&b)
	updated := make(chan string, 64)
	listChanged := make(chan struct{}, 64)
	logged := make(chan string, 64)
	client := mcp.NewClient(&mcp.Implementation{Name: "switchboard-replicas", Version: "0"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			updated <- req.Params.URI
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { listChanged <- struct{}{} },
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			logged <- string(req.Params.Level)
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
		},
	})
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: c.MCPURL, HTTPClient: &http.Client{Transport: rt}, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: harness.Legacy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if first := rt.served("initialize"); first != b {
		t.Fatalf("initialize served by %s, want B (%s)", first, b)
	}
	testkit.Eventually(t, "the GET stream is open on A", replicaWait, func() error {
		if !rt.getOpen.Load() {
			return fmt.Errorf("no GET stream yet")
		}
		return nil
	})
	via := func(host string) { rt.post.Store(&host) }

	// list_changed reaches the GET stream on A, for a session made on B.
	c.AddTool(t, "alpha", demobackend.ToolSpec{Name: "extra", Description: "An extra tool.", Behaviour: demobackend.BehaviourEcho})
	select {
	case <-listChanged:
	case <-time.After(replicaWait):
		t.Fatal("no tools/list_changed on the GET stream held by A")
	}

	// Without a level the backend's log messages are not relayed.
	via(a)
	if levels := callLog(t, cs, logged); len(levels) != 0 {
		t.Fatalf("log messages %v before any logging/setLevel", levels)
	}
	// logging/setLevel through B is honoured by a call through A.
	via(b)
	if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	via(a)
	testkit.Eventually(t, "a call through A relays the info and warning messages (level set through B)", replicaWait, func() error {
		if levels := callLog(t, cs, logged); !slices.Equal(levels, []string{"info", "warning"}) {
			return fmt.Errorf("log messages %v", levels)
		}
		return nil
	})

	// resources/subscribe through B: the update reaches the GET stream on A.
	via(b)
	for _, uri := range []string{"alpha://readme", "alpha://notes"} {
		if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, "an update of alpha://readme reaches the GET stream on A", replicaWait, func() error {
		touch(t, c.BackendURLs["alpha"], "alpha://readme")
		return awaitUpdate(updated, "alpha://readme")
	})
	// resources/unsubscribe through A stops it: an update of readme then
	// of notes brings notes alone.
	via(a)
	if err := cs.Unsubscribe(t.Context(), &mcp.UnsubscribeParams{URI: "alpha://readme"}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "after unsubscribing, only alpha://notes is updated", replicaWait, func() error {
		drain(updated)
		touch(t, c.BackendURLs["alpha"], "alpha://readme")
		touch(t, c.BackendURLs["alpha"], "alpha://notes")
		select {
		case uri := <-updated:
			if uri != "alpha://notes" {
				return fmt.Errorf("update of %s", uri)
			}
			return nil
		case <-time.After(2 * time.Second):
			return fmt.Errorf("no update of alpha://notes")
		}
	})

	// An elicitation sent on a tools/call stream held by A, answered
	// through B: the call completes.
	via(a)
	answersBefore := rt.count("answer", b)
	ctx, cancel := context.WithTimeout(t.Context(), replicaWait)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha_ask"})
	cancel()
	if err != nil {
		t.Fatalf("alpha_ask through A, answered through B: %v", err)
	}
	if rt.count("answer", b) == answersBefore {
		t.Fatal("the client's answer did not go to B")
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if res.IsError || !strings.Contains(string(raw), `"action":"accept"`) {
		t.Fatalf("alpha_ask answered %s (isError %v), want the accepted action", raw, res.IsError)
	}

	// A session deleted through B: A refuses it, and drops its state.
	sessionID := rt.sessionID()
	if status := deleteSession(t, b, sessionID); status != http.StatusNoContent {
		t.Fatalf("DELETE through B: %d", status)
	}
	testkit.Eventually(t, "A refuses the session deleted through B", replicaWait, func() error {
		status, err := rawListTools(t, a, sessionID)
		if err == nil && status != http.StatusNotFound {
			err = fmt.Errorf("status %d, want 404", status)
		}
		return err
	})
	for _, host := range []string{a, b} {
		waitForMetric(t, host, "switchboard_gateway_session_state_sessions 0")
	}
}

// TestDeletionOutlivesTheReplicaThatMadeIt: a Legacy session deleted
// through A while the indexer is down takes effect on A at once; A is
// then stopped (a rolling upgrade that restarts the indexer too), and
// the indexer comes back during A's shutdown grace. A hands the deletion
// on before it exits, so B refuses the session. Before, A dropped the
// deletions it had not recorded the moment its shutdown began, and B
// served the deleted session until it expired.
func TestDeletionOutlivesTheReplicaThatMadeIt(t *testing.T) {
	c, a, b := startReplicas(t, nil)
	sessionID := rawInitialize(t, a, "")
	if status := rawPost(t, b, "", sessionID, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); status != http.StatusOK {
		t.Fatalf("ping through B before the deletion: %d", status)
	}
	c.Indexer.Kill()
	if status := deleteSession(t, a, sessionID); status != http.StatusNoContent {
		t.Fatalf("DELETE through A: %d", status)
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		c.Gateway.Stop()
	}()
	c.Indexer.Restart()
	<-stopped
	testkit.Eventually(t, "B refuses the session deleted through A", replicaWait, func() error {
		if status := rawPost(t, b, "", sessionID, `{"jsonrpc":"2.0","id":3,"method":"ping"}`); status != http.StatusNotFound {
			return fmt.Errorf("status %d, want 404", status)
		}
		return nil
	})
}

// TestLegacyAnswerOfAnotherPrincipalIsDropped: while principal X's
// elicitation waits on A, principal Y answers it with the same JSON-RPC id
// through B, on its own session (accepted and dropped: the id is sealed for
// X's session) and on X's session id (404: the session is X's). X's own
// answer through B then completes the call with X's action.
func TestLegacyAnswerOfAnotherPrincipalIsDropped(t *testing.T) {
	keys := map[string]string{"x": "key-of-x-0123456789", "y": "key-of-y-0123456789"}
	_, a, b := startReplicas(t, withAPIKeys(keys))
	rt := &replicaRouter{get: a, answers: b, auth: "Bearer " + keys["x"], asked: make(chan json.RawMessage, 4)}
	rt.post.Store(&b)
	release := make(chan struct{})
	client := mcp.NewClient(&mcp.Implementation{Name: "switchboard-replicas-x", Version: "0"}, &mcp.ClientOptions{
		ElicitationHandler: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
		},
	})
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: "http://" + a + "/mcp", HTTPClient: &http.Client{Transport: rt}, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: harness.Legacy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	rt.post.Store(&a)
	type outcome struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), replicaWait)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha_ask"})
		done <- outcome{res, err}
	}()
	var id json.RawMessage
	select {
	case id = <-rt.asked:
	case <-time.After(replicaWait):
		t.Fatal("no elicitation on the call's stream")
	}

	ySession := rawInitialize(t, b, "Bearer "+keys["y"])
	forged := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"action":"decline"}}`, id)
	if status := rawPost(t, b, "Bearer "+keys["y"], ySession, forged); status != http.StatusAccepted {
		t.Fatalf("Y's answer on its own session: %d, want 202 (dropped)", status)
	}
	if status := rawPost(t, b, "Bearer "+keys["y"], rt.sessionID(), forged); status != http.StatusNotFound {
		t.Fatalf("Y's answer on X's session: %d, want 404", status)
	}
	select {
	case o := <-done:
		t.Fatalf("the call ended on Y's answer: %+v %v", o.res, o.err)
	default:
	}
	close(release)
	o := <-done
	if o.err != nil {
		t.Fatalf("alpha_ask: %v", o.err)
	}
	raw, _ := json.Marshal(o.res.StructuredContent)
	if !strings.Contains(string(raw), `"action":"accept"`) {
		t.Fatalf("alpha_ask answered %s, want X's accepted action", raw)
	}
	if rt.count("answer", b) == 0 {
		t.Fatal("X's answer did not go to B")
	}
}

// rawInitialize opens a Legacy session on the gateway at host with
// authorization and returns its id.
func rawInitialize(t *testing.T, host, authorization string) string {
	t.Helper()
	return rawInitializeDeclaring(t, host, authorization, `{"elicitation":{}}`)
}

// rawInitializeDeclaring is rawInitialize with the client capabilities
// given (a JSON object).
func rawInitializeDeclaring(t *testing.T, host, authorization, capabilities string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+host+"/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+harness.Legacy+`","capabilities":`+capabilities+`,"clientInfo":{"name":"y","version":"0"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", authorization)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: %s, session %q", resp.Status, id)
	}
	return id
}

// rawPost posts one JSON-RPC message on a Legacy session and returns the
// HTTP status.
func rawPost(t *testing.T, host, authorization, sessionID, body string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+host+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", authorization)
	req.Header.Set("Mcp-Session-Id", sessionID)
	req.Header.Set("Mcp-Protocol-Version", harness.Legacy)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// deleteSession deletes a Legacy session through the gateway at host
// and returns the HTTP status.
func deleteSession(t *testing.T, host, sessionID string) int {
	t.Helper()
	del, err := http.NewRequestWithContext(t.Context(), http.MethodDelete, "http://"+host+"/mcp", nil)
	if err != nil {
		t.Fatal(err)
	}
	del.Header.Set("Mcp-Session-Id", sessionID)
	resp, err := http.DefaultClient.Do(del)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// withAPIKeys configures the gateway to authenticate API keys, one per
// subject.
func withAPIKeys(keys map[string]string) func(*config.Config) {
	return func(cfg *config.Config) {
		cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys"}
		for subject, key := range keys {
			cfg.Gateway.Auth.APIKeys = append(cfg.Gateway.Auth.APIKeys, config.APIKey{Key: key, Subject: subject})
		}
	}
}

// startReplicas starts a cluster with a demo backend, two gateway
// processes that share a session key (a first, then b, as host:port),
// and waits until both follow the indexer. configure adjusts the
// configuration further.
func startReplicas(t *testing.T, configure func(*config.Config)) (c *harness.Cluster, a, b string) {
	t.Helper()
	c = harness.Start(t, harness.Options{
		Backends: []harness.Backend{{Name: "alpha", Spec: replicasSpec}},
		Configure: func(cfg *config.Config) {
			key := make([]byte, 32)
			if _, err := rand.Read(key); err != nil {
				t.Fatal(err)
			}
			cfg.Gateway.Sessions.Key = base64.StdEncoding.EncodeToString(key)
			cfg.Gateway.Cache.TTL = config.Duration(time.Millisecond)
			// An answer that is not relayed fails the call in this time,
			// not the default's minutes.
			cfg.Gateway.Timeouts.ClientInput = config.Duration(replicaWait)
			if configure != nil {
				configure(cfg)
			}
		},
	})
	a = strings.TrimPrefix(strings.TrimSuffix(c.MCPURL, "/mcp"), "http://")
	b = startGateway(t, c)
	for _, host := range []string{a, b} {
		waitForMetric(t, host, "switchboard_gateway_session_state_watch_up 1")
		waitForMetric(t, host, "switchboard_gateway_revocation_watch_up 1")
	}
	return c, a, b
}

// replicaRouter sends a go-sdk session's requests to the gateway replicas:
// GET to get, JSON-RPC responses (answers to input requests) to answers,
// every other POST to post. It records which replica served what.
type replicaRouter struct {
	get, answers string
	post         atomic.Pointer[string]
	getOpen      atomic.Bool
	// auth, when set, is sent as the Authorization header.
	auth string
	// asked, when set, gets the id of every elicitation/create request
	// the gateways send on a response stream.
	asked chan json.RawMessage

	mu      sync.Mutex
	record  []string // "kind host"
	session string
}

func (rt *replicaRouter) RoundTrip(req *http.Request) (*http.Response, error) {
	host, kind := rt.get, "GET"
	if req.Method == http.MethodPost && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		_ = json.Unmarshal(body, &msg)
		switch {
		case msg.Method == "" && (msg.Result != nil || msg.Error != nil):
			host, kind = rt.answers, "answer"
		default:
			host, kind = *rt.post.Load(), msg.Method
		}
	} else {
		req = req.Clone(req.Context())
		if req.Method != http.MethodGet {
			host, kind = *rt.post.Load(), req.Method
		}
	}
	req.URL.Host, req.Host = host, host
	if rt.auth != "" {
		req.Header.Set("Authorization", rt.auth)
	}
	rt.mu.Lock()
	rt.record = append(rt.record, kind+" "+host)
	rt.mu.Unlock()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		rt.mu.Lock()
		rt.session = id
		rt.mu.Unlock()
	}
	if kind == "GET" && resp.StatusCode == http.StatusOK {
		rt.getOpen.Store(true)
	}
	if rt.asked != nil && kind != "GET" {
		resp.Body = &elicitationSniffer{ReadCloser: resp.Body, asked: rt.asked}
	}
	return resp, nil
}

// elicitationSniffer passes an SSE body through and reports the id of each
// elicitation/create request in it.
type elicitationSniffer struct {
	io.ReadCloser
	asked chan json.RawMessage
	line  []byte
}

func (s *elicitationSniffer) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	s.line = append(s.line, p[:n]...)
	for {
		i := bytes.IndexByte(s.line, '\n')
		if i < 0 {
			break
		}
		data, ok := bytes.CutPrefix(s.line[:i], []byte("data:"))
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if ok && json.Unmarshal(bytes.TrimSpace(data), &msg) == nil && msg.Method == "elicitation/create" {
			s.asked <- msg.ID
		}
		s.line = s.line[i+1:]
	}
	return n, err
}

// served is the replica that served the first request of kind.
func (rt *replicaRouter) served(kind string) string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for _, s := range rt.record {
		if k, host, _ := strings.Cut(s, " "); k == kind {
			return host
		}
	}
	return ""
}

// count is how many requests of kind host served.
func (rt *replicaRouter) count(kind, host string) int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	n := 0
	for _, s := range rt.record {
		if s == kind+" "+host {
			n++
		}
	}
	return n
}

func (rt *replicaRouter) sessionID() string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.session
}

// startGateway starts a second gateway process on the cluster's
// configuration and returns its host:port.
func startGateway(t *testing.T, c *harness.Cluster) string {
	t.Helper()
	cfg := *c.Config
	cfg.Gateway.Listen = harness.FreeAddr(t)
	path := harness.WriteConfig(t, t.TempDir(), &cfg)
	harness.StartProc(t, "gateway-b", devstack.GatewayBin, []string{"--config", path}, nil,
		devstack.HTTPOK("http://"+cfg.Gateway.Listen+"/readyz"))
	return cfg.Gateway.Listen
}

// waitForMetric waits until the gateway at host exposes the metric line.
func waitForMetric(t *testing.T, host, line string) {
	t.Helper()
	testkit.Eventually(t, host+" reports "+line, replicaWait, func() error {
		resp, err := http.Get("http://" + host + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if !strings.Contains(string(body), "\n"+line+"\n") {
			return fmt.Errorf("not yet")
		}
		return nil
	})
}

// callLog calls alpha_log and returns the levels of the log messages the
// call relayed: the backend sends debug, info and warning in that order,
// so a relayed warning is the last one to wait for.
func callLog(t *testing.T, cs *mcp.ClientSession, logged chan string) []string {
	t.Helper()
	drain(logged)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "alpha_log"})
	if err != nil || res.IsError {
		t.Fatalf("alpha_log: %v %+v", err, res)
	}
	var levels []string
	for {
		select {
		case level := <-logged:
			if levels = append(levels, level); level == "warning" {
				return levels
			}
		case <-time.After(time.Second):
			return levels
		}
	}
}

func drain[T any](ch chan T) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// awaitUpdate waits a second for an update of uri.
func awaitUpdate(updated chan string, uri string) error {
	deadline := time.After(time.Second)
	for {
		select {
		case got := <-updated:
			if got == uri {
				return nil
			}
		case <-deadline:
			return fmt.Errorf("no update of %s", uri)
		}
	}
}

// touch tells the demo backend at backendURL that uri changed.
func touch(t *testing.T, backendURL, uri string) {
	t.Helper()
	adminPost(t, backendURL, "/admin/resources/updated", fmt.Sprintf(`{"uri":%q}`, uri))
}

func adminPost(t *testing.T, backendURL, path, body string) {
	t.Helper()
	base := strings.TrimSuffix(backendURL, demobackend.MCPPath)
	resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST %s: %s", path, resp.Status)
	}
}

// rawListTools sends tools/list on the session to the gateway at host
// and returns the HTTP status.
func rawListTools(t *testing.T, host, sessionID string) (int, error) {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+host+"/mcp",
		strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{}}`))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sessionID)
	req.Header.Set("Mcp-Protocol-Version", harness.Legacy)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestLegacyStateChangesAreRateLimited: every change of a Legacy
// session's state (logging/setLevel, resources/subscribe and
// unsubscribe) is a write of the indexer's database and a message to
// every replica carrying the session's whole state (up to a principal's
// gateway.sessions.maxPrincipalStateBytes of subscribed URIs, 1 MiB), so
// a principal rewriting a large state in a loop is refused with 429 and
// Retry-After past its burst, while changes of a small state, however
// many clients of one principal make them at once, are not held back, nor
// is another principal.
func TestLegacyStateChangesAreRateLimited(t *testing.T) {
	keys := map[string]string{"x": "key-of-x-0123456789", "y": "key-of-y-0123456789"}
	_, a, _ := startReplicas(t, withAPIKeys(keys))
	x, y := "Bearer "+keys["x"], "Bearer "+keys["y"]
	xSession, ySession := rawInitialize(t, a, x), rawInitialize(t, a, y)
	post := func(authorization, session, method, params string) (status int, retryAfter, body string) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+a+"/mcp", strings.NewReader(
			`{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":`+params+`}`))
		if err != nil {
			t.Fatal(err)
		}
		setLegacyHeaders(req, authorization, session)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After"), string(b)
	}
	setLevel := func(authorization, session, level string) (status int, retryAfter, body string) {
		return post(authorization, session, "logging/setLevel", `{"level":"`+level+`"}`)
	}
	// 192 level changes of one principal at once, 16 clients at a time.
	flood := func(session string) map[string]int {
		var mu sync.Mutex
		answers := map[string]int{}
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Go(func() {
				for i := range 12 {
					status, retryAfter, body := setLevel(x, session, []string{"debug", "info"}[(w+i)%2])
					what := fmt.Sprintf("%d %.120s", status, body)
					switch {
					case status == http.StatusOK && strings.Contains(body, `"result":{}`):
						what = "ok"
					case status == http.StatusTooManyRequests && retryAfter != "" && strings.Contains(body, `"retryAfterSeconds"`):
						what = "limited"
					}
					mu.Lock()
					answers[what]++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return answers
	}
	if answers := flood(xSession); answers["ok"] != 16*12 {
		t.Fatalf("192 level changes of a small state at once were answered %v, want all ok", answers)
	}
	// A state of 48 URIs of 4,000 bytes: each change rewrites 192 KiB.
	big := rawInitialize(t, a, x)
	for i := range 48 {
		uri := fmt.Sprintf("file:///%04d/%s", i, strings.Repeat("u", 3990))
		if status, _, body := post(x, big, "resources/subscribe", `{"uri":"`+uri+`"}`); status != http.StatusOK || !strings.Contains(body, `"result":{}`) {
			t.Fatalf("subscribe %d: %d %.200s", i, status, body)
		}
	}
	if answers := flood(big); answers["limited"] == 0 || answers["ok"] == 0 || answers["ok"]+answers["limited"] != 16*12 {
		t.Fatalf("192 level changes of a large state at once were answered %v, want some ok, the rest limited with Retry-After", answers)
	}
	if status, _, body := setLevel(y, ySession, "info"); status != http.StatusOK || !strings.Contains(body, `"result":{}`) {
		t.Fatalf("another principal's level change: %d %s", status, body)
	}
}
