package server_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/ratelimit"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// testLimiter applies cfg with buckets in this process; nil without
// limits.
func testLimiter(t testing.TB, cfg config.RateLimits) *ratelimit.Limiter {
	t.Helper()
	if len(cfg.Limits) == 0 {
		return nil
	}
	set, err := ratelimit.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ratelimit.New(set, &ratelimit.MemoryBuckets{}, quietLog, nil)
}

// TestRateLimitAfterAuthorization: a denied or missing tool is NOT_FOUND
// and takes no token; an allowed call takes one; past the burst the call
// is RESOURCE_EXHAUSTED with ERROR_REASON_RATE_LIMITED and a retry-after,
// and the backend never sees it. A limit per backend counts reads and
// prompts too.
func TestRateLimitAfterAuthorization(t *testing.T) {
	var ran atomic.Int64
	eng := newTestBackend(t, "eng", backendOptions{tools: []string{"deploy"}, extra: func(b *testBackend) {
		b.server.AddTool(&mcp.Tool{Name: "build", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ran.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "built"}}}, nil
		})
	}})
	full, err := config.Load(writeFile(t, "switchboard.yaml", `
aggregator:
  authz: {policyFile: `+writeFile(t, "policy.cedar", `permit (principal, action == Action::"call_tool", resource == Tool::"eng_build");`)+`}
  backends:
    - {name: eng, url: `+eng.url()+`}
rateLimits:
  limits:
    - {name: each-user, per: principal, rate: 1/h, burst: 3}
`))
	if err != nil {
		t.Fatal(err)
	}
	h, err := startAggregatorWith(t, full, quietLog)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	alice := principal("alice")
	testkit.Eventually(t, "eng_build listed", 10*time.Second, func() bool { return len(listToolNames(t, h.gateway, alice, 0)) == 1 })
	call := func(name string) error {
		_, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: alice, Name: name})
		return err
	}
	// Denied and missing, many times: no token taken.
	for range 10 {
		wantStatus(t, call("eng_deploy"), codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
		wantStatus(t, call("eng_nothing"), codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	}
	for i := range 3 {
		if err := call("eng_build"); err != nil {
			t.Fatalf("call %d within the burst: %v", i, err)
		}
	}
	calls := func() int { return int(ran.Load()) }
	seen := calls()
	if seen != 3 {
		t.Fatalf("the backend saw %d calls, want the 3 admitted", seen)
	}
	err = call("eng_build")
	wantStatus(t, err, codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_RATE_LIMITED)
	reason, meta := apierr.Info(err)
	if reason != commonv1.ErrorReason_ERROR_REASON_RATE_LIMITED || meta["limit"] != "each-user" || meta["retryAfterSeconds"] == "" {
		t.Fatalf("refusal %v: reason %v metadata %v", status.Convert(err).Message(), reason, meta)
	}
	if got := calls(); got != seen {
		t.Fatalf("the backend saw %d more requests after the refusal", got-seen)
	}
	// Another principal has a bucket of its own.
	if _, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: principal("bob"), Name: "eng_build"}); err != nil {
		t.Fatalf("bob: %v", err)
	}
}
