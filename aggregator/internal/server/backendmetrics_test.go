package server_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/engine"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// TestCancelledCallIsNoBackendError: a call its caller cancels (an MCP
// client that gave up on it) is counted as cancelled in
// switchboard_aggregator_backend_request_seconds, not as an error of the
// backend, which the dashboard's backend errors would blame.
func TestCancelledCallIsNoBackendError(t *testing.T) {
	b := newTestBackend(t, "tickets", backendOptions{})
	reg := prometheus.NewRegistry()
	h, err := startAggregatorWith(t, &config.Config{Aggregator: parseConfig(t, `
aggregator:
  catalogTTL: 1h
  backends:
    - {name: tickets, url: `+b.url()+`}
`)}, slog.New(slog.DiscardHandler), func(o *engine.Options) { o.Metrics = engine.NewMetrics(reg) })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ended := make(chan error, 1)
	go func() {
		_, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: principal("alice"), Name: "tickets_hang", ArgumentsJson: `{}`})
		ended <- err
	}()
	testkit.Eventually(t, "the call to reach the backend", 10*time.Second, func() bool { return b.received("tools/call") > 0 })
	cancel()
	if err := <-ended; status.Code(err) != codes.Canceled && !errors.Is(err, context.Canceled) {
		t.Fatalf("the call ended with %v, want cancelled", err)
	}
	labels := func(outcome string) map[string]string {
		return map[string]string{"backend": "tickets", "method": "tools/call", "outcome": outcome}
	}
	const name = "switchboard_aggregator_backend_request_seconds"
	testkit.Eventually(t, "the cancelled call to be counted", 10*time.Second, func() bool {
		return counterValue(t, reg, name, labels("cancelled"))+counterValue(t, reg, name, labels("error")) > 0
	})
	if got := counterValue(t, reg, name, labels("error")); got != 0 {
		t.Fatalf("the cancelled call counted as %v backend errors", got)
	}
	if got := counterValue(t, reg, name, labels("cancelled")); got != 1 {
		t.Fatalf("%v cancelled calls counted, want 1", got)
	}
}
