package grpcapi

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/demobackend"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/grpcapi/example"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// The document's Go client (example.Dial, example.ListAllTools) lists a
// catalog whose pages are as large as the aggregator makes them: it cuts
// a ListTools page at 16 MiB, past gRPC's default 4 MiB receive limit, so
// a few tools with large definitions (each well within what a backend
// may list) fill one page of about 5.4 MiB.
func TestDocumentedGoClientListsLargeDefinitions(t *testing.T) {
	c := harness.Start(t, harness.Options{
		Backends:  []harness.Backend{{Name: "demo"}},
		NoIndexer: true,
		Configure: addReportingClient,
	})
	const large = 6
	for i := range large {
		c.AddTool(t, "demo", demobackend.ToolSpec{Name: fmt.Sprintf("big_%d", i), Description: strings.Repeat("d", 900<<10)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := example.Dial(c.Config.Aggregator.Listen, reportingToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	agg := aggregatorv1.NewAggregatorServiceClient(conn)
	// The demo backend's own five tools and the large ones.
	const want = 5 + large
	testkit.Eventually(t, "example.ListAllTools lists every tool", 30*time.Second, func() error {
		tools, err := example.ListAllTools(ctx, agg)
		if err != nil {
			return fmt.Errorf("example.ListAllTools: %s", describe(err))
		}
		if len(tools) != want {
			return fmt.Errorf("example.ListAllTools: %d tools, want %d", len(tools), want)
		}
		return nil
	})
}
