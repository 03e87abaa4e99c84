package rpc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// TLS between the services. Certificates are short-lived and rotated by a
// certificate manager that rewrites the files in place (cert-manager in
// Kubernetes), and a CA bundle changes when a CA is rolled, so the files
// of serviceAuth.tls are not read once: every new connection, server side
// and client side, is made with the material the files hold now. They are
// looked at (stat: modification time, size, identity) at most once per
// reloadCheckEvery, on a handshake, and read again when one changed. A
// read that fails (a certificate rewritten before its key) keeps the
// material in use and is tried again at the next look. Connections already
// open keep the material they were made with.
//
// With a client CA (clientCAFile), a server requires and verifies a client
// certificate on every connection (tls.RequireAndVerifyClientCert): a
// caller without one does not get a connection, whatever token it would
// present. Health checks and reflection need no service credential, but
// over mTLS they too need a certificate from the client CA.

// reloadCheckEvery bounds how often the files are looked at.
const reloadCheckEvery = time.Second

// tlsFiles is the material of one config.TLS, re-read as its files change.
type tlsFiles struct {
	cfg config.TLS
	log *slog.Logger

	mu      sync.Mutex
	checked time.Time
	stamps  map[string]os.FileInfo // of the files current was read from
	current *tlsMaterial
	lastErr string
}

// tlsMaterial is what one reading of the files gave.
type tlsMaterial struct {
	cert      *tls.Certificate // nil without certFile
	roots     *x509.CertPool   // caFile: verifies servers; nil: the system's
	clientCAs *x509.CertPool   // clientCAFile: verifies clients; nil: no mTLS
	// server is the server side's configuration built from the above.
	server *tls.Config
}

// loadTLSFiles reads the files of c; an error here fails the start.
func loadTLSFiles(c config.TLS, log *slog.Logger) (*tlsFiles, error) {
	if log == nil {
		log = slog.Default()
	}
	f := &tlsFiles{cfg: c, log: log}
	stamps, err := f.stat()
	if err != nil {
		return nil, err
	}
	m, err := f.read()
	if err != nil {
		return nil, err
	}
	f.current, f.stamps, f.checked = m, stamps, time.Now()
	return f, nil
}

// paths are the configured files.
func (f *tlsFiles) paths() []string {
	var out []string
	for _, p := range []string{f.cfg.CertFile, f.cfg.KeyFile, f.cfg.CAFile, f.cfg.ClientCAFile} {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (f *tlsFiles) stat() (map[string]os.FileInfo, error) {
	stamps := map[string]os.FileInfo{}
	for _, p := range f.paths() {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("TLS file: %w", err)
		}
		stamps[p] = fi
	}
	return stamps, nil
}

func (f *tlsFiles) read() (*tlsMaterial, error) {
	m := &tlsMaterial{}
	if f.cfg.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(f.cfg.CertFile, f.cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("load certificate: %w", err)
		}
		m.cert = &cert
	}
	var err error
	if f.cfg.CAFile != "" {
		if m.roots, err = loadPool(f.cfg.CAFile); err != nil {
			return nil, err
		}
	}
	if f.cfg.ClientCAFile != "" {
		if m.clientCAs, err = loadPool(f.cfg.ClientCAFile); err != nil {
			return nil, err
		}
	}
	if m.cert != nil {
		m.server = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*m.cert}, NextProtos: []string{"h2"}}
		if m.clientCAs != nil {
			m.server.ClientCAs = m.clientCAs
			m.server.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	return m, nil
}

// material returns what the files hold now, reading them again if one
// changed since they were last read.
func (f *tlsFiles) material() *tlsMaterial {
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.checked) < reloadCheckEvery {
		return f.current
	}
	f.checked = time.Now()
	stamps, err := f.stat()
	if err == nil && unchanged(stamps, f.stamps) {
		return f.current
	}
	var m *tlsMaterial
	if err == nil {
		m, err = f.read()
	}
	if err != nil {
		if err.Error() != f.lastErr {
			f.log.Warn("TLS files changed but could not be read; new connections keep the previous certificates", "err", err)
		}
		f.lastErr = err.Error()
		return f.current
	}
	f.current, f.stamps, f.lastErr = m, stamps, ""
	f.log.Info("TLS files re-read; new connections use them")
	return m
}

func unchanged(now, before map[string]os.FileInfo) bool {
	for p, fi := range now {
		old, ok := before[p]
		if !ok || !os.SameFile(fi, old) || !fi.ModTime().Equal(old.ModTime()) || fi.Size() != old.Size() {
			return false
		}
	}
	return true
}

// serverCredentials serves TLS with the current material of each
// handshake.
func (f *tlsFiles) serverCredentials() (credentials.TransportCredentials, error) {
	if f.current.server == nil {
		return nil, errors.New("serviceAuth.tls: a TLS server needs certFile and keyFile")
	}
	return credentials.NewTLS(&tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return f.material().server, nil
		},
	}), nil
}

// clientConfig is the client side's configuration from the current
// material.
func (f *tlsFiles) clientConfig() *tls.Config {
	m := f.material()
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.cfg.ServerName, RootCAs: m.roots}
	if m.cert != nil {
		tc.Certificates = []tls.Certificate{*m.cert}
	}
	return tc
}

// reloadingClientCredentials is gRPC's TLS client credentials, built
// afresh for every handshake from the current files (its root CAs cannot
// change in a tls.Config that lives on).
type reloadingClientCredentials struct {
	files      *tlsFiles
	serverName string
}

func (r *reloadingClientCredentials) tls() credentials.TransportCredentials {
	tc := r.files.clientConfig()
	if r.serverName != "" {
		tc.ServerName = r.serverName
	}
	return credentials.NewTLS(tc)
}

func (r *reloadingClientCredentials) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return r.tls().ClientHandshake(ctx, authority, conn)
}

func (r *reloadingClientCredentials) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("client credentials cannot serve")
}

// Info names the server the certificates must be for: gRPC takes it as
// the channel's authority, and the handshake checks the certificate
// against the authority, so a configured serverName (or an override) is
// honoured here or not at all. Without one, the authority is the host of
// the target (the name part of dns:///name:port).
func (r *reloadingClientCredentials) Info() credentials.ProtocolInfo {
	name := r.serverName
	if name == "" {
		name = r.files.cfg.ServerName
	}
	return credentials.NewTLS(&tls.Config{ServerName: name}).Info()
}

func (r *reloadingClientCredentials) Clone() credentials.TransportCredentials {
	c := *r
	return &c
}

// OverrideServerName implements the (deprecated) interface method.
func (r *reloadingClientCredentials) OverrideServerName(name string) error {
	r.serverName = name
	return nil
}

func loadPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificates in %s", path)
	}
	return pool, nil
}

// CheckTLS reads and parses the TLS files c names, as a server or a
// client built from c would at start; nil when TLS is off. A service's
// validation calls it, so that a reload accepts only files it could start
// with.
func CheckTLS(c config.TLS) error {
	if !c.Enabled() {
		return nil
	}
	_, err := loadTLSFiles(c, nil)
	return err
}
