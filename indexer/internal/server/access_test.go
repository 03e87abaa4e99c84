package server

import (
	"io"
	"log/slog"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	"github.com/switchboard-mcp/switchboard/services/config"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// indexerServices are the services the indexer serves.
var indexerServices = []grpc.ServiceDesc{indexerv1.IndexerService_ServiceDesc, indexerv1.ClusterStateService_ServiceDesc}

// methodNames are the names of every method of desc, unary and streamed.
func methodNames(desc grpc.ServiceDesc) []string {
	var names []string
	for _, m := range desc.Methods {
		names = append(names, m.MethodName)
	}
	for _, s := range desc.Streams {
		names = append(names, s.StreamName)
	}
	return names
}

// Every method the indexer serves declares who may call it, so that a
// new RPC cannot forget it: one without a rule would be refused to every
// caller.
func TestEveryMethodHasAnAccessRule(t *testing.T) {
	for _, desc := range indexerServices {
		for _, name := range methodNames(desc) {
			if methodAccess[name] == 0 {
				t.Errorf("%s/%s has no rule in methodAccess", desc.ServiceName, name)
			}
		}
	}
}

// A credential that may not assert principals, allowed every method, is
// refused every one that reaches other principals' or the cluster's
// state (PERMISSION_DENIED, ERROR_REASON_PRINCIPAL_NOT_ALLOWED) and every
// operator's (ERROR_REASON_OPERATOR_ONLY), under both service names,
// before its handler runs; a service's credential, which asserts
// principals, only the operators'. The server is not ready: a call its
// rule lets through reaches a handler, which answers it otherwise.
func TestMethodAccessRefusesBeforeTheHandler(t *testing.T) {
	all := []string{"switchboard.indexer.v1.IndexerService/*", "switchboard.indexer.v1.ClusterStateService/*"}
	creds := []config.ServiceCredential{
		{Name: "reporting", Token: "reporting-token", Subject: "reporting", Allow: all},
		{Name: "gateway", Token: "gateway-token", AssertPrincipals: true, Allow: all},
		{Name: "operator", Token: "operator-token", AssertPrincipals: true, Operator: true, Allow: all},
	}
	s := New(Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	auth := svcauth.NewAuthenticator(creds)
	srv := grpc.NewServer(append(s.AccessOptions(), grpc.UnaryInterceptor(auth.UnaryInterceptor()), grpc.StreamInterceptor(auth.StreamInterceptor()))...)
	indexerv1.RegisterIndexerServiceServer(srv, s)
	indexerv1.RegisterClusterStateServiceServer(srv, s)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	call := func(token, fullMethod string, stream bool) error {
		ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+token)
		if !stream {
			return conn.Invoke(ctx, fullMethod, &emptypb.Empty{}, &emptypb.Empty{})
		}
		st, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, fullMethod)
		if err == nil {
			err = st.SendMsg(&emptypb.Empty{})
		}
		if err == nil {
			err = st.RecvMsg(&emptypb.Empty{})
		}
		return err
	}
	for _, desc := range indexerServices {
		streams := map[string]bool{}
		for _, sd := range desc.Streams {
			streams[sd.StreamName] = true
		}
		for _, name := range methodNames(desc) {
			fullMethod := "/" + desc.ServiceName + "/" + name
			for _, c := range []struct {
				token  string
				denied commonv1.ErrorReason
			}{
				{"reporting-token", map[access]commonv1.ErrorReason{assertsPrincipals: commonv1.ErrorReason_ERROR_REASON_PRINCIPAL_NOT_ALLOWED,
					operatorOnly: commonv1.ErrorReason_ERROR_REASON_OPERATOR_ONLY}[methodAccess[name]]},
				{"gateway-token", map[access]commonv1.ErrorReason{operatorOnly: commonv1.ErrorReason_ERROR_REASON_OPERATOR_ONLY}[methodAccess[name]]},
				{"operator-token", commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED},
			} {
				err := call(c.token, fullMethod, streams[name])
				switch {
				case c.denied != commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED && (status.Code(err) != codes.PermissionDenied || apierr.Reason(err) != c.denied):
					t.Errorf("%s by %s: %v, want PERMISSION_DENIED with %s", fullMethod, c.token, err, c.denied)
				case c.denied == commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED && status.Code(err) == codes.PermissionDenied:
					t.Errorf("%s by %s: %v, want it past the access check", fullMethod, c.token, err)
				}
			}
		}
	}
}
