package rpc_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	"github.com/switchboard-mcp/switchboard/services/config"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// principalEcho answers RefreshScope with the principal the interceptors
// decided on, so tests can see exactly what a handler would act as.
func principalEcho(ctx context.Context, _ *indexerv1.RefreshScopeRequest) (*indexerv1.RefreshScopeResponse, error) {
	p := svcauth.PrincipalFrom(ctx)
	digest := p.GetSubject()
	for _, g := range p.GetGroups() {
		digest += "|" + g
	}
	return &indexerv1.RefreshScopeResponse{ToolsDigest: digest}, nil
}

// startServer runs a real gRPC server on loopback with the given credentials.
func startServer(t *testing.T, creds []config.ServiceCredential) string {
	t.Helper()
	return startIndexer(t, creds, principalEcho)
}

// startIndexer runs a real gRPC server on loopback serving the fake
// indexer, whose RefreshScope answers with refresh, with the given
// credentials and options.
func startIndexer(t *testing.T, creds []config.ServiceCredential, refresh func(context.Context, *indexerv1.RefreshScopeRequest) (*indexerv1.RefreshScopeResponse, error), opts ...grpc.ServerOption) string {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := rpc.NewServer(svcauth.NewAuthenticator(creds), config.TLS{}, log, opts...)
	if err != nil {
		t.Fatal(err)
	}
	indexerv1.RegisterIndexerServiceServer(srv, &testkit.FakeIndexer{RefreshScopeFunc: refresh})
	srv.SetServing()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ServeListener(ctx, lis, 0) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return lis.Addr().String()
}

func dial(t *testing.T, addr, token string) *grpc.ClientConn {
	t.Helper()
	conn, err := rpc.Dial(config.Endpoint{Address: addr, Token: token}, config.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

var testCreds = []config.ServiceCredential{
	{Name: "gateway", Token: "gateway-secret", AssertPrincipals: true, Allow: []string{"switchboard.indexer.v1.IndexerService/*"}},
	{Name: "reporting", Token: "reporting-secret", Subject: "svc-reporting", Groups: []string{"reports", "audit"}, Allow: []string{"/switchboard.indexer.v1.IndexerService/RefreshScope"}},
	{Name: "searcher", Token: "searcher-secret", AssertPrincipals: true, Allow: []string{"switchboard.indexer.v1.IndexerService/Search"}},
	{Name: "no-allow", Token: "no-allow-secret", AssertPrincipals: true},
	{Name: "unset", Token: "", Allow: []string{"switchboard.indexer.v1.IndexerService/*"}}, // a missing secret must never authenticate anything
}

func TestServiceAuthentication(t *testing.T) {
	addr := startServer(t, testCreds)
	alice := &commonv1.Principal{Subject: "alice", Groups: []string{"eng", "admins", "eng"}}

	cases := []struct {
		name       string
		token      string
		principal  *commonv1.Principal
		wantCode   codes.Code
		wantReason commonv1.ErrorReason
		wantDigest string
	}{
		{name: "no credentials", token: "", principal: alice, wantCode: codes.Unauthenticated, wantReason: commonv1.ErrorReason_ERROR_REASON_UNAUTHENTICATED},
		{name: "wrong token", token: "gateway-secreT", principal: alice, wantCode: codes.Unauthenticated, wantReason: commonv1.ErrorReason_ERROR_REASON_UNAUTHENTICATED},
		{name: "trusted service asserts principal", token: "gateway-secret", principal: alice, wantCode: codes.OK, wantDigest: "alice|admins|eng"},
		{name: "trusted service without principal is anonymous", token: "gateway-secret", wantCode: codes.OK, wantDigest: ""},
		{name: "bound caller acts as itself", token: "reporting-secret", wantCode: codes.OK, wantDigest: "svc-reporting|audit|reports"},
		{name: "bound caller may restate itself", token: "reporting-secret", principal: &commonv1.Principal{Subject: "svc-reporting", Groups: []string{"reports", "audit"}}, wantCode: codes.OK, wantDigest: "svc-reporting|audit|reports"},
		{name: "bound caller cannot impersonate", token: "reporting-secret", principal: alice, wantCode: codes.PermissionDenied, wantReason: commonv1.ErrorReason_ERROR_REASON_PRINCIPAL_NOT_ALLOWED},
		{name: "method not in the allow list", token: "searcher-secret", principal: alice, wantCode: codes.PermissionDenied, wantReason: commonv1.ErrorReason_ERROR_REASON_METHOD_NOT_ALLOWED},
		{name: "no allow list allows nothing", token: "no-allow-secret", principal: alice, wantCode: codes.PermissionDenied, wantReason: commonv1.ErrorReason_ERROR_REASON_METHOD_NOT_ALLOWED},
		{name: "bound caller cannot add groups", token: "reporting-secret", principal: &commonv1.Principal{Subject: "svc-reporting", Groups: []string{"reports", "audit", "admins"}}, wantCode: codes.PermissionDenied, wantReason: commonv1.ErrorReason_ERROR_REASON_PRINCIPAL_NOT_ALLOWED},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client := indexerv1.NewIndexerServiceClient(dial(t, addr, tc.token))
			resp, err := client.RefreshScope(context.Background(), &indexerv1.RefreshScopeRequest{Principal: tc.principal})
			if got := status.Code(err); got != tc.wantCode {
				t.Fatalf("code = %v (%v), want %v", got, err, tc.wantCode)
			}
			if tc.wantCode != codes.OK {
				if got := apierr.Reason(err); got != tc.wantReason {
					t.Fatalf("reason = %v, want %v", got, tc.wantReason)
				}
				return
			}
			if resp.GetToolsDigest() != tc.wantDigest {
				t.Fatalf("principal seen by handler = %q, want %q", resp.GetToolsDigest(), tc.wantDigest)
			}
		})
	}
}

// Probes and grpcurl discovery must work without credentials: they reveal
// nothing about users, and kubelet gRPC probes cannot carry tokens.
func TestHealthAndReflectionNeedNoCredentials(t *testing.T) {
	addr := startServer(t, testCreds)
	conn := dial(t, addr, "")
	resp, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: indexerv1.IndexerService_ServiceDesc.ServiceName})
	if err != nil {
		t.Fatalf("health check: %v", err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health = %v, want SERVING", resp.GetStatus())
	}
	stream, err := grpc_reflection_v1.NewServerReflectionClient(conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&grpc_reflection_v1.ServerReflectionRequest{MessageRequest: &grpc_reflection_v1.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	r, err := stream.Recv()
	if err != nil {
		t.Fatalf("reflection: %v", err)
	}
	var names []string
	for _, s := range r.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	found := false
	for _, n := range names {
		found = found || n == indexerv1.IndexerService_ServiceDesc.ServiceName
	}
	if !found {
		t.Fatalf("reflection lists %v, want %s among them", names, indexerv1.IndexerService_ServiceDesc.ServiceName)
	}
}

// A server starts NOT_SERVING so that nothing routes to it before the
// service says it is ready (the indexer waits for its migrations).
func TestHealthStartsNotServing(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := rpc.NewServer(svcauth.NewAuthenticator(nil), config.TLS{}, log)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Health.Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("initial health = %v, want NOT_SERVING", resp.GetStatus())
	}
}

// SetServing reports every service the server serves SERVING, by name,
// as gRPC client-side health checking asks: a binary serving two services
// (the indexer's IndexerService and ClusterStateService) names neither
// alone.
func TestSetServingNamesEveryService(t *testing.T) {
	srv, err := rpc.NewServer(svcauth.NewAuthenticator(nil), config.TLS{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	indexerv1.RegisterIndexerServiceServer(srv, &testkit.FakeIndexer{})
	indexerv1.RegisterClusterStateServiceServer(srv, indexerv1.UnimplementedClusterStateServiceServer{})
	srv.SetServing()
	for _, name := range []string{"", indexerv1.IndexerService_ServiceDesc.ServiceName, indexerv1.ClusterStateService_ServiceDesc.ServiceName} {
		resp, err := srv.Health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: name})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health of %q = %v, %v; want SERVING", name, resp.GetStatus(), err)
		}
	}
}

// rawCodec sends and receives a message's bytes as they are, so a test
// can send what no protobuf encoder writes.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// TestCallersAreRefusedBeforeTheirMessagesAreRead: a caller without a
// credential, or calling a method its credential does not allow, is
// refused on the call's headers, whatever it sends: gRPC once read and
// decoded a unary request (up to 16 MiB) before the interceptors ran,
// and answered the decoder's error instead.
func TestCallersAreRefusedBeforeTheirMessagesAreRead(t *testing.T) {
	addr := startServer(t, testCreds)
	for _, caller := range []struct {
		token string
		want  codes.Code
	}{{"", codes.Unauthenticated}, {"wrong-secret", codes.Unauthenticated}} {
		conn := dial(t, addr, caller.token)
		for name, body := range map[string][]byte{
			"malformed protobuf": {0x0a, 0x05},
			"invalid UTF-8":      {0x12, 0x01, 0xff},
			"oversized":          append([]byte{0x12, 0x80, 0x80, 0x80, 0x08}, make([]byte, 16<<20)...),
		} {
			var out []byte
			err := conn.Invoke(context.Background(), indexerv1.IndexerService_RefreshScope_FullMethodName, &body, &out,
				grpc.ForceCodec(rawCodec{}), grpc.MaxCallSendMsgSize(64<<20))
			if status.Code(err) != caller.want || apierr.Reason(err) != commonv1.ErrorReason_ERROR_REASON_UNAUTHENTICATED {
				t.Errorf("token %q, %s: %v, want %v", caller.token, name, err, caller.want)
			}
		}
	}
	// Allowed RefreshScope only, the reporting credential may not Search.
	body := []byte{0x0a, 0x05}
	var out []byte
	err := dial(t, addr, "reporting-secret").Invoke(context.Background(), indexerv1.IndexerService_Search_FullMethodName, &body, &out, grpc.ForceCodec(rawCodec{}))
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("a method the credential does not allow, with a malformed message: %v, want PermissionDenied", err)
	}
}

// A request the server cannot decode, from a caller its credential
// admits, is the caller's mistake: INVALID_ARGUMENT with
// ERROR_REASON_INVALID_ARGUMENT, for a unary call and a streamed one,
// not the INTERNAL gRPC answers. A message over the size limit stays
// RESOURCE_EXHAUSTED.
func TestUndecodableRequestIsInvalidArgument(t *testing.T) {
	conn := dial(t, startServer(t, testCreds), "gateway-secret")
	for name, body := range map[string]struct{ unary, stream []byte }{
		"malformed protobuf": {[]byte{0x0a, 0x05}, []byte{0x0a, 0x05}},
		// RefreshScopeRequest.server (2), WatchSessionEventsRequest.replica_id (1)
		"invalid UTF-8":      {[]byte{0x12, 0x01, 0xff}, []byte{0x0a, 0x01, 0xff}},
		"no protobuf at all": {[]byte{0xff, 0xff, 0xff}, []byte{0xff, 0xff, 0xff}},
	} {
		var out []byte
		err := conn.Invoke(context.Background(), indexerv1.IndexerService_RefreshScope_FullMethodName, &body.unary, &out, grpc.ForceCodec(rawCodec{}))
		if status.Code(err) != codes.InvalidArgument || apierr.Reason(err) != commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT {
			t.Errorf("RefreshScope, %s: %v, want INVALID_ARGUMENT with ERROR_REASON_INVALID_ARGUMENT", name, err)
		}
		st, err := conn.NewStream(context.Background(), &grpc.StreamDesc{ServerStreams: true}, indexerv1.IndexerService_WatchSessionEvents_FullMethodName,
			grpc.ForceCodec(rawCodec{}))
		if err == nil {
			err = st.SendMsg(&body.stream)
		}
		if err == nil {
			err = st.RecvMsg(&out)
		}
		if status.Code(err) != codes.InvalidArgument || apierr.Reason(err) != commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT {
			t.Errorf("WatchSessionEvents, %s: %v, want INVALID_ARGUMENT with ERROR_REASON_INVALID_ARGUMENT", name, err)
		}
	}
	oversized := append([]byte{0x12, 0x80, 0x80, 0x80, 0x08}, make([]byte, 16<<20)...)
	var out []byte
	err := conn.Invoke(context.Background(), indexerv1.IndexerService_RefreshScope_FullMethodName, &oversized, &out,
		grpc.ForceCodec(rawCodec{}), grpc.MaxCallSendMsgSize(64<<20))
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("RefreshScope over the size limit: %v, want RESOURCE_EXHAUSTED", err)
	}
}

// A call's headers are bounded before its caller is authenticated.
func TestHeaderListBounded(t *testing.T) {
	client := indexerv1.NewIndexerServiceClient(dial(t, startServer(t, testCreds), "gateway-secret"))
	if _, err := client.RefreshScope(context.Background(), &indexerv1.RefreshScopeRequest{}); err != nil {
		t.Fatalf("a call with ordinary headers: %v", err)
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-padding", strings.Repeat("x", 100<<10))
	if _, err := client.RefreshScope(ctx, &indexerv1.RefreshScopeRequest{}); err == nil {
		t.Fatal("a call with 100 KiB of headers was served")
	}
}
