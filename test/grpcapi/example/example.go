// Package example is the Go client of docs/grpc-api.md: an internal service
// calling the Switchboard aggregator and indexer with its own credentials.
// The document quotes this file, and test/grpcapi runs it against real
// processes.
package example

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

// bearerToken sends the service token of a serviceAuth credential with
// every call.
type bearerToken struct {
	token      string
	requireTLS bool
}

func (b bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

func (b bearerToken) RequireTransportSecurity() bool { return b.requireTLS }

// maxReceiveBytes is the largest answer the client takes, as
// Switchboard's own services take from each other: the aggregator cuts a
// catalog page (ListTools, ...) at 16 MiB of items, and one item alone may
// be larger, well past gRPC's default of 4 MiB.
const maxReceiveBytes = 64 << 20

// Dial connects to an aggregator or indexer. token is the caller's service
// token; it may be empty when tlsConfig carries a client certificate that
// authenticates the caller instead. A nil tlsConfig means plaintext, which
// is only for a local `make run`: over plaintext the token would travel in
// the clear.
func Dial(address, token string, tlsConfig *tls.Config) (*grpc.ClientConn, error) {
	transport := insecure.NewCredentials()
	if tlsConfig != nil {
		transport = credentials.NewTLS(tlsConfig)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(transport),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxReceiveBytes))}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearerToken{token: token, requireTLS: tlsConfig != nil}))
	}
	return grpc.NewClient(address, opts...)
}

// MTLSConfig loads a client certificate that names a serviceAuth
// credential (by its URI or DNS subject alternative name, or its common
// name), and the CA that signed the services' certificates.
func MTLSConfig(certFile, keyFile, caFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no certificates in %s", caFile)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots, MinVersion: tls.VersionTLS12}, nil
}

// ListAllTools returns every tool the caller may call, following the
// cursor to the last page. The request names no principal: the services
// use the identity bound to the caller's credential.
func ListAllTools(ctx context.Context, agg aggregatorv1.AggregatorServiceClient) ([]*aggregatorv1.Tool, error) {
	var tools []*aggregatorv1.Tool
	cursor := ""
	for {
		page, err := agg.ListTools(ctx, &aggregatorv1.ListToolsRequest{Cursor: cursor})
		if err != nil {
			return nil, err
		}
		tools = append(tools, page.GetTools()...)
		if page.GetNextCursor() == "" {
			return tools, nil
		}
		cursor = page.GetNextCursor()
	}
}

// CallTool calls a tool by its advertised name with a JSON object of
// arguments. A tool that fails is a result with IsError set, not an error.
func CallTool(ctx context.Context, agg aggregatorv1.AggregatorServiceClient, name, argumentsJSON string) (*aggregatorv1.CallToolResponse, error) {
	return agg.CallTool(ctx, &aggregatorv1.CallToolRequest{Name: name, ArgumentsJson: argumentsJSON})
}

// SearchTools asks the indexer which of the caller's tools fit a task.
func SearchTools(ctx context.Context, idx indexerv1.IndexerServiceClient, query string, limit uint32) ([]*indexerv1.SearchHit, error) {
	resp, err := idx.Search(ctx, &indexerv1.SearchRequest{Query: query, Limit: limit})
	if err != nil {
		return nil, err
	}
	return resp.GetHits(), nil
}

// Reason returns the machine-readable reason of a Switchboard error
// ("ERROR_REASON_NOT_FOUND", ...), or "" for other errors. Branch on it,
// never on the message.
func Reason(err error) string {
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) {
		return ""
	}
	for _, d := range se.GRPCStatus().Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == "switchboard.dev" {
			return info.GetReason()
		}
	}
	return ""
}
