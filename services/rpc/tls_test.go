package rpc_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/config"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newCA(t *testing.T) *testCA {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert, key}
}

func (ca *testCA) pem() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})
}

// leaf issues a certificate: a server one for 127.0.0.1, or a client one
// with the given URI SAN.
func (ca *testCA) leaf(t *testing.T, serial int64, server bool, uri string) (certPEM, keyPEM []byte) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "leaf"},
		KeyUsage: x509.KeyUsageDigitalSignature, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour)}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		u, _ := url.Parse(uri)
		tmpl.URIs = []*url.URL{u}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

func write(t *testing.T, path string, data []byte) {
	if err := os.WriteFile(path+".tmp", data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// TestMTLSRequiresAndReloads: with a client CA, a connection without a
// client certificate is refused; a certificate's URI SAN names the
// credential; a server certificate rewritten on disk is what new
// connections get.
func TestMTLSRequiresAndReloads(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t)
	files := config.TLS{CertFile: filepath.Join(dir, "s.crt"), KeyFile: filepath.Join(dir, "s.key"), CAFile: filepath.Join(dir, "ca.pem"), ClientCAFile: filepath.Join(dir, "ca.pem")}
	write(t, files.CAFile, ca.pem())
	c, k := ca.leaf(t, 100, true, "")
	write(t, files.KeyFile, k)
	write(t, files.CertFile, c)

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	creds := []config.ServiceCredential{{Name: "svc", URISAN: "spiffe://test/svc", Subject: "svc", Allow: []string{"switchboard.indexer.v1.IndexerService/RefreshScope"}}}
	srv, err := rpc.NewServer(svcauth.NewAuthenticator(creds), files, log)
	if err != nil {
		t.Fatal(err)
	}
	indexerv1.RegisterIndexerServiceServer(srv, &testkit.FakeIndexer{RefreshScopeFunc: principalEcho})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = srv.ServeListener(ctx, lis, 0) }()
	addr := lis.Addr().String()

	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	call := func(tc *tls.Config) (string, error) {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		resp, err := indexerv1.NewIndexerServiceClient(conn).RefreshScope(cctx, &indexerv1.RefreshScopeRequest{})
		return resp.GetToolsDigest(), err
	}
	if _, err := call(&tls.Config{RootCAs: roots}); status.Code(err) != codes.Unavailable {
		t.Errorf("without a client certificate: %v, want the connection refused", err)
	}
	cc, ck := ca.leaf(t, 200, false, "spiffe://test/svc")
	pair, err := tls.X509KeyPair(cc, ck)
	if err != nil {
		t.Fatal(err)
	}
	client := &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}}
	if who, err := call(client); err != nil || who != "svc" {
		t.Errorf("with the URI SAN certificate: acts as %q, %v; want svc", who, err)
	}

	c, k = ca.leaf(t, 101, true, "")
	write(t, files.KeyFile, k)
	write(t, files.CertFile, c)
	raw := client.Clone()
	raw.NextProtos = []string{"h2"}
	testkit.Eventually(t, "new connections to get the rewritten certificate", 20*time.Second, func() error {
		conn, err := tls.Dial("tcp", addr, raw)
		if err != nil {
			t.Fatal(err)
		}
		serial := conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
		conn.Close()
		if serial != 101 {
			return fmt.Errorf("they still get certificate %d", serial)
		}
		return nil
	})
}
