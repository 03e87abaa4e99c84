package svcauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/url"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/config"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// overMTLS returns ctx as a call arriving on a connection whose client
// presented a certificate (verified) carrying uri as its URI SAN, with
// token as its bearer token unless empty.
func overMTLS(uri, token string) context.Context {
	u, _ := url.Parse(uri)
	cert := &x509.Certificate{URIs: []*url.URL{u}}
	ctx := peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{
		State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}},
	}})
	if token != "" {
		ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", "Bearer "+token))
	}
	return ctx
}

// bindingCredentials are the credentials of a deployment under mTLS: each
// service's certificate and token name the same credential, and the
// console, running in the gateway's pods, presents its token with the
// gateway's certificate.
func bindingCredentials() []config.ServiceCredential {
	return []config.ServiceCredential{
		{Name: "gateway", Token: "gateway-token", URISAN: "spiffe://x/gateway", AssertPrincipals: true, Allow: config.GatewayMethods},
		{Name: "indexer", Token: "indexer-token", URISAN: "spiffe://x/indexer", AssertPrincipals: true, Allow: config.IndexerMethods},
		{Name: "console", Token: "console-token", HostedBy: "gateway", Operator: true, AssertPrincipals: true, Allow: config.ConsoleMethods},
		{Name: "reporting", URISAN: "spiffe://x/reporting", Subject: "reporting", Allow: config.IndexerMethods},
	}
}

// A call that presents a verified client certificate and a token is
// admitted only when both name the same credential (or the token's
// credential is hosted by the certificate's, the console in the gateway's
// pods): a pod that learnt another service's token cannot use it with its
// own certificate.
func TestTokenAndCertificateMustNameOneCredential(t *testing.T) {
	a := NewAuthenticator(bindingCredentials())
	for _, tc := range []struct {
		name, uri, token string
		want             string // "" refused
	}{
		{"gateway certificate and token", "spiffe://x/gateway", "gateway-token", "gateway"},
		{"indexer certificate and token", "spiffe://x/indexer", "indexer-token", "indexer"},
		{"certificate alone", "spiffe://x/indexer", "", "indexer"},
		{"console token with the gateway's certificate", "spiffe://x/gateway", "console-token", "console"},
		// The finding: the indexer's pod presents the gateway's token.
		{"gateway token with the indexer's certificate", "spiffe://x/indexer", "gateway-token", ""},
		{"console token with the indexer's certificate", "spiffe://x/indexer", "console-token", ""},
		{"gateway token with a certificate bound to a principal", "spiffe://x/reporting", "gateway-token", ""},
		{"indexer token with the gateway's certificate", "spiffe://x/gateway", "indexer-token", ""},
		// A certificate that names no credential does not make a token
		// good, and a wrong token does not fall back on the certificate.
		{"gateway token with a certificate that names nothing", "spiffe://x/stranger", "gateway-token", ""},
		{"unknown token with the gateway's certificate", "spiffe://x/gateway", "not-a-token", ""},
	} {
		c, ok := a.Authenticate(overMTLS(tc.uri, tc.token))
		got := ""
		if ok {
			got = c.Name
		}
		if got != tc.want {
			t.Errorf("%s: authenticated as %q, want %q", tc.name, got, tc.want)
		}
	}
}

// The interceptor refuses a mismatched pair with the error of a bad token:
// the caller does not learn which half failed.
func TestMismatchedTokenAndCertificateIsUnauthenticated(t *testing.T) {
	a := NewAuthenticator(bindingCredentials())
	const method = "/switchboard.aggregator.v1.AggregatorService/CallTool"
	handler := func(context.Context, any) (any, error) { return "called", nil }
	info := &grpc.UnaryServerInfo{FullMethod: method}
	req := &struct{ commonv1.Principal }{}

	_, mismatched := a.UnaryInterceptor()(overMTLS("spiffe://x/indexer", "gateway-token"), req, info, handler)
	_, badToken := a.UnaryInterceptor()(metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer nope")), req, info, handler)
	if status.Code(mismatched) != codes.Unauthenticated {
		t.Fatalf("gateway token with the indexer's certificate: %v, want UNAUTHENTICATED", mismatched)
	}
	if mismatched.Error() != badToken.Error() {
		t.Errorf("a mismatched token and certificate are refused with %q, a bad token with %q: the error must not tell them apart", mismatched, badToken)
	}
	if out, err := a.UnaryInterceptor()(overMTLS("spiffe://x/gateway", "gateway-token"), req, info, handler); err != nil || out != "called" {
		t.Errorf("gateway token with the gateway's certificate: %v %v", out, err)
	}

	stream := func(any, grpc.ServerStream) error { return nil }
	err := a.StreamInterceptor()(nil, fakeStream{ctx: overMTLS("spiffe://x/indexer", "gateway-token")},
		&grpc.StreamServerInfo{FullMethod: "/switchboard.aggregator.v1.AggregatorService/CallToolStream"}, stream)
	if err == nil || err.Error() != badToken.Error() {
		t.Errorf("stream with the gateway token and the indexer's certificate: %v, want %v", err, badToken)
	}
}

type fakeStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s fakeStream) Context() context.Context { return s.ctx }
