package rpc_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/rpc"
)

// TestServerMetricsCountByCallerAndCode: every handled RPC is counted under
// the credential that made it and the code it ended with.
func TestServerMetricsCountByCallerAndCode(t *testing.T) {
	reg := prometheus.NewRegistry()
	addr := startIndexer(t, testCreds, principalEcho, rpc.ServerMetrics(reg)...)

	gateway := indexerv1.NewIndexerServiceClient(dial(t, addr, "gateway-secret"))
	for range 3 {
		if _, err := gateway.RefreshScope(context.Background(), &indexerv1.RefreshScopeRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	// A bound caller acts as itself.
	reporting := indexerv1.NewIndexerServiceClient(dial(t, addr, "reporting-secret"))
	_, _ = reporting.RefreshScope(context.Background(), &indexerv1.RefreshScopeRequest{Principal: nil})
	// A call without credentials never reaches the service: not counted
	// (the authentication interceptor refuses it first).
	_, _ = indexerv1.NewIndexerServiceClient(dial(t, addr, "")).RefreshScope(context.Background(), &indexerv1.RefreshScopeRequest{})

	const m = "/switchboard.indexer.v1.IndexerService/RefreshScope"
	want := `
# HELP switchboard_grpc_server_handled_total Authenticated gRPC requests this service handled, by full method name, status code and calling service.
# TYPE switchboard_grpc_server_handled_total counter
switchboard_grpc_server_handled_total{caller="gateway",code="OK",method="` + m + `"} 3
switchboard_grpc_server_handled_total{caller="reporting",code="OK",method="` + m + `"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "switchboard_grpc_server_handled_total"); err != nil {
		t.Error(err)
	}
}
