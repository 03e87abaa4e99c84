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
