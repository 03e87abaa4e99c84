package edge

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// startLegacyConfirmBackend serves a Legacy-only (stateful) go-sdk backend
// whose confirm tool asks for a confirmation with a real
// elicitation/create; cancelled hears of a call cancelled while it waited.
func startLegacyConfirmBackend(t *testing.T) (string, chan struct{}) {
	cancelled := make(chan struct{}, 4)
	server := mcp.NewServer(&mcp.Implementation{Name: "legacy", Version: "1"}, nil)
	server.AddTool(&mcp.Tool{Name: "confirm", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Really?", RequestedSchema: map[string]any{"type": "object"}})
		if err != nil {
			if ctx.Err() != nil {
				cancelled <- struct{}{}
			}
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "confirmed: " + res.Action}}}, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(srv.Close)
	return srv.URL, cancelled
}

// startAggregatorProcess builds and runs the real aggregator binary with
// the given backends (YAML list items) and returns its gRPC address.
func startAggregatorProcess(t *testing.T, backends string) string {
	t.Helper()
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", dir, "github.com/switchboard-mcp/switchboard/aggregator/cmd/switchboard-aggregator")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build aggregator: %v\n%s", err, out)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	cfgPath := filepath.Join(dir, "switchboard.yaml")
	yaml := `
serviceAuth:
  credentials:
    - name: gateway
      token: ` + serviceToken + `
      assertPrincipals: true
      allow: ["switchboard.aggregator.v1.AggregatorService/*"]
aggregator:
  listen: ` + addr + `
  catalogTTL: 1h
  backends:
` + backends
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "switchboard-aggregator"), "--config", cfgPath)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	conn, err := rpc.Dial(config.Endpoint{Address: addr, Token: serviceToken}, config.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := aggregatorv1.NewAggregatorServiceClient(conn)
	testkit.Eventually(t, "the aggregator serves the backend's tools", 10*time.Second, func() bool {
		resp, err := client.ListTools(context.Background(), &aggregatorv1.ListToolsRequest{Principal: nil})
		return err == nil && len(resp.GetTools()) > 0
	})
	return addr
}

// startGatewayOverAggregator serves a gateway over a real aggregator
// process with the given backends (startAggregatorProcess), with the fake
// indexer of b.
func startGatewayOverAggregator(t *testing.T, backendsYAML string) (b *backends, srv *httptest.Server) {
	t.Helper()
	b = startBackends(t)
	cfg := testGatewayConfig(b)
	cfg.Aggregator.Address = startAggregatorProcess(t, backendsYAML)
	_, srv = startGateway(t, b, cfg)
	return b, srv
}

// Issue 6 item 4: real go-sdk clients through the gateway and a real
// aggregator process reach a Legacy-only backend tool that asks for a
// confirmation by elicitation. A Modern client gets input_required and its
// retry completes the held backend call; a Legacy client is asked on its
// response stream; a retry that comes after inputWait is refused and the
// backend call was cancelled.
func TestLegacyBackendElicitationThroughGateway(t *testing.T) {
	backendURL, cancelled := startLegacyConfirmBackend(t)
	_, srv := startGatewayOverAggregator(t, `
    - name: legacy
      url: `+backendURL+`
      protocol: "2025-11-25"
      timeout: 10s
      inputWait: 500ms
`)
	ctx := context.Background()

	elicitations := make(chan string, 8)
	accept := &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		elicitations <- r.Params.Message
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
	}}
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			cs := connect(t, ctx, srv.URL+"/mcp", "alice-key", era.version, accept)
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "legacy_confirm", Arguments: map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			if got := toolText(t, res); got != "confirmed: accept" {
				t.Fatalf("result %q", got)
			}
			if got := <-elicitations; got != "Really?" {
				t.Fatalf("elicitation %q", got)
			}
		})
	}

	t.Run("retry after inputWait", func(t *testing.T) {
		late := &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			// Answer only once the held backend call was given up.
			select {
			case <-cancelled:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
		}}
		cs := connect(t, ctx, srv.URL+"/mcp", "alice-key", "", late)
		callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := cs.CallTool(callCtx, &mcp.CallToolParams{Name: "legacy_confirm", Arguments: map[string]any{}})
		var rpcErr *jsonrpc.Error
		if !errors.As(err, &rpcErr) || rpcErr.Code != wire.CodeInvalidParams || !strings.Contains(rpcErr.Message, "no longer held") {
			t.Fatalf("late retry: %v", err)
		}
	})
}

// TestAbandonedHeldCallIsReleased: a held backend call whose client will
// not answer is released at once, its backend call cancelled, rather than
// held until inputWait: here a Legacy client's cancellation while it is
// asked (the cancellation then reaches the backend as on every path).
func TestAbandonedHeldCallIsReleased(t *testing.T) {
	backendURL, cancelled := startLegacyConfirmBackend(t)
	_, srv := startGatewayOverAggregator(t, `
    - name: legacy
      url: `+backendURL+`
      protocol: "2025-11-25"
      timeout: 60s
      inputWait: 1h
`)
	url := srv.URL + "/mcp"
	backendCancelled := func(why string) {
		t.Helper()
		select {
		case <-cancelled:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the backend call is still held (released only at inputWait)", why)
		}
	}

	asked := func() (sid string) {
		t.Helper()
		resp := send(t, http.MethodPost, url, legacyHeaders("alice-key", ""),
			`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"raw","version":"1"}}}`)
		if sid = resp.header.Get("Mcp-Session-Id"); sid == "" {
			t.Fatalf("initialize: %d %s", resp.status, resp.body)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		t.Cleanup(cancel)
		_, lines := openStream(t, ctx, url, legacyHeaders("alice-key", sid), `{"jsonrpc":"2.0","id":77,"method":"tools/call","params":{"name":"legacy_confirm","arguments":{}}}`)
		if ev := nextEvent(t, lines); !strings.Contains(ev, "elicitation/create") {
			t.Fatalf("first event %s", ev)
		}
		return sid
	}
	sid := asked()
	if r := send(t, http.MethodPost, url, legacyHeaders("alice-key", sid), `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":77}}`); r.status != http.StatusAccepted {
		t.Fatalf("cancel: %d", r.status)
	}
	backendCancelled("a Legacy client's cancellation")
	sid = asked()
	if r := send(t, http.MethodDelete, url, legacyHeaders("alice-key", sid), ""); r.status != http.StatusNoContent {
		t.Fatalf("DELETE: %d", r.status)
	}
	backendCancelled("its session's deletion")
}

// TestLegacyClientWaitEndsWithTheHold: a Legacy client asked on its
// stream for a Legacy backend's input is waited for no longer than the
// aggregator holds the backend's call (inputWait, here 1s), not until
// gateway.timeouts.clientInput (here 30s) only to fail when it finally
// answers: its request ends once the hold has, with an error that says
// so in its own terms (no requestState, which a Legacy client never saw).
func TestLegacyClientWaitEndsWithTheHold(t *testing.T) {
	backendURL, cancelled := startLegacyConfirmBackend(t)
	b := startBackends(t)
	cfg := testGatewayConfig(b)
	cfg.Timeouts.ClientInput = config.Duration(30 * time.Second)
	cfg.Aggregator.Address = startAggregatorProcess(t, `
    - name: legacy
      url: `+backendURL+`
      protocol: "2025-11-25"
      timeout: 60s
      inputWait: 1s
`)
	_, srv := startGateway(t, b, cfg)
	url := srv.URL + "/mcp"
	sid, _ := initializeEliciting(t, url)
	// Past this the stream is cut and the test fails: well before
	// clientInput, well after inputWait.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_, lines := openStream(t, ctx, url, legacyHeaders("alice-key", sid), `{"jsonrpc":"2.0","id":77,"method":"tools/call","params":{"name":"legacy_confirm","arguments":{}}}`)
	if ev := nextEvent(t, lines); !strings.Contains(ev, "elicitation/create") {
		t.Fatalf("first event %s", ev)
	}
	// The client never answers.
	var final struct {
		Error *wire.Error `json:"error"`
	}
	if ev := nextEvent(t, lines); json.Unmarshal([]byte(ev), &final) != nil || final.Error == nil ||
		!strings.Contains(final.Error.Message, "stopped waiting") || strings.Contains(final.Error.Message, "requestState") {
		t.Fatalf("the request once the hold ended: %s, want an error saying the server stopped waiting", ev)
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the held backend call was not cancelled")
	}
}

// TestBackendStateIsNotReleased: an input_required answer whose state is
// the backend's own (a Modern backend's), held by no aggregator, is never
// sent back to be released when the client cannot answer it: that would
// be a refused call in the trail and the rate limits.
func TestBackendStateIsNotReleased(t *testing.T) {
	b := newBackends()
	var releases atomic.Int32
	b.agg.Check = func(_ context.Context, _ string, req any) error {
		if c, ok := req.(*aggregatorv1.CallToolRequest); ok && c.GetReleaseHeld() {
			releases.Add(1)
		}
		return nil
	}
	b.serve(t)
	_, srv := startGateway(t, b, testGatewayConfig(b))
	r := send(t, http.MethodPost, srv.URL+"/mcp", modernHeaders("tools/call", "Mcp-Name", "alpha_ask"),
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+modernMeta+`,"name":"alpha_ask"}}`)
	if _, _, rerr := r.rpc(t); rerr == nil || rerr.Code != wire.CodeMissingCapability {
		t.Fatalf("a call asking what the client did not declare: %d %s", r.status, r.body)
	}
	if n := releases.Load(); n != 0 {
		t.Fatalf("%d releases sent for a backend's own state", n)
	}
}
