package e2e

import (
	"path/filepath"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/test/harness"
	"github.com/switchboard-mcp/switchboard/test/mcpraw"
)

// TestListTasksOfAnUnknownServer: ListTasks naming a server that is not
// configured is NOT_FOUND, as every RPC naming one is, and a request the
// task store refuses without a cursor is not called a bad cursor.
func TestListTasksOfAnUnknownServer(t *testing.T) {
	policyPath := filepath.Join(t.TempDir(), "policy.cedar")
	writeAtomically(t, policyPath, []byte(permitAll))
	c := startTasks(t, policyPath)
	conn, err := rpc.Dial(config.Endpoint{Address: c.Config.Aggregator.Listen, Token: c.GatewayToken}, config.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	agg := aggregatorv1.NewAggregatorServiceClient(conn)
	alice := &commonv1.Principal{Subject: "alice"}
	if _, err := agg.ListTasks(t.Context(), &aggregatorv1.ListTasksRequest{Principal: alice, Server: "ops"}); err != nil {
		t.Fatalf("a configured server: %v", err)
	}
	_, err = agg.ListTasks(t.Context(), &aggregatorv1.ListTasksRequest{Principal: alice, Server: "nope"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("an unknown server: %v, want NOT_FOUND", err)
	}
	_, err = agg.ListTasks(t.Context(), &aggregatorv1.ListTasksRequest{Principal: &commonv1.Principal{Subject: "x\x00"}})
	if apierr.Reason(err) == commonv1.ErrorReason_ERROR_REASON_INVALID_CURSOR {
		t.Fatalf("a request without a cursor refused as a bad cursor: %v", err)
	}
}

// TestAnonymousTasksAreNotListed: under gateway.auth.mode anonymous every
// client is the same principal, whose tasks are guarded by their ids
// alone: tasks/list answers it an empty page. It once gave any anonymous
// client every other one's task ids, and with them their results.
func TestAnonymousTasksAreNotListed(t *testing.T) {
	c := harness.Start(t, harness.Options{Backends: []harness.Backend{{Name: "ops", Spec: tasksSpec}},
		Configure: func(cfg *config.Config) {
			withAggregatorIndexer(t, cfg)
			cfg.Aggregator.ToolOverrides = []config.ToolOverride{{Backend: "ops", Tool: "sleep", TaskSupport: config.TaskSupportOptional}}
		}})
	victim := &mcpraw.Client{URL: c.MCPURL, Capabilities: mcpraw.TasksCapabilities}
	id := createTask(t, victim, "ops_sleep", map[string]any{"duration": "10ms"})
	conn, err := rpc.Dial(config.Endpoint{Address: c.Config.Aggregator.Listen, Token: c.GatewayToken}, config.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	page, err := aggregatorv1.NewAggregatorServiceClient(conn).ListTasks(t.Context(), &aggregatorv1.ListTasksRequest{Principal: &commonv1.Principal{}})
	if err != nil || len(page.GetTasks()) != 0 {
		t.Fatalf("the anonymous principal's tasks/list: %v, %v; want an empty page (the task is %s)", page, err, id)
	}
}
