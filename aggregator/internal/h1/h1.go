// Package h1 is an HTTP/1.1 client transport that does each exchange on
// the calling goroutine.
//
// The aggregator's raw call path (backend/raw.go) sends one POST per call
// and reads its answer to the end. net/http's Transport runs two goroutines
// per connection and hands every request and response across them through
// channels, and finds an idle connection through a queue of waiters; under
// load those handoffs were a fifth of the aggregator's CPU per call, more
// than the reads and writes themselves. Here the caller takes an idle
// connection from a stack, writes the request, and reads the response on
// its own goroutine; the connection goes back when the body has been read
// to its end.
//
// What the standard transport does that this one does not: HTTP/2,
// proxies, compression, Expect: 100-continue, and noticing, while a
// connection sits idle, that its server closed it. Requests through a
// proxy (the environment's HTTP_PROXY and NO_PROXY) and requests of any
// scheme but http and https go to Fallback. A pooled connection is checked
// before it is used again: one that its server closed, or that holds bytes
// nobody asked for, is discarded and the request goes on a fresh one.
package h1

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
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
}

// Transport is an http.RoundTripper.
type Transport struct {
	cfg Config

	mu        sync.Mutex
	idle      map[string][]*conn // per host, the most recently used last
	idleCount int
	janitor   bool // a goroutine closes expired idle connections
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
	return &Transport{cfg: cfg}
}

// errNoFallback answers a request this transport does not take when it has
// no Fallback.
var errNoFallback = errors.New("h1: the request needs a proxy or a scheme this transport does not speak, and no fallback is set")

// RoundTrip sends req and reads the response's status and headers. The
// body is read from the connection as the caller reads it.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.takes(req) {
		if t.cfg.Fallback == nil {
			closeBody(req)
			return nil, errNoFallback
		}
		return t.cfg.Fallback.RoundTrip(req)
	}
	if err := validHeaders(req.Header); err != nil {
		closeBody(req)
		return nil, err
	}
	key := hostKey(req.URL)
	ctx := req.Context()
	for {
		c, reused, err := t.conn(ctx, req.URL, key)
		if err != nil {
			closeBody(req)
			return nil, err
		}
		resp, err := c.exchange(ctx, req)
		if err == nil {
			return resp, nil
		}
		c.close()
		// A pooled connection that could not even take the request was
		// dead: nothing reached the server, so the request may go again
		// on a fresh one, once.
		if reused && errors.Is(err, errNotWritten) && req.GetBody != nil && ctx.Err() == nil {
			body, gerr := req.GetBody()
			if gerr != nil {
				return nil, gerr
			}
			r2 := *req
			r2.Body = body
			req = &r2
			continue
		}
		closeBody(req)
		return nil, errors.Unwrap(err)
	}
}

// takes reports whether this transport carries req itself.
func (t *Transport) takes(req *http.Request) bool {
	if req.URL == nil || req.URL.Host == "" || (req.URL.Scheme != "http" && req.URL.Scheme != "https") {
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

// validHeaders refuses what would let a header value or name break the
// request's framing (a CR or LF, for example).
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

// conn is an idle connection for key that is still good, or a new one.
func (t *Transport) conn(ctx context.Context, u *url.URL, key string) (*conn, bool, error) {
	now := time.Now()
	for {
		c := t.takeIdle(key)
		if c == nil {
			break
		}
		if now.Sub(c.idleSince) < t.cfg.IdleTimeout && c.alive() {
			return c, true, nil
		}
		c.close()
	}
	c, err := t.dial(ctx, u, key)
	return c, false, err
}

func (t *Transport) takeIdle(key string) *conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	stack := t.idle[key]
	if len(stack) == 0 {
		return nil
	}
	c := stack[len(stack)-1]
	stack[len(stack)-1] = nil
	t.idle[key] = stack[:len(stack)-1]
	t.idleCount--
	return c
}

// put keeps c for its next request, or closes it past the bounds.
func (t *Transport) put(c *conn) {
	c.idleSince = time.Now()
	t.mu.Lock()
	if len(t.idle[c.key]) >= t.cfg.MaxIdlePerHost || t.idleCount >= t.cfg.MaxIdle {
		t.mu.Unlock()
		c.close()
		return
	}
	if t.idle == nil {
		t.idle = map[string][]*conn{}
	}
	t.idle[c.key] = append(t.idle[c.key], c)
	t.idleCount++
	start := !t.janitor
	t.janitor = true
	t.mu.Unlock()
	if start {
		go t.sweep()
	}
}

// sweep closes connections idle for longer than IdleTimeout, and ends
// when none is left.
func (t *Transport) sweep() {
	tick := time.NewTicker(t.cfg.IdleTimeout / 2)
	defer tick.Stop()
	for range tick.C {
		cutoff := time.Now().Add(-t.cfg.IdleTimeout)
		var expired []*conn
		t.mu.Lock()
		for key, stack := range t.idle {
			// The stack is in the order of use: the oldest first.
			n := 0
			for n < len(stack) && stack[n].idleSince.Before(cutoff) {
				n++
			}
			expired = append(expired, stack[:n]...)
			if n == len(stack) {
				delete(t.idle, key)
			} else {
				t.idle[key] = append(stack[:0], stack[n:]...)
			}
			t.idleCount -= n
		}
		done := t.idleCount == 0
		if done {
			t.janitor = false
		}
		t.mu.Unlock()
		for _, c := range expired {
			c.close()
		}
		if done {
			return
		}
	}
}

// CloseIdleConnections closes every idle connection.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.idleCount = 0
	t.mu.Unlock()
	for _, stack := range idle {
		for _, c := range stack {
			c.close()
		}
	}
	if t.cfg.Fallback != nil {
		if f, ok := t.cfg.Fallback.(interface{ CloseIdleConnections() }); ok {
			f.CloseIdleConnections()
		}
	}
}

func (t *Transport) dial(ctx context.Context, u *url.URL, key string) (*conn, error) {
	nc, err := t.cfg.Dial(ctx, "tcp", hostPort(u))
	if err != nil {
		return nil, err
	}
	raw := nc
	if u.Scheme == "https" {
		cfg := &tls.Config{}
		if t.cfg.TLS != nil {
			cfg = t.cfg.TLS.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = u.Hostname()
		}
		cfg.NextProtos = []string{"http/1.1"}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = nc.Close()
			return nil, err
		}
		nc = tc
	}
	c := &conn{t: t, key: key, nc: nc, raw: raw}
	c.limit.r = nc
	c.written.w = nc
	c.br = bufio.NewReaderSize(&c.limit, 4<<10)
	c.bw = bufio.NewWriterSize(&c.written, 4<<10)
	return c, nil
}

// conn is one connection and its buffers.
type conn struct {
	t         *Transport
	key       string
	nc        net.Conn // what requests are written to and read from
	raw       net.Conn // the TCP connection under nc (nc itself over http)
	br        *bufio.Reader
	bw        *bufio.Writer
	limit     limitReader
	written   countingWriter
	idleSince time.Time
}

func (c *conn) close() { _ = c.nc.Close() }

// alive reports whether an idle connection may carry a request: its server
// has not closed it and sent nothing unasked.
func (c *conn) alive() bool {
	return c.br.Buffered() == 0 && idleAndOpen(c.raw)
}

// errNotWritten marks an error of a request that never reached the
// connection.
var errNotWritten = errors.New("h1: request not written")

// aLongTimeAgo is a deadline that has passed: it interrupts a blocked
// read or write at once.
var aLongTimeAgo = time.Unix(1, 0)

// exchange writes req and reads the response head. On error the
// connection is not reused.
func (c *conn) exchange(ctx context.Context, req *http.Request) (*http.Response, error) {
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(aLongTimeAgo) })
	wrote, err := c.write(req)
	if err != nil {
		stop()
		if !wrote {
			err = fmt.Errorf("%w: %w", errNotWritten, err)
		}
		return nil, wrapped{ctxErr(ctx, err)}
	}
	c.limit.n = c.t.cfg.MaxResponseHeaderBytes
	var resp *http.Response
	for {
		resp, err = http.ReadResponse(c.br, req)
		if err != nil {
			stop()
			if c.limit.n <= 0 {
				err = fmt.Errorf("h1: response headers over %d bytes", c.t.cfg.MaxResponseHeaderBytes)
			}
			return nil, wrapped{ctxErr(ctx, err)}
		}
		// 1xx answers before the final one are skipped, as the standard
		// transport does (101 is final: no upgrade is asked for, so one
		// is an answer like any other).
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		break
	}
	c.limit.n = -1
	// ReadResponse says whether the server keeps the connection (resp.Close
	// for "Connection: close" and HTTP/1.0).
	b := &body{ctx: ctx, c: c, rc: resp.Body, stop: stop, reuse: !resp.Close}
	if resp.Body == http.NoBody {
		b.finish(true)
		return resp, nil
	}
	resp.Body = b
	return resp, nil
}

// wrapped carries an exchange's error out of RoundTrip's retry logic.
type wrapped struct{ err error }

func (w wrapped) Error() string { return w.err.Error() }
func (w wrapped) Unwrap() error { return w.err }

// ctxErr is err, or the context's error when the context ended it.
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
}

// write sends req's head and body. wrote reports whether any of it may
// have reached the server.
func (c *conn) write(req *http.Request) (wrote bool, err error) {
	c.written.n = 0
	w := c.bw
	w.WriteString(req.Method)
	w.WriteByte(' ')
	w.WriteString(req.URL.RequestURI())
	w.WriteString(" HTTP/1.1\r\nHost: ")
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	w.WriteString(host)
	w.WriteString("\r\n")
	if _, ok := req.Header["User-Agent"]; !ok {
		w.WriteString("User-Agent: Go-http-client/1.1\r\n")
	}
	if u := req.URL.User; u != nil && req.Header.Get("Authorization") == "" {
		// As the standard transport does with a URL's user information.
		pw, _ := u.Password()
		w.WriteString("Authorization: Basic ")
		w.WriteString(base64.StdEncoding.EncodeToString([]byte(u.Username() + ":" + pw)))
		w.WriteString("\r\n")
	}
	for k, vs := range req.Header {
		switch k {
		case "Host", "Content-Length", "Transfer-Encoding", "Connection":
			continue
		}
		for _, v := range vs {
			w.WriteString(k)
			w.WriteString(": ")
			w.WriteString(strings.TrimSpace(v))
			w.WriteString("\r\n")
		}
	}
	if req.Close {
		w.WriteString("Connection: close\r\n")
	}
	switch {
	case req.Body == nil || req.Body == http.NoBody:
		if req.Method == http.MethodPost || req.Method == http.MethodPut || req.Method == http.MethodPatch {
			w.WriteString("Content-Length: 0\r\n")
		}
		w.WriteString("\r\n")
	case req.ContentLength > 0:
		w.WriteString("Content-Length: ")
		w.WriteString(strconv.FormatInt(req.ContentLength, 10))
		w.WriteString("\r\n\r\n")
		n, err := io.Copy(w, io.LimitReader(req.Body, req.ContentLength))
		_ = req.Body.Close()
		if err != nil {
			return c.written.n > 0, err
		}
		if n != req.ContentLength {
			return c.written.n > 0, fmt.Errorf("h1: request body of %d bytes, %d declared", n, req.ContentLength)
		}
	default:
		// A body of unknown length goes chunked.
		w.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		cw := &chunkWriter{w: w}
		_, err := io.Copy(cw, req.Body)
		_ = req.Body.Close()
		if err != nil {
			return c.written.n > 0, err
		}
		w.WriteString("0\r\n\r\n")
	}
	if err := w.Flush(); err != nil {
		// Nothing reached a connection whose first write failed.
		return c.written.n > 0, err
	}
	return true, nil
}

// countingWriter counts the bytes of a request the connection took.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

type chunkWriter struct{ w *bufio.Writer }

func (c *chunkWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.w.WriteString(strconv.FormatInt(int64(len(p)), 16))
	c.w.WriteString("\r\n")
	c.w.Write(p)
	_, err := c.w.WriteString("\r\n")
	return len(p), err
}

// limitReader bounds what the response head may read; n < 0 is no bound.
type limitReader struct {
	r io.Reader
	n int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n < 0 {
		return l.r.Read(p)
	}
	if l.n == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// body is a response body; the connection goes back to the pool when it
// has been read to its end, and is closed if it is closed before.
type body struct {
	ctx   context.Context
	c     *conn
	rc    io.ReadCloser
	stop  func() bool
	reuse bool
	done  bool
}

func (b *body) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.finish(true)
	} else if err != nil {
		b.finish(false)
		err = ctxErr(b.ctx, err)
	}
	return n, err
}

func (b *body) Close() error {
	if !b.done {
		b.finish(false)
	}
	return nil
}

// finish ends the exchange: the connection is kept when the body was read
// whole, nothing asked to close it and the context did not interrupt it.
func (b *body) finish(whole bool) {
	b.done = true
	if b.stop() && whole && b.reuse {
		b.c.t.put(b.c)
		return
	}
	b.c.close()
}
