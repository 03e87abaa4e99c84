package grpcapi

import (
	"context"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// Every port serves grpc.health.v1.Health for each service it serves, as
// gRPC client-side health checking asks it (with the service's name):
// the indexer's for ClusterStateService as well as IndexerService.
func TestIndexerHealthReportsEveryService(t *testing.T) {
	c := harness.Start(t, harness.Options{Backends: []harness.Backend{{Name: "demo"}}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h := healthpb.NewHealthClient(dialRaw(t, c.Config.Indexer.Listen))
	for _, svc := range []string{indexerv1.IndexerService_ServiceDesc.ServiceName, indexerv1.ClusterStateService_ServiceDesc.ServiceName} {
		r, err := h.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("Health.Check(%q) on the indexer = %v, %s; want SERVING", svc, r.GetStatus(), describe(err))
		}
	}
}
