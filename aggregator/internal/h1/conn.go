// One connection: dialing, the check before reuse, and one exchange with
// the response body it leaves open.

package h1

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// dial opens a connection to u for key, over TLS for https.
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
		return nil, ctxErr(ctx, err)
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
			return nil, ctxErr(ctx, err)
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

// ctxErr is err, or the context's error when the context ended it.
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
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
	// detached is set once Detach has stopped the context from
	// interrupting the exchange.
	detached atomic.Bool
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

// Detach makes the rest of the exchange independent of the request's
// context: a caller that has what it needed from the body can hand the
// reading of its end to another goroutine and return, and the connection
// is still kept when that end arrives. It reports false when the context
// has already interrupted the exchange (the connection is then lost). The
// reader must bound the rest itself, by closing the body.
func (b *body) Detach() bool {
	if b.done.Load() {
		return false
	}
	if !b.stop() {
		return false
	}
	b.detached.Store(true)
	return true
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
	// After Detach the context can no longer have interrupted anything,
	// and stop would report false for having been called already.
	if (b.detached.Load() || b.stop()) && whole && b.reuse {
		b.c.t.put(b.c)
		return true
	}
	b.c.close()
	return true
}
