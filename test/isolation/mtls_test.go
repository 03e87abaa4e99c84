package isolation

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/devstack"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/grpcapi/example"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

const (
	reportingURI       = "spiffe://switchboard.test/reporting"
	auditorDNS         = "auditor.switchboard.test"
	tokenOnlyCred      = "token-only-client-secret"
	reportingCertToken = "reporting-client-secret"
)

// mtlsClient is a TLS client configuration trusting roots and presenting
// leaf (if any).
func mtlsClient(t *testing.T, roots *harness.CA, leaf *harness.Leaf) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(roots.Cert)
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if leaf != nil {
		pair, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

// listToolsOver opens a new connection with cfg (and token, if not empty)
// and lists tools on it.
func listToolsOver(t *testing.T, addr string, cfg *tls.Config, token string) error {
	t.Helper()
	conn, err := example.Dial(addr, token, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = aggregatorv1.NewAggregatorServiceClient(conn).ListTools(callCtx(t), &aggregatorv1.ListToolsRequest{})
	return err
}

// TestMTLSClientCertificates: with a client CA configured, a connection
// without a client certificate is refused whatever token it carries; a
// certificate authenticates the credential its URI or DNS subject
// alternative name names (not only its common name); and rewritten
// certificate and CA files are used by new connections without a restart.
func TestMTLSClientCertificates(t *testing.T) {
	dir := t.TempDir()
	caOne, caTwo := harness.NewCA(t, "ca-one"), harness.NewCA(t, "ca-two")
	serverCA, clientCA := filepath.Join(dir, "server-ca.pem"), filepath.Join(dir, "client-ca.pem")
	harness.WriteFileAtomic(t, serverCA, caOne.PEM)
	harness.WriteFileAtomic(t, clientCA, caOne.PEM)
	serverSpec := harness.LeafSpec{CommonName: "switchboard-aggregator", Server: true, Client: true}
	serverCert, serverKey := caOne.Issue(t, serverSpec).Write(t, dir, "aggregator")
	reporting := caOne.Issue(t, harness.LeafSpec{CommonName: "not-a-credential", URIs: []string{reportingURI}, Client: true})
	auditor := caOne.Issue(t, harness.LeafSpec{DNSNames: []string{auditorDNS}, Client: true})
	reportingByCATwo := caTwo.Issue(t, harness.LeafSpec{URIs: []string{reportingURI}, Client: true})

	backendAddr, aggAddr := harness.FreeAddr(t), harness.FreeAddr(t)
	harness.StartProc(t, "backend:demo", devstack.DemoBackendBin, []string{"--listen", backendAddr, "--name", "demo"}, nil,
		devstack.HTTPOK("http://"+backendAddr+"/healthz"))
	listTools := "switchboard.aggregator.v1.AggregatorService/ListTools"
	tlsFiles := config.TLS{CertFile: serverCert, KeyFile: serverKey, CAFile: serverCA, ClientCAFile: clientCA}
	cfg := &config.Config{
		ServiceAuth: config.ServiceAuth{
			Credentials: []config.ServiceCredential{
				// The server holds the reporting token's SHA-256 only.
				{Name: "reporting", URISAN: reportingURI, TokenSHA256: sha256Hex(reportingCertToken), Subject: "reporting", Allow: []string{listTools}},
				{Name: "auditor", DNSSAN: auditorDNS, Subject: "auditor", Allow: []string{"switchboard.aggregator.v1.AggregatorService/ListBackends"}},
				{Name: "token-only", Token: tokenOnlyCred, Subject: "token-only", Allow: []string{listTools}},
			},
			TLS: tlsFiles,
		},
		Logging: config.Logging{Level: "debug", Format: "text"},
	}
	cfg.Aggregator.Listen = aggAddr
	cfg.Aggregator.Backends = []config.Backend{{Name: "demo", URL: "http://" + backendAddr + "/mcp"}}
	// The readiness probe presents the aggregator's own certificate: with
	// a client CA, every connection needs one, health checks included.
	harness.StartProc(t, "aggregator", devstack.AggregatorBin, []string{"--config", harness.WriteConfig(t, dir, cfg)}, nil,
		devstack.GRPCServing(aggAddr, tlsFiles))

	t.Run("no client certificate: refused, token or not", func(t *testing.T) {
		err := listToolsOver(t, aggAddr, mtlsClient(t, caOne, nil), tokenOnlyCred)
		if status.Code(err) != codes.Unavailable {
			t.Errorf("ListTools over TLS without a client certificate, with a valid token: %v, want the connection refused (UNAVAILABLE)", err)
		}
	})

	t.Run("identity from the URI SAN", func(t *testing.T) {
		conn, err := example.Dial(aggAddr, "", mtlsClient(t, caOne, &reporting))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		agg := aggregatorv1.NewAggregatorServiceClient(conn)
		if _, err := agg.ListTools(callCtx(t), &aggregatorv1.ListToolsRequest{}); err != nil {
			t.Errorf("ListTools with the URI SAN certificate: %v", err)
		}
		_, err = agg.ListTools(callCtx(t), &aggregatorv1.ListToolsRequest{Principal: &commonv1.Principal{Subject: "alice"}})
		if apierr.Reason(err) != commonv1.ErrorReason_ERROR_REASON_PRINCIPAL_NOT_ALLOWED {
			t.Errorf("naming another principal: %v, want PRINCIPAL_NOT_ALLOWED (bound to reporting)", err)
		}
		_, err = agg.ListBackends(callCtx(t), &aggregatorv1.ListBackendsRequest{})
		wantMethodDenied(t, "reporting's ListBackends", err)
	})

	t.Run("identity from the DNS SAN", func(t *testing.T) {
		conn, err := example.Dial(aggAddr, "", mtlsClient(t, caOne, &auditor))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		agg := aggregatorv1.NewAggregatorServiceClient(conn)
		if _, err := agg.ListBackends(callCtx(t), &aggregatorv1.ListBackendsRequest{}); err != nil {
			t.Errorf("ListBackends with the DNS SAN certificate: %v", err)
		}
		_, err = agg.ListTools(callCtx(t), &aggregatorv1.ListToolsRequest{})
		wantMethodDenied(t, "auditor's ListTools", err)
	})

	// A token and a certificate sent together must name one credential:
	// a client that learnt another credential's token cannot use it with
	// its own certificate, and is told no more than for a bad token.
	t.Run("token and certificate of one credential", func(t *testing.T) {
		if err := listToolsOver(t, aggAddr, mtlsClient(t, caOne, &reporting), reportingCertToken); err != nil {
			t.Errorf("ListTools with reporting's certificate and token (verified by its SHA-256): %v", err)
		}
	})
	t.Run("token of another credential than the certificate's: refused", func(t *testing.T) {
		mismatched := listToolsOver(t, aggAddr, mtlsClient(t, caOne, &reporting), tokenOnlyCred)
		badToken := listToolsOver(t, aggAddr, mtlsClient(t, caOne, &reporting), "not-a-token")
		if status.Code(mismatched) != codes.Unauthenticated {
			t.Fatalf("ListTools with reporting's certificate and token-only's token: %v, want UNAUTHENTICATED", mismatched)
		}
		if status.Convert(mismatched).Message() != status.Convert(badToken).Message() || apierr.Reason(mismatched) != apierr.Reason(badToken) {
			t.Errorf("refused with %v, a bad token with %v: the caller must not learn which half failed", mismatched, badToken)
		}
		if err := listToolsOver(t, aggAddr, mtlsClient(t, caOne, &auditor), reportingCertToken); status.Code(err) != codes.Unauthenticated {
			t.Errorf("ListTools with auditor's certificate and reporting's token: %v, want UNAUTHENTICATED", err)
		}
	})

	t.Run("a rewritten server certificate serves new connections", func(t *testing.T) {
		rotated := caOne.Issue(t, serverSpec)
		rotated.Write(t, dir, "aggregator")
		client := mtlsClient(t, caOne, &reporting)
		client.NextProtos = []string{"h2"}
		testkit.Eventually(t, "the rotated server certificate presented", svcDeadline, func() error {
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", aggAddr, client)
			if err != nil {
				return err
			}
			defer conn.Close()
			if got := conn.ConnectionState().PeerCertificates[0].SerialNumber; got.Cmp(rotated.Cert.SerialNumber) != 0 {
				return fmt.Errorf("server certificate serial %s, want the rotated %s", got, rotated.Cert.SerialNumber)
			}
			return nil
		})
	})

	t.Run("a rewritten client CA file verifies new connections", func(t *testing.T) {
		if err := listToolsOver(t, aggAddr, mtlsClient(t, caOne, &reportingByCATwo), ""); err == nil {
			t.Fatal("a certificate of a CA not (yet) trusted was accepted")
		}
		harness.WriteFileAtomic(t, clientCA, caTwo.PEM)
		testkit.Eventually(t, "a certificate of the new client CA accepted", svcDeadline, func() error {
			return listToolsOver(t, aggAddr, mtlsClient(t, caOne, &reportingByCATwo), "")
		})
		if err := listToolsOver(t, aggAddr, mtlsClient(t, caOne, &reporting), ""); status.Code(err) != codes.Unavailable {
			t.Errorf("a certificate of the CA no longer in the file: %v, want the connection refused", err)
		}
	})
}

func sha256Hex(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}
