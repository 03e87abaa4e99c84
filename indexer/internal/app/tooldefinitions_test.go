package app_test

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

const (
	aggregatorToken = "aggregator-test-token"
	operatorToken   = "operator-test-token"
)

// as is a client of h that presents token.
func (h *harness) as(t *testing.T, token string) indexerv1.IndexerServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(h.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(svcauth.TokenCredentials{Token: token}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return indexerv1.NewIndexerServiceClient(conn)
}

// A tool's first recorded digest is approved; a changed one is pending
// until an operator approves exactly the latest seen digest, through any
// replica; the approval reaches the aggregators watching another replica.
// Only operators approve or list; the aggregator's own credential records
// and watches, nothing more.
func TestToolDefinitionsApprovedByOperatorsAcrossReplicas(t *testing.T) {
	db := env.NewDatabase(t)
	a := start(t, db)
	b := a.replica(t, db)
	a.waitServing(t)
	b.waitServing(t)
	ctx := t.Context()
	aggA, opB, gatewayB, aggB := a.as(t, aggregatorToken), b.as(t, operatorToken), b.as(t, gatewayToken), b.as(t, aggregatorToken)
	first, changed := strings.Repeat("a1", 32), strings.Repeat("b2", 32)

	watch, err := aggA.WatchToolDefinitions(ctx, &indexerv1.WatchToolDefinitionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if msg, err := watch.Recv(); err != nil || !msg.GetResync() {
		t.Fatalf("first message %v, %v; want a resync", msg, err)
	}

	record := func(c indexerv1.IndexerServiceClient, digest string) *indexerv1.ToolDefinitionVerdict {
		t.Helper()
		resp, err := c.RecordToolDefinitions(ctx, &indexerv1.RecordToolDefinitionsRequest{Tools: []*indexerv1.ToolDefinitionDigest{
			{Backend: "alpha", Tool: "echo", Digest: digest},
		}})
		if err != nil || len(resp.GetVerdicts()) != 1 {
			t.Fatalf("record: %v, %v", resp, err)
		}
		return resp.GetVerdicts()[0]
	}
	if v := record(aggA, first); v.GetApprovedDigest() != first || v.GetPending() {
		t.Fatalf("first record: %v", v)
	}
	if v := record(aggB, changed); v.GetApprovedDigest() != first || !v.GetPending() {
		t.Fatalf("a changed definition through the other replica: %v; want approved %s, pending", v, first)
	}
	// The aggregator sends the pending definition for review.
	def := `{"name":"echo","description":"Echo, and more."}`
	if _, err := aggB.RecordToolDefinitions(ctx, &indexerv1.RecordToolDefinitionsRequest{Tools: []*indexerv1.ToolDefinitionDigest{
		{Backend: "alpha", Tool: "echo", Digest: changed, DefinitionJson: def},
	}}); err != nil {
		t.Fatal(err)
	}

	approve := &indexerv1.ApproveToolDefinitionRequest{Backend: "alpha", Tool: "echo", Digest: changed}
	_, err = gatewayB.ApproveToolDefinition(ctx, approve)
	wantReason(t, err, codes.PermissionDenied, commonv1.ErrorReason_ERROR_REASON_OPERATOR_ONLY)
	_, err = gatewayB.ListToolDefinitions(ctx, &indexerv1.ListToolDefinitionsRequest{})
	wantReason(t, err, codes.PermissionDenied, commonv1.ErrorReason_ERROR_REASON_OPERATOR_ONLY)
	_, err = aggB.ApproveToolDefinition(ctx, approve)
	wantReason(t, err, codes.PermissionDenied, commonv1.ErrorReason_ERROR_REASON_METHOD_NOT_ALLOWED)

	list, err := opB.ListToolDefinitions(ctx, &indexerv1.ListToolDefinitionsRequest{})
	if err != nil || len(list.GetDefinitions()) != 1 {
		t.Fatalf("pending: %v, %v", list, err)
	}
	if d := list.GetDefinitions()[0]; d.GetSeenDigest() != changed || d.GetApprovedDigest() != first || !d.GetPending() ||
		d.GetFirstSeen() == nil || d.GetLastSeen() == nil || d.GetApprovedAt() != nil || d.GetSeenDefinitionJson() != def {
		t.Fatalf("pending definition: %v", d)
	}

	// Approving what the operator did not see (the old digest, or one
	// never recorded) is refused; so is an unknown tool.
	for _, d := range []string{first, strings.Repeat("c3", 32)} {
		_, err = opB.ApproveToolDefinition(ctx, &indexerv1.ApproveToolDefinitionRequest{Backend: "alpha", Tool: "echo", Digest: d})
		wantReason(t, err, codes.FailedPrecondition, commonv1.ErrorReason_ERROR_REASON_TOOL_DEFINITION_CHANGED)
	}
	_, err = opB.ApproveToolDefinition(ctx, &indexerv1.ApproveToolDefinitionRequest{Backend: "alpha", Tool: "nope", Digest: changed})
	wantReason(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	_, err = opB.ApproveToolDefinition(ctx, &indexerv1.ApproveToolDefinitionRequest{Backend: "alpha", Tool: "echo", Digest: "ABC"})
	wantReason(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)

	resp, err := opB.ApproveToolDefinition(ctx, approve)
	if err != nil || !resp.GetChanged() || resp.GetDefinition().GetApprovedDigest() != changed || resp.GetDefinition().GetApprovedBy() != "operator" ||
		resp.GetDefinition().GetSeenDefinitionJson() != "" {
		t.Fatalf("approval: %v, %v", resp, err)
	}
	// The watch on the other replica hears of it (PostgreSQL NOTIFY).
	for {
		msg, err := watch.Recv()
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		if len(msg.GetApprovals()) == 1 && msg.GetApprovals()[0].GetTool() == "echo" && msg.GetApprovals()[0].GetDigest() == changed {
			break
		}
		if !msg.GetResync() {
			t.Fatalf("unexpected watch message %v", msg)
		}
	}
	if v := record(aggA, changed); v.GetApprovedDigest() != changed || v.GetPending() {
		t.Fatalf("after the approval: %v", v)
	}
	if resp, err := opB.ApproveToolDefinition(ctx, approve); err != nil || resp.GetChanged() {
		t.Fatalf("approving again: %v, %v; want no change", resp, err)
	}
	if list, err := opB.ListToolDefinitions(ctx, &indexerv1.ListToolDefinitionsRequest{}); err != nil || len(list.GetDefinitions()) != 0 {
		t.Fatalf("pending after approval: %v, %v", list, err)
	}
}

// RecordToolDefinitions is bounded; bad input is INVALID_ARGUMENT and
// records nothing. ListToolDefinitions pages.
func TestToolDefinitionBoundsAndPaging(t *testing.T) {
	h := start(t, env.NewDatabase(t))
	h.waitServing(t)
	ctx := t.Context()
	agg, op := h.as(t, aggregatorToken), h.as(t, operatorToken)
	digest := strings.Repeat("d4", 32)
	tools := func(n int) []*indexerv1.ToolDefinitionDigest {
		out := make([]*indexerv1.ToolDefinitionDigest, n)
		for i := range out {
			out[i] = &indexerv1.ToolDefinitionDigest{Backend: "beta", Tool: fmt.Sprintf("t%05d", i), Digest: digest}
		}
		return out
	}
	for name, req := range map[string][]*indexerv1.ToolDefinitionDigest{
		"too many":                 tools(10_001),
		"duplicate":                append(tools(2), &indexerv1.ToolDefinitionDigest{Backend: "beta", Tool: "t00000", Digest: digest}),
		"long tool name":           {{Backend: "beta", Tool: strings.Repeat("x", 513), Digest: digest}},
		"long backend":             {{Backend: strings.Repeat("x", 257), Tool: "t", Digest: digest}},
		"NUL":                      {{Backend: "beta", Tool: "a\x00b", Digest: digest}},
		"empty tool":               {{Backend: "beta", Digest: digest}},
		"bad digest":               {{Backend: "beta", Tool: "t", Digest: strings.ToUpper(digest)}},
		"long definition":          {{Backend: "beta", Tool: "t", Digest: digest, DefinitionJson: `{"description":"` + strings.Repeat("x", 64<<10) + `"}`}},
		"definition not an object": {{Backend: "beta", Tool: "t", Digest: digest, DefinitionJson: `["x"]`}},
		"definitions over 8 MiB": func() []*indexerv1.ToolDefinitionDigest {
			many := tools(200)
			for _, m := range many {
				m.DefinitionJson = `{"description":"` + strings.Repeat("x", 60<<10) + `"}`
			}
			return many
		}(),
	} {
		_, err := agg.RecordToolDefinitions(ctx, &indexerv1.RecordToolDefinitionsRequest{Tools: req})
		t.Run(name, func(t *testing.T) {
			wantReason(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
		})
	}
	if list, err := op.ListToolDefinitions(ctx, &indexerv1.ListToolDefinitionsRequest{IncludeApproved: true}); err != nil || len(list.GetDefinitions()) != 0 {
		t.Fatalf("refused requests recorded %v, %v", list, err)
	}
	if _, err := agg.RecordToolDefinitions(ctx, &indexerv1.RecordToolDefinitionsRequest{Tools: tools(250)}); err != nil {
		t.Fatal(err)
	}
	var got []string
	req := &indexerv1.ListToolDefinitionsRequest{IncludeApproved: true, PageSize: 100}
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("more pages than 250 definitions fill")
		}
		resp, err := op.ListToolDefinitions(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range resp.GetDefinitions() {
			got = append(got, d.GetTool())
		}
		if resp.GetNextPageToken() == "" {
			break
		}
		req.PageToken = resp.GetNextPageToken()
	}
	if len(got) != 250 || got[0] != "t00000" || got[249] != "t00249" {
		t.Fatalf("paged through %d definitions (%v ... ), want 250 in order", len(got), got[:min(3, len(got))])
	}
	_, err := op.ListToolDefinitions(ctx, &indexerv1.ListToolDefinitionsRequest{PageToken: "!!"})
	wantReason(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
}
