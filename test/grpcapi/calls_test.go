package grpcapi

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// dialRaw connects without the document's client (example.Dial), with
// receive and send limits well past any the services set, so that a test
// sees what a server answers rather than its own client's limits.
func dialRaw(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20), grpc.MaxCallSendMsgSize(256<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// withToken sends token as the call's service credential.
func withToken(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// describe is a status as a test reports it: code, ErrorInfo reason and
// message.
func describe(err error) string {
	if err == nil {
		return "OK"
	}
	st, _ := status.FromError(err)
	reason := ""
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			reason = info.GetReason()
		}
	}
	return fmt.Sprintf("%s [%s] %q", st.Code(), reason, st.Message())
}

// addReportingClient adds the internal client's credential the document
// describes (reportingToken, acting as reportingSubject of analysts).
func addReportingClient(cfg *config.Config) {
	cfg.ServiceAuth.Credentials = append(cfg.ServiceAuth.Credentials, config.ServiceCredential{
		Name: "reporting", Token: reportingToken, Subject: reportingSubject, Groups: []string{"analysts"}, Role: config.RoleClient,
	})
}
