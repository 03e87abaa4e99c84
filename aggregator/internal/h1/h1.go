// Package h1 is an HTTP/1.1 client transport that does each exchange on
// the calling goroutine.
//
// It carries every request the aggregator sends to a backend (the one
// stack of backend/stack.go): the raw call path's, one POST per call read
// to its end, and go-sdk's session requests and event streams. net/http's Transport runs two goroutines
// per connection and hands every request and response across them through
// channels, and finds an idle connection through a queue of waiters; under
// load those handoffs were a fifth of the aggregator's CPU per call, more
// than the reads and writes themselves. Here the caller takes an idle
// connection from a stack, writes the request, and reads the response on
// its own goroutine; the connection goes back when the body has been read
// to its end.
//
// What the standard transport does that this one does not: HTTP/2,
// proxies, compression, Expect: 100-continue, reading an answer while a
// large request body is still being written, and noticing, while a
// connection sits idle, that its server closed it. So requests through a
// proxy (the environment's HTTP_PROXY and NO_PROXY), of any scheme but
// http and https, or with a body over MaxBody bytes or of unknown length
// go to Fallback: a server that answers (413, 401) before reading a body
// that fits its socket buffers is still heard. A pooled connection is
// checked before it is used again: one that its server closed, or that
// holds bytes nobody asked for, is discarded and the request goes on a
// fresh one.
package h1

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
)

// Config is what a Transport is built from.
type Config struct {
	// Dial opens a TCP connection.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLS is the client configuration of https connections (ServerName is
	// set per host; NextProtos is always http/1.1); nil is the default.
	TLS *tls.Config
	// Proxy says which requests go through a proxy; they go to Fallback.
	Proxy func(*http.Request) (*url.URL, error)
	// Fallback carries the requests this transport does not.
	Fallback http.RoundTripper
	// MaxIdlePerHost and MaxIdle bound the idle connections kept, per
	// host and in all; IdleTimeout closes one idle for longer.
	MaxIdlePerHost int
	MaxIdle        int
	IdleTimeout    time.Duration
	// MaxResponseHeaderBytes bounds a response's status line and headers.
	MaxResponseHeaderBytes int64
	// MaxBody is the largest request body this transport writes itself;
	// larger ones, and bodies of unknown length, go to Fallback.
	MaxBody int64
	// TLSHandshakeTimeout bounds a TLS handshake.
	TLSHandshakeTimeout time.Duration
}

// Transport is an http.RoundTripper.
type Transport struct {
	cfg Config

	mu        sync.Mutex
	idle      map[string][]*conn // per host, the most recently used last
	idleCount int
	janitor   bool // a goroutine closes expired idle connections
	// generation counts CloseIdleConnections calls: a connection dialed
	// before the last one is closed when its exchange ends, not pooled.
	generation uint64
}

// New is a Transport of cfg, with the standard transport's defaults for
// whatever is left zero.
func New(cfg Config) *Transport {
	if cfg.Dial == nil {
		cfg.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	if cfg.MaxIdlePerHost <= 0 {
		cfg.MaxIdlePerHost = 2
	}
	if cfg.MaxIdle <= 0 {
		cfg.MaxIdle = 100
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 90 * time.Second
	}
	if cfg.MaxResponseHeaderBytes <= 0 {
		cfg.MaxResponseHeaderBytes = 1 << 20
	}
	if cfg.MaxBody <= 0 {
		// Below every common socket receive buffer: the server takes the
		// whole body into its buffers even if it never reads it.
		cfg.MaxBody = 64 << 10
	}
	if cfg.TLSHandshakeTimeout <= 0 {
		cfg.TLSHandshakeTimeout = 10 * time.Second
	}
	return &Transport{cfg: cfg}
}

// errNoFallback answers a request this transport does not take when it has
// no Fallback.
var errNoFallback = errors.New("h1: the request needs a proxy or a scheme this transport does not speak, and no fallback is set")

// RoundTrip sends req and reads the response's status and headers. The
// body is read from the connection as the caller reads it. req is not
// modified; its body is closed, whatever the outcome.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.takes(req) {
		if t.cfg.Fallback == nil {
			closeBody(req)
			return nil, errNoFallback
		}
		return t.cfg.Fallback.RoundTrip(req)
	}
	if err := validRequest(req); err != nil {
		closeBody(req)
		return nil, err
	}
	key := hostKey(req.URL)
	ctx := req.Context()
	for attempt := 0; ; attempt++ {
		c, reused, err := t.conn(ctx, req.URL, key)
		if err != nil {
			closeBody(req)
			return nil, err
		}
		resp, err := c.exchange(ctx, req)
		// The body has been read, or will not be: it is closed once, here.
		closeBody(req)
		if err == nil {
			return resp, nil
		}
		c.close()
		// A pooled connection that could not even take the request was
		// dead: nothing reached the server, so the request may go again
		// on a fresh one, once.
		if attempt == 0 && reused && errors.Is(err, errNotWritten) && req.GetBody != nil && ctx.Err() == nil {
			body, gerr := req.GetBody()
			if gerr != nil {
				return nil, gerr
			}
			r2 := *req
			r2.Body = body
			req = &r2
			continue
		}
		return nil, err
	}
}

// takes reports whether this transport carries req itself.
func (t *Transport) takes(req *http.Request) bool {
	if req.URL == nil || req.URL.Host == "" || (req.URL.Scheme != "http" && req.URL.Scheme != "https") {
		return false
	}
	if t.cfg.Fallback != nil && req.Body != nil && req.Body != http.NoBody && (req.ContentLength <= 0 || req.ContentLength > t.cfg.MaxBody) {
		return false
	}
	if t.cfg.Proxy != nil {
		if p, err := t.cfg.Proxy(req); err != nil || p != nil {
			return false
		}
	}
	return true
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// validRequest refuses what would let the method, the Host or a header
// break the request's framing (a CR or LF, for example), and a declared
// body that is not there.
func validRequest(req *http.Request) error {
	if req.Method != "" && !httpguts.ValidHeaderFieldName(req.Method) {
		return fmt.Errorf("h1: invalid method %q", req.Method)
	}
	if !httpguts.ValidHostHeader(requestHost(req)) {
		return errors.New("h1: invalid Host header")
	}
	if req.ContentLength > 0 && req.Body == nil {
		return fmt.Errorf("h1: ContentLength %d with no body", req.ContentLength)
	}
	return validHeaders(req.Header)
}

// requestHost is the Host header req is sent with: req.Host or the URL's
// host, without an IPv6 zone (which only means something on this host).
func requestHost(req *http.Request) string {
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if strings.HasPrefix(host, "[") {
		if i, j := strings.LastIndex(host, "%"), strings.LastIndex(host, "]"); i > 0 && j > i {
			host = host[:i] + host[j:]
		}
	}
	return host
}

func validHeaders(h http.Header) error {
	for k, vs := range h {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("h1: invalid header field name %q", k)
		}
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) {
				return fmt.Errorf("h1: invalid header field value for %q", k)
			}
		}
	}
	return nil
}

// hostKey is the pool key of u: scheme and host with its port.
func hostKey(u *url.URL) string {
	return u.Scheme + "://" + hostPort(u)
}

func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	if u.Scheme == "https" {
		return net.JoinHostPort(u.Hostname(), "443")
	}
	return net.JoinHostPort(u.Hostname(), "80")
}
