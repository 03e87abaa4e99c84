package grpcapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/devstack"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/test/grpcapi/example"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// testCA issues certificates the way the cert-manager component does: one
// CA for every service, its certificate written into dir for the
// services' CAFile (harness.NewCA does the signing).
type testCA struct {
	*harness.CA
	dir    string
	caFile string
}

func newTestCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	ca := &testCA{CA: harness.NewCA(t, name), dir: dir, caFile: filepath.Join(dir, name+".crt")}
	harness.WriteFileAtomic(t, ca.caFile, ca.PEM)
	return ca
}

// issue writes a leaf certificate and key for commonName, for serving
// (valid for 127.0.0.1), calling, or both.
func (ca *testCA) issue(t *testing.T, commonName string, server, client bool) (certFile, keyFile string) {
	t.Helper()
	leaf := ca.Issue(t, harness.LeafSpec{CommonName: commonName, Server: server, Client: client})
	// Named by issuer too: two CAs may issue the same common name.
	return leaf.Write(t, ca.dir, ca.Cert.Subject.CommonName+"-"+commonName)
}

// TestMTLS runs the document's mTLS path: an aggregator serving TLS that
// authenticates an internal client by the common name of its certificate,
// as the cert-manager component of the production overlay configures it.
func TestMTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "switchboard-ca")
	serverCert, serverKey := ca.issue(t, "switchboard-aggregator", true, false)
	clientCert, clientKey := ca.issue(t, "reporting.internal", false, true)
	strangerCert, strangerKey := ca.issue(t, "stranger.internal", false, true)
	otherCA := newTestCA(t, dir, "other-ca")
	forgedCert, forgedKey := otherCA.issue(t, "reporting.internal", false, true)

	backendAddr, aggAddr := harness.FreeAddr(t), harness.FreeAddr(t)
	harness.StartProc(t, "backend:demo", devstack.DemoBackendBin, []string{"--listen", backendAddr, "--name", "demo"}, nil,
		devstack.HTTPOK("http://"+backendAddr+"/healthz"))
	cfg := &config.Config{
		ServiceAuth: config.ServiceAuth{
			Credentials: []config.ServiceCredential{
				{Name: "reporting", CommonName: "reporting.internal", Subject: reportingSubject, Groups: []string{"analysts"}, Role: config.RoleClient},
			},
			TLS: config.TLS{CertFile: serverCert, KeyFile: serverKey, CAFile: ca.caFile, ClientCAFile: ca.caFile},
		},
		Logging: config.Logging{Level: "debug", Format: "text"},
	}
	cfg.Aggregator.Listen = aggAddr
	cfg.Aggregator.Backends = []config.Backend{{Name: "demo", URL: "http://" + backendAddr + "/mcp"}}
	// Health needs no service credential, but with a client CA every
	// connection needs a client certificate.
	harness.StartProc(t, "aggregator", devstack.AggregatorBin, []string{"--config", harness.WriteConfig(t, dir, cfg)}, nil,
		devstack.GRPCServing(aggAddr, config.TLS{CAFile: ca.caFile, CertFile: strangerCert, KeyFile: strangerKey}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	tlsConfig, err := example.MTLSConfig(clientCert, clientKey, ca.caFile)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := example.Dial(aggAddr, "", tlsConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	agg := aggregatorv1.NewAggregatorServiceClient(conn)
	tools, err := example.ListAllTools(ctx, agg)
	if err != nil {
		t.Fatalf("ListAllTools with a client certificate: %v", err)
	}
	if !slices.ContainsFunc(tools, func(tool *aggregatorv1.Tool) bool { return tool.GetName() == "demo_echo" }) {
		t.Errorf("ListAllTools with a client certificate: demo_echo missing from %v", tools)
	}
	_, err = agg.ListTools(ctx, &aggregatorv1.ListToolsRequest{Principal: &commonv1.Principal{Subject: "alice"}})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("certificate-bound caller naming another principal: %v, want PermissionDenied", err)
	}

	refused := []struct {
		name string
		tls  func() *tls.Config
		want []codes.Code
	}{
		// With a client CA the server requires a certificate: the
		// handshake fails.
		{"TLS without a client certificate or token", func() *tls.Config {
			roots := x509.NewCertPool()
			roots.AddCert(ca.Cert)
			return &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		}, []codes.Code{codes.Unavailable}},
		{"certificate of an unknown common name", func() *tls.Config {
			c, err := example.MTLSConfig(strangerCert, strangerKey, ca.caFile)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}, []codes.Code{codes.Unauthenticated}},
		// Go's TLS client withholds a certificate that the server's
		// acceptable CAs did not issue, and a client that sends it anyway
		// fails verification: either way the handshake fails.
		{"certificate from another CA", func() *tls.Config {
			c, err := example.MTLSConfig(forgedCert, forgedKey, ca.caFile)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}, []codes.Code{codes.Unavailable}},
		{"plaintext", func() *tls.Config { return nil }, []codes.Code{codes.Unavailable}},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := example.Dial(aggAddr, "", tc.tls())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			_, err = aggregatorv1.NewAggregatorServiceClient(conn).ListTools(callCtx, &aggregatorv1.ListToolsRequest{})
			if !slices.Contains(tc.want, status.Code(err)) {
				t.Errorf("ListTools: %v, want one of %v", err, tc.want)
			}
		})
	}
}

// TestMTLSWholeStack runs the production overlay's topology on one machine:
// every service serves gRPC over TLS and authenticates the others by
// certificate alone (no tokens): the gateway and the indexer reach the
// aggregator, and the gateway the indexer. In Kubernetes each pod mounts
// its own certificate at the same path; here one certificate with both
// usages stands in for all of them.
func TestMTLSWholeStack(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "switchboard-ca")
	cert, key := ca.issue(t, "switchboard-service", true, true)
	tlsFiles := config.TLS{CertFile: cert, KeyFile: key, CAFile: ca.caFile, ClientCAFile: ca.caFile}
	c := harness.Start(t, harness.Options{
		Backends: []harness.Backend{{Name: "demo"}},
		Configure: func(cfg *config.Config) {
			cfg.ServiceAuth.TLS = tlsFiles
			cfg.ServiceAuth.Credentials = []config.ServiceCredential{
				{Name: "switchboard-service", CommonName: "switchboard-service", AssertPrincipals: true, Allow: harness.AllMethods},
			}
			cfg.Gateway.Aggregator.Token = ""
			cfg.Gateway.Indexer.Token = ""
			cfg.Indexer.Aggregator.Token = ""
		},
	})

	// The gateway reached the aggregator over mTLS: an MCP client sees the
	// backend's tools.
	names := harness.ToolNames(t, harness.Connect(t, c.MCPURL, harness.Modern))
	if !slices.Contains(names, "demo_echo") {
		t.Errorf("tools through the gateway: demo_echo missing from %v", names)
	}

	// The indexer reached the aggregator over mTLS to build the scope of
	// the principal it searches for.
	tlsConfig, err := example.MTLSConfig(cert, key, ca.caFile)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := example.Dial(c.Config.Indexer.Listen, "", tlsConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp, err := indexerv1.NewIndexerServiceClient(conn).Search(ctx, &indexerv1.SearchRequest{
		Principal: &commonv1.Principal{Subject: "alice"}, Query: "add two numbers", Limit: 3,
	})
	if err != nil {
		t.Fatalf("Search over mTLS: %v", err)
	}
	if len(resp.GetHits()) == 0 || resp.GetHits()[0].GetName() != "demo_add" {
		t.Errorf("Search over mTLS = %v, want demo_add first", resp.GetHits())
	}
	// A caller its certificate names is no operator: it may not ask for
	// an explained search.
	_, err = indexerv1.NewIndexerServiceClient(conn).Search(ctx, &indexerv1.SearchRequest{
		Principal: &commonv1.Principal{Subject: "alice"}, Query: "add two numbers", Explain: true,
	})
	if status.Code(err) != codes.PermissionDenied || example.Reason(err) != "ERROR_REASON_OPERATOR_ONLY" {
		t.Errorf("explained Search over mTLS by a caller that is not an operator: %v, want PermissionDenied with ERROR_REASON_OPERATOR_ONLY", err)
	}
}
