package server

import (
	"encoding/base64"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	"github.com/switchboard-mcp/switchboard/services/config"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

// Listing and approving tool definitions are for operators only: every
// other caller allowed the RPCs is refused with PERMISSION_DENIED before
// anything else is looked at (the server below has no store; reaching it
// would crash the test), whatever the request holds, and the refusal is
// logged with the caller.
func TestToolDefinitionOperatorRPCsAreForOperatorsOnly(t *testing.T) {
	var logs strings.Builder
	rpcs := []string{"switchboard.indexer.v1.IndexerService/ListToolDefinitions", "switchboard.indexer.v1.IndexerService/ApproveToolDefinition",
		"switchboard.indexer.v1.IndexerService/ListRateLimitBuckets"}
	creds := []config.ServiceCredential{
		{Name: "aggregator", Token: "aggregator-token", AssertPrincipals: true, Allow: append(rpcs, config.AggregatorMethods...)},
		{Name: "reporting", Token: "reporting-token", Subject: "reporting", Allow: rpcs},
		{Name: "operator", Token: "operator-token", Operator: true, Allow: rpcs},
	}
	s := New(Deps{Log: slog.New(slog.NewTextHandler(&logs, nil))})
	s.SetReady()
	client := serve(t, s, creds)
	ctx := t.Context()
	for _, token := range []string{"aggregator-token", "reporting-token"} {
		for _, req := range []*indexerv1.ApproveToolDefinitionRequest{
			{Backend: "alpha", Tool: "echo", Digest: strings.Repeat("ab", 32)},
			{},
		} {
			_, err := client(token).ApproveToolDefinition(ctx, req)
			if status.Code(err) != codes.PermissionDenied || apierr.Reason(err) != commonv1.ErrorReason_ERROR_REASON_OPERATOR_ONLY {
				t.Fatalf("%s approving %v: %v, want PERMISSION_DENIED with ERROR_REASON_OPERATOR_ONLY", token, req, err)
			}
		}
		_, err := client(token).ListToolDefinitions(ctx, &indexerv1.ListToolDefinitionsRequest{IncludeApproved: true, PageToken: "x"})
		if status.Code(err) != codes.PermissionDenied || apierr.Reason(err) != commonv1.ErrorReason_ERROR_REASON_OPERATOR_ONLY {
			t.Fatalf("%s listing: %v, want PERMISSION_DENIED with ERROR_REASON_OPERATOR_ONLY", token, err)
		}
	}
	if !strings.Contains(logs.String(), "caller=aggregator") || !strings.Contains(logs.String(), "caller=reporting") {
		t.Errorf("refusals not logged with the caller:\n%s", logs.String())
	}

	// The operator passes the check; its malformed request is then
	// refused as malformed (still before the store).
	_, err := client("operator-token").ApproveToolDefinition(ctx, &indexerv1.ApproveToolDefinitionRequest{Backend: "alpha", Tool: "echo", Digest: "not hex"})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("operator, malformed digest: %v, want INVALID_ARGUMENT", err)
	}
	// Tokens of ours decode to UTF-8 without NUL; another would reach
	// PostgreSQL and fail there, as an internal error.
	for _, tok := range []string{"not a token of ours", base64.RawURLEncoding.EncodeToString([]byte("demo\x00\xff")),
		base64.RawURLEncoding.EncodeToString([]byte("demo\x00a\x00b"))} {
		_, err = client("operator-token").ListToolDefinitions(ctx, &indexerv1.ListToolDefinitionsRequest{PageToken: tok})
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("operator, foreign page token %q: %v, want INVALID_ARGUMENT", tok, err)
		}
	}
	for _, tok := range []string{base64.RawURLEncoding.EncodeToString([]byte("searches|principal|\xff")), base64.RawURLEncoding.EncodeToString([]byte("a\x00b"))} {
		_, err = client("operator-token").ListRateLimitBuckets(ctx, &indexerv1.ListRateLimitBucketsRequest{Limit: "searches", PageToken: tok})
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("operator, foreign bucket page token %q: %v, want INVALID_ARGUMENT", tok, err)
		}
	}
}
