package backend

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// TestAdvice: the failures a first configuration meets, as the client meets
// them, come with what to do about them.
func TestAdvice(t *testing.T) {
	// A port nothing listens on.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + lis.Addr().String() + "/mcp"
	lis.Close()
	// A server whose MCP endpoint is at /mcp, asked at /.
	server := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "0"}, nil)
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	for _, tc := range []struct {
		name, url, protocol, want string
	}{
		{"nothing listens", closed, ProtocolAuto, "nothing listens at the backend's address"},
		{"wrong path", srv.URL + "/", ProtocolAuto, "usually serve at a path such as /mcp"},
		{"no such host", "http://no-such-host.invalid/mcp", ProtocolAuto, "host name does not resolve"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestClient(Config{Name: "b", URL: tc.url, Protocol: tc.protocol, Timeout: 5 * time.Second})
			t.Cleanup(c.Close)
			_, err := c.ListAll(context.Background())
			if err == nil {
				t.Fatal("listed")
			}
			if got := Advice(err); !strings.Contains(got, tc.want) {
				t.Fatalf("advice %q for %v", got, err)
			}
		})
	}
	if got := Advice(&eraError{negotiated: ProtocolLegacy, configured: ProtocolModern}); !strings.Contains(got, "protocol to auto") {
		t.Fatalf("era advice %q", got)
	}
}

// TestNoAdviceForABackendsOwnError: a backend that is up and answers its
// listing with a JSON-RPC error whose text mentions a refused connection
// and a 404 of its own (its database's, say) is not told that nothing
// listens at its address or that its path is wrong. Advice once read any
// error's text.
func TestNoAdviceForABackendsOwnError(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "0"}, nil)
	server.AddTool(&mcp.Tool{Name: "t", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" {
				return nil, &jsonrpc.Error{Code: -32603, Message: "catalog store: dial tcp 10.0.0.7:5432: connect: connection refused (Not Found)"}
			}
			return next(ctx, method, req)
		}
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(srv.Close)
	c := newTestClient(Config{Name: "b", URL: srv.URL, Protocol: ProtocolAuto, Timeout: 5 * time.Second})
	t.Cleanup(c.Close)
	_, err := c.ListAll(context.Background())
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("listing: %v, want the backend's error", err)
	}
	if got := Advice(err); got != "" {
		t.Fatalf("advice %q for the backend's own error %v", got, err)
	}
}

// A closed client leaves no connection to its backend open: a reload that
// replaces a backend's client many times must not pile them up until they
// idle out.
func TestClosedClientClosesItsConnections(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "0"}, nil)
	server.AddTool(&mcp.Tool{Name: "t", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	var open atomic.Int64
	srv := httptest.NewUnstartedServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c := newTestClient(Config{Name: "b", URL: srv.URL, Protocol: ProtocolAuto, Timeout: 5 * time.Second})
	if _, err := c.ListAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(context.Background(), &Call{Method: "tools/call", Name: "t", Params: []byte(`{"name":"t","arguments":{}}`)}); err != nil {
		t.Fatal(err)
	}
	if open.Load() == 0 {
		t.Fatal("no connection was open")
	}
	c.Close()
	testkit.Eventually(t, "the closed client's connections closed", 5*time.Second, func() error {
		if n := open.Load(); n != 0 {
			return fmt.Errorf("%d connections open", n)
		}
		return nil
	})
}
