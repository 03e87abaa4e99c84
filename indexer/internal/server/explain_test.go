package server

import (
	"log/slog"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	"github.com/switchboard-mcp/switchboard/services/config"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// serve runs s over gRPC on a loopback port behind the service
// authentication the indexer uses, with creds, and returns a client that
// sends token.
func serve(t *testing.T, s *Server, creds []config.ServiceCredential) func(token string) indexerv1.IndexerServiceClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	auth := svcauth.NewAuthenticator(creds)
	srv := grpc.NewServer(append(s.AccessOptions(), grpc.UnaryInterceptor(auth.UnaryInterceptor()))...)
	indexerv1.RegisterIndexerServiceServer(srv, s)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return func(token string) indexerv1.IndexerServiceClient {
		conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithPerRPCCredentials(svcauth.TokenCredentials{Token: token}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return indexerv1.NewIndexerServiceClient(conn)
	}
}

// Only an operator's credential may ask for an explained search. Any
// other caller, a principal-asserting service or an internal client with a
// bound identity, is refused with PERMISSION_DENIED before anything else
// is looked at: the server below has no store and no scope resolver, and
// reaching either would crash the test. The refusal is the same for every
// principal and query, so it tells nothing about a scope.
func TestExplainIsForOperatorsOnly(t *testing.T) {
	var logs strings.Builder
	search := []string{"switchboard.indexer.v1.IndexerService/Search"}
	creds := []config.ServiceCredential{
		{Name: "gateway", Token: "gateway-token", AssertPrincipals: true, Allow: config.GatewayMethods},
		{Name: "reporting", Token: "reporting-token", Subject: "reporting", Allow: search},
		{Name: "operator", Token: "operator-token", AssertPrincipals: true, Operator: true, Allow: search},
	}
	deps := Deps{Log: slog.New(slog.NewTextHandler(&logs, nil)), Limits: Limits{Default: 8, Max: 50}}
	ready := New(deps)
	ready.SetReady()
	client := serve(t, ready, creds)
	ctx := t.Context()
	var refusal string
	for _, token := range []string{"gateway-token", "reporting-token"} {
		for _, req := range []*indexerv1.SearchRequest{
			{Principal: &commonv1.Principal{Subject: "alice"}, Query: "weather", Explain: true},
			{Principal: &commonv1.Principal{Subject: "bob", Groups: []string{"admins"}}, Query: "create an issue", Limit: 50, Explain: true},
			{Query: "", Explain: true},
		} {
			if token == "reporting-token" {
				req.Principal = nil // a bound identity names none (or only its own)
			}
			_, err := client(token).Search(ctx, req)
			if status.Code(err) != codes.PermissionDenied || apierr.Reason(err) != commonv1.ErrorReason_ERROR_REASON_OPERATOR_ONLY {
				t.Fatalf("%s explaining %+v: %v (reason %s), want PERMISSION_DENIED with ERROR_REASON_OPERATOR_ONLY", token, req, err, apierr.Reason(err))
			}
			msg := status.Convert(err).Message()
			if !strings.Contains(msg, "operator") {
				t.Errorf("refusal %q does not say explain is for operators", msg)
			}
			if refusal != "" && msg != refusal {
				t.Errorf("refusals differ: %q and %q", refusal, msg)
			}
			refusal = msg
		}
	}
	if !strings.Contains(logs.String(), "caller=gateway") || !strings.Contains(logs.String(), "caller=reporting") {
		t.Errorf("refusals not logged with the caller:\n%s", logs.String())
	}

	// The operator passes that check: an indexer that is not ready yet
	// answers it as it answers any search then. A search without explain
	// is not refused either.
	client = serve(t, New(deps), creds)
	for token, req := range map[string]*indexerv1.SearchRequest{
		"operator-token": {Principal: &commonv1.Principal{Subject: "alice"}, Query: "weather", Explain: true},
		"gateway-token":  {Principal: &commonv1.Principal{Subject: "alice"}, Query: "weather"},
	} {
		_, err := client(token).Search(ctx, req)
		if status.Code(err) != codes.Unavailable || apierr.Reason(err) != commonv1.ErrorReason_ERROR_REASON_NOT_READY {
			t.Errorf("%s searching %+v on a starting indexer: %v, want UNAVAILABLE with ERROR_REASON_NOT_READY", token, req, err)
		}
	}
}
