package isolation

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// wantMethodDenied fails unless err is PERMISSION_DENIED for a method the
// credential may not call.
func wantMethodDenied(t *testing.T, what string, err error) {
	t.Helper()
	if status.Code(err) != codes.PermissionDenied || apierr.Reason(err) != commonv1.ErrorReason_ERROR_REASON_METHOD_NOT_ALLOWED {
		t.Errorf("%s: %v (reason %s), want PERMISSION_DENIED with ERROR_REASON_METHOD_NOT_ALLOWED", what, err, apierr.Reason(err))
	}
}

// TestServiceCredentialsArePerRPC: the indexer's credential reads the views
// it builds search scopes from (Discover, ListTools, WatchCatalog) and
// nothing else; in particular it cannot call a tool, whoever it names as
// the principal. The gateway's credential keeps everything the gateway
// does, and the indexer still serves find_tool's searches.
func TestServiceCredentialsArePerRPC(t *testing.T) {
	c := harness.Start(t, harness.Options{Backends: []harness.Backend{{Name: "demo"}}})
	aggAddr := c.Config.Aggregator.Listen
	alice := &commonv1.Principal{Subject: "alice", Groups: []string{"eng"}}

	asIndexer := aggregatorAs(t, aggAddr, c.IndexerToken)
	if _, err := asIndexer.Discover(callCtx(t), &aggregatorv1.DiscoverRequest{Principal: alice}); err != nil {
		t.Errorf("the indexer's Discover: %v", err)
	}
	page, err := asIndexer.ListTools(callCtx(t), &aggregatorv1.ListToolsRequest{Principal: alice})
	if err != nil || len(page.GetTools()) == 0 {
		t.Errorf("the indexer's ListTools: %d tools, %v", len(page.GetTools()), err)
	}
	watch, err := asIndexer.WatchCatalog(callCtx(t), &aggregatorv1.WatchCatalogRequest{AllChanges: true})
	if err == nil {
		_, err = watch.Recv()
	}
	if err != nil {
		t.Errorf("the indexer's WatchCatalog: %v", err)
	}

	call := &aggregatorv1.CallToolRequest{Principal: alice, Name: "demo_echo", ArgumentsJson: `{"text":"as alice"}`}
	_, err = asIndexer.CallTool(callCtx(t), call)
	wantMethodDenied(t, "the indexer's CallTool", err)
	stream, err := asIndexer.CallToolStream(callCtx(t), &aggregatorv1.CallToolStreamRequest{Call: call, Principal: alice})
	if err == nil {
		_, err = stream.Recv()
	}
	wantMethodDenied(t, "the indexer's CallToolStream", err)
	_, err = asIndexer.ReadResource(callCtx(t), &aggregatorv1.ReadResourceRequest{Principal: alice, Uri: "demo://readme"})
	wantMethodDenied(t, "the indexer's ReadResource", err)
	_, err = asIndexer.GetPrompt(callCtx(t), &aggregatorv1.GetPromptRequest{Principal: alice, Name: "demo_greet"})
	wantMethodDenied(t, "the indexer's GetPrompt", err)
	_, err = asIndexer.Complete(callCtx(t), &aggregatorv1.CompleteRequest{Principal: alice, ParamsJson: `{}`})
	wantMethodDenied(t, "the indexer's Complete", err)
	_, err = asIndexer.ListBackends(callCtx(t), &aggregatorv1.ListBackendsRequest{})
	wantMethodDenied(t, "the indexer's ListBackends", err)
	// The indexer's own credential is not one its own clients may use
	// either: it is not the gateway's.
	_, err = indexerAs(t, c.Config.Indexer.Listen, c.IndexerToken).Search(callCtx(t), &indexerv1.SearchRequest{Principal: alice, Query: "echo"})
	wantMethodDenied(t, "the indexer's credential on the indexer's Search", err)

	asGateway := aggregatorAs(t, aggAddr, c.GatewayToken)
	res, err := asGateway.CallTool(callCtx(t), call)
	if err != nil || !strings.Contains(res.GetResultJson(), "as alice") {
		t.Errorf("the gateway's CallTool: %v %v", res, err)
	}

	// find_tool's search: the indexer built alice's scope from the
	// aggregator with its reduced credential.
	search := indexerAs(t, c.Config.Indexer.Listen, c.GatewayToken)
	testkit.Eventually(t, "search as the gateway", svcDeadline, func() error {
		resp, err := search.Search(callCtx(t), &indexerv1.SearchRequest{Principal: alice, Query: "echo the text back"})
		if err != nil {
			return err
		}
		for _, h := range resp.GetHits() {
			if h.GetName() == "demo_echo" {
				return nil
			}
		}
		return fmt.Errorf("no demo_echo in %v", resp.GetHits())
	})
}
