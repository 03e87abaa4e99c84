package grpcapi

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// CallToolStreamRequest carries the principal twice, at the top level and
// as call.principal. The one in the call is checked exactly as the
// top-level one: an internal client naming another principal there is
// PERMISSION_DENIED, and a principal past the bounds there is
// INVALID_ARGUMENT, before the tool runs.
func TestCallToolStreamNestedPrincipalIsChecked(t *testing.T) {
	c := harness.Start(t, harness.Options{
		Backends:  []harness.Backend{{Name: "demo"}},
		NoIndexer: true,
		Configure: addReportingClient,
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	agg := aggregatorv1.NewAggregatorServiceClient(dialRaw(t, c.Config.Aggregator.Listen))
	client := withToken(ctx, reportingToken)
	for _, tc := range []struct {
		principal *commonv1.Principal
		want      codes.Code
	}{
		{&commonv1.Principal{Subject: "alice"}, codes.PermissionDenied},
		{&commonv1.Principal{Subject: strings.Repeat("a", 4096)}, codes.InvalidArgument},
	} {
		st, err := agg.CallToolStream(client, &aggregatorv1.CallToolStreamRequest{Call: &aggregatorv1.CallToolRequest{
			Name: "demo_add", ArgumentsJson: `{"a":1,"b":2}`, Principal: tc.principal}})
		if err == nil {
			_, err = st.Recv()
		}
		if status.Code(err) != tc.want {
			t.Errorf("CallToolStream with call.principal %.20q from an internal client: %s, want %s", tc.principal.GetSubject(), describe(err), tc.want)
		}
	}
}
