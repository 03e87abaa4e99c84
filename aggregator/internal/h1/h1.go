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
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
		return nil, errors.Unwrap(err)
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
	t.mu.Lock()
	// Stamped under the lock, so that each stack stays in the order of use
	// that sweep relies on.
	c.idleSince = time.Now()
	if c.generation != t.generation || len(t.idle[c.key]) >= t.cfg.MaxIdlePerHost || t.idleCount >= t.cfg.MaxIdle {
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
	tick := time.NewTicker(max(t.cfg.IdleTimeout/2, time.Millisecond))
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
//
// Connections in use then are closed when their exchange ends.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.idleCount = 0
	t.generation++
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
	t.mu.Lock()
	generation := t.generation
	t.mu.Unlock()
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
		hctx, cancel := context.WithTimeout(ctx, t.cfg.TLSHandshakeTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			_ = nc.Close()
			return nil, err
		}
		nc = tc
	}
	c := &conn{t: t, key: key, nc: nc, raw: raw, generation: generation}
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
	// generation is the transport's when c was dialed.
	generation uint64
}

func (c *conn) close() { _ = c.nc.Close() }

// alive reports whether an idle connection may carry a request: its server
// has not closed it and sent nothing unasked.
func (c *conn) alive() bool {
	if c.br.Buffered() > 0 {
		return false
	}
	if !idleAndOpen(c.raw) {
		return false
	}
	if c.nc == c.raw {
		return true
	}
	// TLS also reads records ahead into buffers of its own, where the
	// socket's peek cannot see them: a read that may not wait (an expired
	// deadline touches no socket) must find nothing there. A timeout
	// leaves a TLS connection usable.
	_ = c.nc.SetReadDeadline(aLongTimeAgo)
	_, err := c.br.Peek(1)
	_ = c.nc.SetReadDeadline(time.Time{})
	return errors.Is(err, os.ErrDeadlineExceeded)
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
	if tc, ok := c.nc.(*tls.Conn); ok {
		state := tc.ConnectionState()
		resp.TLS = &state
	}
	// ReadResponse says whether the server keeps the connection (resp.Close
	// for "Connection: close" and HTTP/1.0); a request that asked to close
	// it, and a switch of protocols, end it too.
	reuse := !resp.Close && !closes(req) && resp.StatusCode != http.StatusSwitchingProtocols
	b := &body{ctx: ctx, c: c, rc: resp.Body, stop: stop, reuse: reuse}
	if resp.Body == http.NoBody {
		b.finish(true, io.EOF)
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

// closes reports whether req asks for its connection to end.
func closes(req *http.Request) bool {
	return req.Close || httpguts.HeaderValuesContainsToken(req.Header["Connection"], "close")
}

// write sends req's head and body. wrote reports whether any of it may
// have reached the server; an error of the body itself (not of the
// connection) is never errNotWritten, so it is not retried.
func (c *conn) write(req *http.Request) (wrote bool, err error) {
	c.written.n = 0
	w := c.bw
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	w.WriteString(method)
	w.WriteByte(' ')
	w.WriteString(req.URL.RequestURI())
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(requestHost(req))
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
			// Framing is this transport's; "Connection: close" is req.Close.
			continue
		}
		for _, v := range vs {
			w.WriteString(k)
			w.WriteString(": ")
			w.WriteString(strings.TrimSpace(v))
			w.WriteString("\r\n")
		}
	}
	if closes(req) {
		w.WriteString("Connection: close\r\n")
	}
	switch {
	case req.Body == nil || req.Body == http.NoBody:
		if method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
			w.WriteString("Content-Length: 0\r\n")
		}
		w.WriteString("\r\n")
	case req.ContentLength > 0:
		w.WriteString("Content-Length: ")
		w.WriteString(strconv.FormatInt(req.ContentLength, 10))
		w.WriteString("\r\n\r\n")
		src := &sourceReader{r: io.LimitReader(req.Body, req.ContentLength)}
		n, err := io.Copy(w, src)
		if src.err != nil {
			return true, src.err
		}
		if err != nil {
			return c.written.n > 0, err
		}
		if n != req.ContentLength {
			return true, fmt.Errorf("h1: request body of %d bytes, %d declared", n, req.ContentLength)
		}
		if extra, _ := req.Body.Read(make([]byte, 1)); extra > 0 {
			return true, fmt.Errorf("h1: request body longer than the %d bytes declared", req.ContentLength)
		}
	default:
		// A body of unknown length goes chunked (Fallback takes these when
		// there is one).
		w.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		src := &sourceReader{r: req.Body}
		_, err := io.Copy(&chunkWriter{w: w}, src)
		if src.err != nil {
			return true, src.err
		}
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

// sourceReader keeps the error of the request body itself, apart from the
// connection's.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		s.err = err
	}
	return n, err
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
// has been read to its end, and is closed if it is closed before. Close
// may come from another goroutine while Read runs (the standard
// transport's bodies allow it): the first of them to end the exchange
// decides the connection's fate.
type body struct {
	ctx   context.Context
	c     *conn
	rc    io.ReadCloser
	stop  func() bool
	reuse bool
	done  atomic.Bool
	// err is what a Read after the end returns: io.EOF after the whole
	// body, the failure after a failed read, errBodyClosed after Close.
	mu  sync.Mutex
	err error
}

var errBodyClosed = errors.New("h1: read on a closed response body")

func (b *body) Read(p []byte) (int, error) {
	if b.done.Load() {
		return 0, b.endErr()
	}
	n, err := b.rc.Read(p)
	switch {
	case err == io.EOF:
		b.finish(true, io.EOF)
	case err != nil:
		err = ctxErr(b.ctx, err)
		if !b.finish(false, err) {
			// Closed meanwhile: report that, not the read it interrupted.
			err = b.endErr()
		}
	}
	return n, err
}

func (b *body) Close() error {
	b.finish(false, errBodyClosed)
	return nil
}

func (b *body) endErr() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// finish ends the exchange once, reporting whether this call ended it: the
// connection is kept when the body was read whole, nothing asked to close
// it and the context did not interrupt it.
func (b *body) finish(whole bool, end error) bool {
	if !b.done.CompareAndSwap(false, true) {
		return false
	}
	b.mu.Lock()
	b.err = end
	b.mu.Unlock()
	if b.stop() && whole && b.reuse {
		b.c.t.put(b.c)
		return true
	}
	b.c.close()
	return true
}
