package hostile

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// The stack's stream limits (gateway.streams in configTemplate).
const (
	streamsPerPrincipal = 4
	streamsPerReplica   = 6
)

// sseStream is an open notification stream, or the answer that refused it.
type sseStream struct {
	status int
	header http.Header
	// first is the first SSE line of an open stream (a data line or a
	// comment); body is a refusal's whole body.
	first, body string
	close       func()
}

// openSSE sends r and, for a stream, reads its first line and keeps it
// open until close; a refusal is read whole. It never waits longer than a
// few seconds for the first line, so a stream that should have been
// refused fails the test instead of hanging it.
func (c *client) openSSE(t *testing.T, r request) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	method := r.method
	if method == "" {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(ctx, method, c.stack.base+"/mcp", bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range r.header {
		req.Header.Add(h.name, h.value)
	}
	// No client timeout: the stream stays open until close.
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("%s /mcp: %v", method, err)
	}
	s := &sseStream{status: resp.StatusCode, header: resp.Header, close: func() { cancel(); resp.Body.Close() }}
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		s.body = string(b)
		s.close()
		return s
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if l := sc.Text(); l != "" && !strings.HasPrefix(l, "event:") {
				lines <- l
				return
			}
		}
		close(lines)
	}()
	select {
	case s.first = <-lines:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s /mcp: status %d, a stream with nothing on it after 10s", method, resp.StatusCode)
	}
	return s
}

func listenRequest(key string, id int) request {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{%s,"notifications":{"toolsListChanged":true}}}`, id, modernMeta)
	return request{header: modernHeaders(key, "subscriptions/listen"), body: []byte(body)}
}

func getRequest(key, session string) request {
	return request{method: http.MethodGet, header: []header{
		{"Authorization", "Bearer " + key}, {"Accept", "text/event-stream"},
		{"Mcp-Session-Id", session}, {"Mcp-Protocol-Version", "2025-11-25"},
	}}
}

// open asserts that r opened a stream.
func (c *client) open(t *testing.T, what string, r request) *sseStream {
	t.Helper()
	s := c.openSSE(t, r)
	if s.status != http.StatusOK || s.first == "" {
		t.Fatalf("%s: %d %q %q, want an open stream", what, s.status, s.first, s.body)
	}
	return s
}

// assertRefused asserts that r was refused with 429 and Retry-After and, for a listen
// (wantID set), a JSON-RPC error for that request whose code MCP defines.
func (c *client) assertRefused(t *testing.T, what string, r request, wantID string) {
	t.Helper()
	s := c.openSSE(t, r)
	if s.status != http.StatusTooManyRequests {
		s.close()
		t.Fatalf("%s: %d %q %q, want 429", what, s.status, s.first, s.body)
	}
	if s.header.Get("Retry-After") == "" {
		t.Errorf("%s: 429 without Retry-After", what)
	}
	if wantID == "" {
		return
	}
	var reply struct {
		ID    json.RawMessage `json:"id"`
		Error *rpcError       `json:"error"`
	}
	if json.Unmarshal([]byte(s.body), &reply) != nil || reply.Error == nil || string(reply.ID) != wantID || !specCodes[reply.Error.Code] ||
		!strings.Contains(reply.Error.Message, "streams") {
		t.Fatalf("%s: body %q, want a JSON-RPC error for id %s that says why", what, s.body, wantID)
	}
}

// TestStreamLimits opens notification streams until the gateway's bounds:
// a principal's streams past gateway.streams.maxPerPrincipal, listen or
// GET, are refused with 429 while another principal still gets its own,
// up to the replica's gateway.streams.maxOpen; a closed stream frees its
// place.
func TestStreamLimits(t *testing.T) {
	s := startStack(t)
	c := newClient(s)
	var alice []*sseStream
	for i := range streamsPerPrincipal {
		alice = append(alice, c.open(t, fmt.Sprintf("alice's listen %d", i), listenRequest(aliceKey, 100+i)))
	}
	if !strings.Contains(alice[0].first, "notifications/subscriptions/acknowledged") {
		t.Fatalf("a listen's first event: %s", alice[0].first)
	}
	c.assertRefused(t, "alice's listen past her bound", listenRequest(aliceKey, 200), "200")
	aliceSession := c.initialize(t, aliceKey)
	c.assertRefused(t, "alice's GET stream past her bound", getRequest(aliceKey, aliceSession), "")

	bobSession := c.initialize(t, bobKey)
	bob := []*sseStream{c.open(t, "bob's GET stream", getRequest(bobKey, bobSession))}
	for i := 1; i < streamsPerReplica-streamsPerPrincipal; i++ {
		bob = append(bob, c.open(t, fmt.Sprintf("bob's listen %d", i), listenRequest(bobKey, 300+i)))
	}
	c.assertRefused(t, "bob's listen past the replica's bound", listenRequest(bobKey, 400), "400")

	alice[0].close()
	testkit.Eventually(t, "alice's new listen once she closed a stream", 30*time.Second, func() error {
		again := c.openSSE(t, listenRequest(aliceKey, 500))
		if again.status != http.StatusOK {
			return fmt.Errorf("still refused: %d %s", again.status, again.body)
		}
		again.close()
		return nil
	})
	for _, st := range append(alice[1:], bob...) {
		st.close()
	}
	s.checkAlive(t)
}
