package svcauth

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/url"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

// The built-in allow lists name methods that exist, and the indexer's
// reads views only.
func TestBuiltInAllowLists(t *testing.T) {
	exists := map[string]bool{}
	for _, sd := range []grpc.ServiceDesc{aggregatorv1.AggregatorService_ServiceDesc, indexerv1.IndexerService_ServiceDesc, indexerv1.ClusterStateService_ServiceDesc} {
		for _, m := range methodsOf(sd) {
			exists[sd.ServiceName+"/"+m] = true
		}
	}
	for _, list := range [][]string{config.GatewayMethods, config.IndexerMethods, config.AggregatorMethods} {
		for _, m := range list {
			if !exists[m] {
				t.Errorf("%s is not a method of the services", m)
			}
		}
	}
	indexer := config.NewMethodSet(config.IndexerMethods)
	for _, m := range []string{aggregatorv1.AggregatorService_CallTool_FullMethodName, aggregatorv1.AggregatorService_CallToolStream_FullMethodName,
		aggregatorv1.AggregatorService_ReadResource_FullMethodName, aggregatorv1.AggregatorService_ListBackends_FullMethodName} {
		if indexer.Permits(m) {
			t.Errorf("the indexer's credential allows %s", m)
		}
	}
	// The aggregator records tool definitions; approving one is an
	// operator's.
	aggregator := config.NewMethodSet(config.AggregatorMethods)
	for _, m := range []string{indexerv1.IndexerService_ApproveToolDefinition_FullMethodName, indexerv1.IndexerService_ListToolDefinitions_FullMethodName,
		indexerv1.IndexerService_Search_FullMethodName, aggregatorv1.AggregatorService_CallTool_FullMethodName} {
		if aggregator.Permits(m) {
			t.Errorf("the aggregator's credential allows %s", m)
		}
	}
	if config.NewMethodSet(config.GatewayMethods).Permits(aggregatorv1.AggregatorService_ListBackends_FullMethodName) {
		t.Error("the gateway's credential allows ListBackends, which it never calls")
	}
}

func methodsOf(sd grpc.ServiceDesc) []string {
	var out []string
	for _, m := range sd.Methods {
		out = append(out, m.MethodName)
	}
	for _, m := range sd.Streams {
		out = append(out, m.StreamName)
	}
	return out
}

// A certificate names the credential of its URI SAN before its DNS SAN
// before its common name (which counts only when it has no alternative
// names), and none when one kind names two credentials.
func TestCallerForCert(t *testing.T) {
	a := NewAuthenticator([]config.ServiceCredential{
		{Name: "by-uri", URISAN: "spiffe://x/a", Allow: config.IndexerMethods},
		{Name: "by-uri-2", URISAN: "spiffe://x/b", Allow: config.IndexerMethods},
		{Name: "by-dns", DNSSAN: "a.x", Allow: config.IndexerMethods},
		{Name: "by-cn", CommonName: "a", Allow: config.IndexerMethods},
	})
	cert := func(cn string, dns []string, uris ...string) *x509.Certificate {
		c := &x509.Certificate{DNSNames: dns}
		c.Subject.CommonName = cn
		for _, u := range uris {
			parsed, _ := url.Parse(u)
			c.URIs = append(c.URIs, parsed)
		}
		return c
	}
	for _, tc := range []struct {
		cert *x509.Certificate
		want string
	}{
		{cert("a", []string{"a.x"}, "spiffe://x/a"), "by-uri"},
		{cert("a", []string{"a.x"}, "spiffe://x/unknown"), "by-dns"},
		// A certificate with alternative names is identified by them
		// only: its common name cannot make it another service.
		{cert("a", []string{"b.x"}), ""},
		{cert("a", nil, "spiffe://x/other"), ""},
		{cert("a", nil), "by-cn"},
		{cert("nobody", nil), ""},
		{cert("a", nil, "spiffe://x/a", "spiffe://x/b"), ""}, // ambiguous
		{cert("", nil), ""},
	} {
		c, ok := a.table.Load().callerForCert(tc.cert)
		if got := map[bool]string{true: c.Name}[ok]; got != tc.want {
			t.Errorf("certificate CN %q DNS %v URIs %v: %q, want %q", tc.cert.Subject.CommonName, tc.cert.DNSNames, tc.cert.URIs, got, tc.want)
		}
	}
}

// A caller carries how it authenticated (a token, or the certificate name
// that named its credential, never the token) and the service whose audit
// events its credential may write.
func TestCallerIdentityAndAuditService(t *testing.T) {
	a := NewAuthenticator([]config.ServiceCredential{
		{Name: "gateway", Token: "gateway-token", URISAN: "spiffe://x/gateway", Allow: config.GatewayMethods},
		{Name: "gateway-next", DNSSAN: "gw.x", AuditService: "gateway", Allow: config.GatewayMethods},
		{Name: "console", CommonName: "console", Allow: config.IndexerMethods},
	})
	tbl := a.table.Load()
	byToken, ok := tbl.authenticate(metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer gateway-token")))
	if !ok || byToken.Name != "gateway" || byToken.Identity != identityToken || byToken.AuditService != "gateway" {
		t.Errorf("by token: %+v %v", byToken, ok)
	}
	for _, tc := range []struct {
		cert                     *x509.Certificate
		name, identity, auditFor string
	}{
		{&x509.Certificate{URIs: []*url.URL{{Scheme: "spiffe", Host: "x", Path: "/gateway"}}}, "gateway", "uriSAN spiffe://x/gateway", "gateway"},
		{&x509.Certificate{DNSNames: []string{"other.x", "gw.x"}}, "gateway-next", "dnsSAN gw.x", "gateway"},
		{&x509.Certificate{Subject: pkix.Name{CommonName: "console"}}, "console", "commonName console", ""},
	} {
		c, ok := tbl.callerForCert(tc.cert)
		if !ok || c.Name != tc.name || c.Identity != tc.identity || c.AuditService != tc.auditFor {
			t.Errorf("certificate %v %v %q: %+v %v, want %s as %q bound to %q", tc.cert.URIs, tc.cert.DNSNames, tc.cert.Subject.CommonName, c, ok,
				tc.name, tc.identity, tc.auditFor)
		}
	}
}
