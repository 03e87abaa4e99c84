package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/app"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/lifecycle"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestRunServesAndShutsDown runs the service as main does: gRPC with health,
// the HTTP probes and metrics, and a graceful stop when the context ends.
// An open catalog watch, which never ends on its own, does not hold the
// stop for shutdownGrace (an hour here): it ends UNAVAILABLE at once, for
// its caller to open it again on another replica.
func TestRunServesAndShutsDown(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "demo", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "hello", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hi"}}}, nil
	})
	backend := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true}))
	defer backend.Close()

	grpcAddr, httpAddr := freeAddr(t), freeAddr(t)
	cfg, err := config.Parse([]byte(`
serviceAuth:
  credentials:
    - {name: gateway, token: tok, assertPrincipals: true, allow: ["switchboard.aggregator.v1.AggregatorService/*"]}
aggregator:
  listen: `+grpcAddr+`
  httpListen: `+httpAddr+`
  shutdownGrace: 1h
  backends:
    - {name: demo, url: `+backend.URL+`}
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, lifecycle.Env{Config: cfg, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}()

	conn, err := rpc.Dial(config.Endpoint{Address: grpcAddr, Token: "tok"}, config.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	testkit.Eventually(t, "the aggregator serving", 10*time.Second, func() error {
		resp, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: aggregatorv1.AggregatorService_ServiceDesc.ServiceName})
		if err == nil && resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			err = fmt.Errorf("health %v", resp.GetStatus())
		}
		return err
	})
	tools, err := aggregatorv1.NewAggregatorServiceClient(conn).ListTools(context.Background(), &aggregatorv1.ListToolsRequest{})
	if err != nil || len(tools.GetTools()) != 1 || tools.GetTools()[0].GetName() != "demo_hello" {
		t.Fatalf("ListTools: %v %v", tools, err)
	}
	for path, want := range map[string]string{"/healthz": "ok", "/readyz": "ready", "/metrics": "switchboard_aggregator_catalog_version "} {
		resp, err := http.Get("http://" + httpAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Fatalf("GET %s: %d, body lacks %q", path, resp.StatusCode, want)
		}
	}

	// Bounded, so that a watch the stop does not end fails the test.
	watchCtx, stopWatch := context.WithTimeout(context.Background(), 15*time.Second)
	defer stopWatch()
	watch, err := aggregatorv1.NewAggregatorServiceClient(conn).WatchCatalog(watchCtx, &aggregatorv1.WatchCatalogRequest{Principal: &commonv1.Principal{Subject: "alice"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch.Recv(); err != nil {
		t.Fatalf("the watch's first event: %v", err)
	}

	cancel()
	if _, err := watch.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("the watch at shutdown: %v, want UNAVAILABLE", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run returned %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not stop within 15s of cancellation")
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	for name, yaml := range map[string]string{
		"bad listen":     "aggregator: {listen: 'not-an-address'}",
		"bad strategy":   "aggregator: {listen: '127.0.0.1:0', conflictResolution: {strategy: alphabetical}}",
		"bad policy":     "aggregator: {listen: '127.0.0.1:0', authz: {policyFile: /nonexistent/policy.cedar}}",
		"bad protocol":   "aggregator: {listen: '127.0.0.1:0', backends: [{name: a, url: 'http://127.0.0.1:1', protocol: '2024-01-01'}]}",
		"relative url":   "aggregator: {listen: '127.0.0.1:0', backends: [{name: a, url: '/mcp'}]}",
		"duplicate name": "aggregator: {listen: '127.0.0.1:0', backends: [{name: a, url: 'http://127.0.0.1:1'}, {name: a, url: 'http://127.0.0.1:2'}]}",
	} {
		cfg, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := app.Run(context.Background(), lifecycle.Env{Config: cfg, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}); err == nil {
			t.Errorf("%s: run accepted it", name)
		}
	}
}
