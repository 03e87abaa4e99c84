package edge

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// TestSessionBoundsAnswers: past each bound of Legacy session state and of
// recorded deletions the client gets the answer the operations guide
// promises, and what it held before keeps working.
func TestSessionBoundsAnswers(t *testing.T) {
	b := startBackends(t)
	cfg := testGatewayConfig(b)
	cfg.Sessions.MaxPerPrincipal = 2
	cfg.Sessions.MaxDeleted = 3
	cfg.Sessions.MaxURIBytes = 64
	_, gw := startGateway(t, b, cfg)
	url := gw.URL + "/mcp"
	call := func(key, session, body string) (int, *wire.Error) {
		t.Helper()
		resp := send(t, http.MethodPost, url, legacyHeaders(key, session), body)
		if resp.status != http.StatusOK {
			t.Fatalf("%s: %d %s", body, resp.status, resp.body)
		}
		_, _, rerr := resp.rpc(t)
		return resp.status, rerr
	}
	const setLevel = `{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"info"}}`
	subscribe := func(uri string) string {
		return `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"` + uri + `"}}`
	}
	const ping = `{"jsonrpc":"2.0","id":3,"method":"ping"}`

	a, bb, c := initializeOn(t, url, "alice-key"), initializeOn(t, url, "alice-key"), initializeOn(t, url, "alice-key")
	for _, s := range []string{a, bb} {
		if _, rerr := call("alice-key", s, setLevel); rerr != nil {
			t.Fatalf("setLevel within the bound: %v", rerr)
		}
	}
	if _, rerr := call("alice-key", c, setLevel); rerr == nil || rerr.Code != wire.CodeInternalError {
		t.Fatalf("a third session of alice with state: %+v, want -32603", rerr)
	}
	if _, rerr := call("alice-key", a, subscribe("u://"+strings.Repeat("x", 64))); rerr == nil || rerr.Code != wire.CodeInvalidParams {
		t.Fatalf("a URI past maxURIBytes: %+v, want -32602", rerr)
	}
	if _, rerr := call("alice-key", a, subscribe("u://short")); rerr != nil {
		t.Fatalf("a URI within the bounds: %v", rerr)
	}

	del := func(key, session string) wireResponse {
		t.Helper()
		return send(t, http.MethodDelete, url, legacyHeaders(key, session), "")
	}
	for _, s := range []string{a, bb} {
		if r := del("alice-key", s); r.status != http.StatusNoContent {
			t.Fatalf("DELETE within the bound: %d %s", r.status, r.body)
		}
	}
	// Deleting frees the sessions' state: the third session may have some.
	if _, rerr := call("alice-key", c, setLevel); rerr != nil {
		t.Fatalf("setLevel after two of alice's sessions were deleted: %v", rerr)
	}
	if r := del("alice-key", c); r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
		t.Fatalf("alice's third DELETE: %d %q %s, want 429 with Retry-After", r.status, r.header.Get("Retry-After"), r.body)
	}
	if _, rerr := call("alice-key", c, ping); rerr != nil {
		t.Fatalf("the session whose DELETE was refused: %v", rerr)
	}
	bob1, bob2 := initializeOn(t, url, "bob-key"), initializeOn(t, url, "bob-key")
	if r := del("bob-key", bob1); r.status != http.StatusNoContent {
		t.Fatalf("bob's DELETE: %d %s", r.status, r.body)
	}
	if r := del("bob-key", bob2); r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
		t.Fatalf("a DELETE past maxDeleted: %d %q %s, want 503 with Retry-After", r.status, r.header.Get("Retry-After"), r.body)
	}
	if _, rerr := call("bob-key", bob2, ping); rerr != nil {
		t.Fatalf("the session whose DELETE was refused: %v", rerr)
	}
}

// TestMissingResourceEchoesABoundedURI: a Legacy read of a missing
// resource names the URI in the error's data, unless the URI is longer
// than the bound: the answer is never the size of what the client sent.
func TestMissingResourceEchoesABoundedURI(t *testing.T) {
	b := startBackends(t)
	_, gw := startGateway(t, b, testGatewayConfig(b))
	url := gw.URL + "/mcp"
	session := initializeOn(t, url, "alice-key")
	read := func(uri string) wireResponse {
		t.Helper()
		resp := send(t, http.MethodPost, url, legacyHeaders("alice-key", session), `{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"`+uri+`"}}`)
		if _, _, rerr := resp.rpc(t); resp.status != http.StatusOK || rerr == nil || rerr.Code != wire.CodeResourceNotFound {
			t.Fatalf("read of a missing resource: %d %.300s", resp.status, resp.body)
		}
		return resp
	}
	if r := read("file:///missing"); !strings.Contains(string(r.body), `"data":{"uri":"file:///missing"}`) {
		t.Fatalf("a short URI is not named: %s", r.body)
	}
	long := "file:///" + strings.Repeat("x", 1<<20)
	if r := read(long); len(r.body) > 4096 || strings.Contains(string(r.body), "xxxxxxxx") {
		t.Fatalf("a megabyte URI came back in a %d-byte answer", len(r.body))
	}
}

// TestClientThatStopsReadingIsLetGo: a client that sends a request and
// never reads the answer (its receive window stays full) holds the
// request for as long as one write may take, not for as long as it keeps
// its connection open: the answer is dropped and the request ends.
func TestClientThatStopsReadingIsLetGo(t *testing.T) {
	prev := writeTimeout
	t.Cleanup(func() { writeTimeout = prev }) // after the server is closed
	writeTimeout = 200 * time.Millisecond
	b := startBackends(t)
	// Far more than the sockets between the two buffer.
	big := textResult(strings.Repeat("x", 16<<20))
	b.agg.CallToolFunc = func(context.Context, *aggregatorv1.CallToolRequest) (*aggregatorv1.CallToolResponse, error) {
		return &aggregatorv1.CallToolResponse{ResultType: "complete", ResultJson: big}, nil
	}
	_, srv := startGateway(t, b, testGatewayConfig(b))
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + modernMeta + `,"name":"beta_add","arguments":{}}}`
	head := "POST /mcp HTTP/1.1\r\nHost: " + srv.Listener.Addr().String() + "\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n"
	for k, v := range modernHeaders("tools/call", "Mcp-Name", "beta_add") {
		head += k + ": " + v + "\r\n"
	}
	if _, err := io.WriteString(conn, head+"\r\n"+body); err != nil {
		t.Fatal(err)
	}
	// The request is counted as it ends.
	testkit.Eventually(t, "the request of a client that reads nothing ends", 10*time.Second, func() bool {
		return strings.Contains(string(send(t, http.MethodGet, srv.URL+"/metrics", nil, "").body), `method="tools/call",outcome=`)
	})
}
