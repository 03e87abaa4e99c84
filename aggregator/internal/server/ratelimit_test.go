package server_test

import (
	"context"
	"slices"
	"strings"
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

// TestRateLimitAfterAuthorization: an allowed call takes a token from
// every limit it matches; past the burst the call is RESOURCE_EXHAUSTED
// with ERROR_REASON_RATE_LIMITED and a retry-after, and the backend never
// sees it. A denied or missing tool is NOT_FOUND and takes a token from
// the limits per principal only, the same for both, so a client sending
// names that do not exist is limited too, and limits per backend (which
// would tell denied from missing) never count it.
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
    - {name: eng, per: backend, rate: 1/h, burst: 1}
`))
	if err != nil {
		t.Fatal(err)
	}
	h, err := startAggregatorWith(t, full, quietLog)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	alice, bob := principal("alice"), principal("bob")
	testkit.Eventually(t, "eng_build listed", 10*time.Second, func() bool { return len(listToolNames(t, h.gateway, alice, 0)) == 1 })
	call := func(p *commonv1.Principal, name string) error {
		_, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: p, Name: name})
		return err
	}
	limitedBy := func(err error, limit string) {
		t.Helper()
		wantStatus(t, err, codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_RATE_LIMITED)
		reason, meta := apierr.Info(err)
		if reason != commonv1.ErrorReason_ERROR_REASON_RATE_LIMITED || meta["limit"] != limit || meta["retryAfterSeconds"] == "" {
			t.Fatalf("refusal %v: reason %v metadata %v, want limit %s", status.Convert(err).Message(), reason, meta, limit)
		}
	}
	// Denied and missing: NOT_FOUND, a token of alice's each.
	wantStatus(t, call(alice, "eng_deploy"), codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	wantStatus(t, call(alice, "eng_nothing"), codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	// The backend's bucket is untouched: the call takes its one token and
	// alice's last.
	if err := call(alice, "eng_build"); err != nil {
		t.Fatalf("a call within the bursts: %v", err)
	}
	if got := ran.Load(); got != 1 {
		t.Fatalf("the backend saw %d calls, want the 1 admitted", got)
	}
	// alice's bucket is empty: missing and denied alike are refused as
	// rate limited, and so is a call.
	limitedBy(call(alice, "eng_nothing"), "each-user")
	limitedBy(call(alice, "eng_deploy"), "each-user")
	limitedBy(call(alice, "eng_build"), "each-user")
	// bob has a bucket of his own; the empty backend bucket does not
	// count his refusals, only his call.
	wantStatus(t, call(bob, "eng_nothing"), codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	wantStatus(t, call(bob, "eng_deploy"), codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	limitedBy(call(bob, "eng_build"), "eng")
	if got := ran.Load(); got != 1 {
		t.Fatalf("the backend saw %d more requests after the refusals", got-1)
	}
}

// TestCallsToADownBackendAreCounted: a call refused because its backend
// is down (found, kept and allowed) takes its tokens as the call it would
// have been, as one the backend refuses with a 503 does. It once took
// none, so a client could send such calls, each leaving an audit event,
// without bound for as long as the backend was down.
func TestCallsToADownBackendAreCounted(t *testing.T) {
	flaky := newTestBackend(t, "flaky", backendOptions{tools: []string{"ping"}})
	h := startAggregatorFile(t, `
aggregator:
  catalogTTL: 1h
  health: {interval: 50ms, timeout: 500ms, unhealthyThreshold: 1}
  backends:
    - {name: flaky, url: `+flaky.url()+`}
rateLimits: {limits: [{name: each-user, per: principal, rate: 1/h, burst: 2}]}
`)
	ctx, alice := context.Background(), principal("alice")
	testkit.Eventually(t, "flaky_ping listed", 10*time.Second, func() bool { return slices.Contains(listToolNames(t, h.gateway, principal("lister"), 0), "flaky_ping") })
	flaky.down.Store(true)
	testkit.Eventually(t, "flaky unhealthy", 5*time.Second, func() bool {
		return backendHealth(t, h, "flaky").GetHealth() == aggregatorv1.BackendHealth_BACKEND_HEALTH_UNHEALTHY
	})
	call := func() error {
		_, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: alice, Name: "flaky_ping"})
		return err
	}
	for i := range 2 {
		if err := call(); status.Code(err) != codes.Unavailable {
			t.Fatalf("call %d to the down backend: %v, want UNAVAILABLE", i+1, err)
		}
	}
	wantStatus(t, call(), codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_RATE_LIMITED)
}

// TestOperatorTaskReadsTakeNoTokens: the console's reads of a principal's
// tasks take none of that principal's tokens (console.md), found or not:
// an operator looking at ids that are gone does not spend the user's
// bucket, nor get refused by it.
func TestOperatorTaskReadsTakeNoTokens(t *testing.T) {
	eng := newTestBackend(t, "eng", backendOptions{tools: []string{"build"}})
	h := startAggregatorFile(t, `
aggregator:
  backends:
    - {name: eng, url: `+eng.url()+`}
rateLimits:
  limits:
    - {name: each-user, per: principal, rate: 1/h, burst: 2}
`)
	ctx := context.Background()
	alice := principal("alice")
	for range 3 {
		if _, err := h.operator.GetTask(ctx, &aggregatorv1.GetTaskRequest{Principal: alice, TaskId: "no-such-task"}); status.Code(err) != codes.NotFound {
			t.Fatalf("the operator's read of a task that is not there: %v, want NOT_FOUND", err)
		}
	}
	for i := range 2 {
		if _, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: alice, Name: "eng_build"}); err != nil {
			t.Fatalf("alice's call %d after the operator's reads: %v", i+1, err)
		}
	}
}

// A refused tasks/list (an unknown server, a page too large) takes a
// token from the principal's limits as every refusal does: it answered
// before the limiter, and a client could fill the audit trail with
// refusals without any limit.
func TestRefusedTaskListsTakeTokens(t *testing.T) {
	eng := newTestBackend(t, "eng", backendOptions{tools: []string{"build"}})
	h := startAggregatorFile(t, `
aggregator:
  tasks: {maxPerPrincipal: 10}
  backends:
    - {name: eng, url: `+eng.url()+`}
rateLimits:
  limits:
    - {name: each-user, per: principal, rate: 1/h, burst: 2}
`)
	alice := principal("alice")
	_, err := h.gateway.ListTasks(t.Context(), &aggregatorv1.ListTasksRequest{Principal: alice, Server: "nope"})
	wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	if _, err = h.gateway.ListTasks(t.Context(), &aggregatorv1.ListTasksRequest{Principal: alice, PageSize: 1000}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a page too large: %v, want INVALID_ARGUMENT", err)
	}
	_, err = h.gateway.ListTasks(t.Context(), &aggregatorv1.ListTasksRequest{Principal: alice, Server: "nope"})
	wantStatus(t, err, codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_RATE_LIMITED)
}

// A refused run_code (code mode off in its server, an unknown server, a
// program past its bound or empty) takes a token from the principal's
// limits as every refusal does: each is a code_run event, and a client
// could fill the audit trail with them without any limit.
func TestRefusedRunsTakeTokens(t *testing.T) {
	eng := newTestBackend(t, "eng", backendOptions{tools: []string{"build"}})
	h := startAggregatorFile(t, `
aggregator:
  codeMode: {enabled: true, maxConcurrent: 1, maxProgramBytes: 64}
  backends:
    - {name: eng, url: `+eng.url()+`}
servers:
  - {name: plain, backends: [eng], codeMode: false}
rateLimits:
  limits:
    - {name: each-user, per: principal, rate: 1/h, burst: 4}
`)
	alice := principal("alice")
	run := func(server, program string) error {
		_, err := h.gateway.RunCode(t.Context(), &aggregatorv1.RunCodeRequest{Principal: alice, Server: server, Program: program})
		return err
	}
	wantStatus(t, run("plain", "result = 1"), codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	wantStatus(t, run("no-such", "result = 1"), codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	if err := run("", strings.Repeat("x = 1\n", 20)); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a program past maxProgramBytes: %v, want INVALID_ARGUMENT", err)
	}
	if err := run("", "  "); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("an empty program: %v, want INVALID_ARGUMENT", err)
	}
	wantStatus(t, run("plain", "result = 1"), codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_RATE_LIMITED)
	wantStatus(t, run("", "result = 1"), codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_RATE_LIMITED)
}
