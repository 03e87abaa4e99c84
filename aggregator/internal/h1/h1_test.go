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
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// connCounter counts the connections a test server accepted and closed.
type connCounter struct{ opened, closed atomic.Int32 }

func (c *connCounter) track(_ net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		c.opened.Add(1)
	case http.StateClosed, http.StateHijacked:
		c.closed.Add(1)
	}
}

// echoServer answers every request with its method, body and the headers
// a test asks about.
func echoServer(t *testing.T, counter *connCounter) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "%s %s %s auth=%q te=%v", r.Method, r.URL.RequestURI(), body, r.Header.Get("Authorization"), r.TransferEncoding)
	}))
	if counter != nil {
		srv.Config.ConnState = counter.track
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, tr http.RoundTripper, ctx context.Context, u, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return tr.RoundTrip(req)
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return string(b)
}

func (t *Transport) idleConns() []*conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*conn
	for _, stack := range t.idle {
		out = append(out, stack...)
	}
	return out
}

func TestRequestsShareOneConnection(t *testing.T) {
	var counter connCounter
	srv := echoServer(t, &counter)
	tr := New(Config{MaxIdlePerHost: 4})
	defer tr.CloseIdleConnections()
	for i := range 20 {
		resp, err := post(t, tr, context.Background(), srv.URL+"/mcp?x=1", fmt.Sprintf(`{"n":%d}`, i))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := readAll(t, resp), fmt.Sprintf(`POST /mcp?x=1 {"n":%d} auth="" te=[]`, i); got != want || resp.StatusCode != 200 || resp.Proto != "HTTP/1.1" {
			t.Fatalf("answer %d: %d %s %q, want %q", i, resp.StatusCode, resp.Proto, got, want)
		}
	}
	if n := counter.opened.Load(); n != 1 {
		t.Fatalf("20 requests in a row opened %d connections, want 1", n)
	}
}

func TestConcurrentRequests(t *testing.T) {
	var counter connCounter
	srv := echoServer(t, &counter)
	// As many idle slots as callers: with fewer, a connection put back
	// while the slots are full is closed, and a caller may then dial a
	// 17th (the idle bound has a test of its own, below).
	tr := New(Config{MaxIdlePerHost: 16})
	defer tr.CloseIdleConnections()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Go(func() {
			for i := range 50 {
				body := fmt.Sprintf("g%d-%d", g, i)
				resp, err := post(t, tr, context.Background(), srv.URL, body)
				if err != nil {
					errs <- err
					return
				}
				b, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if !strings.Contains(string(b), " "+body+" ") {
					errs <- fmt.Errorf("request %s got %q", body, b)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := len(tr.idleConns()); n > 16 {
		t.Fatalf("%d idle connections kept, bound 16", n)
	}
	if n := counter.opened.Load(); n > 16 {
		t.Fatalf("16 callers opened %d connections", n)
	}
}

// A pooled connection its server closed is not used: the next request
// goes on a fresh one and succeeds.
func TestServerClosedIdleConnection(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("idleAndOpen can only look at an idle connection on Linux")
	}
	var counter connCounter
	srv := echoServer(t, &counter)
	tr := New(Config{})
	defer tr.CloseIdleConnections()
	resp, err := post(t, tr, context.Background(), srv.URL, "one")
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	srv.CloseClientConnections()
	testkit.Eventually(t, "the pooled connection to see its end", 5*time.Second, func() bool {
		idle := tr.idleConns()
		return len(idle) == 1 && !idleAndOpen(idle[0].raw)
	})
	resp, err = post(t, tr, context.Background(), srv.URL, "two")
	if err != nil {
		t.Fatalf("after the server closed the idle connection: %v", err)
	}
	if got := readAll(t, resp); !strings.Contains(got, " two ") {
		t.Fatalf("answer %q", got)
	}
	if n := counter.opened.Load(); n != 2 {
		t.Fatalf("%d connections opened, want 2", n)
	}
}

// rawServer accepts connections and hands each to serve.
func rawServer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveConns(t, lis, serve)
	return "http://" + lis.Addr().String()
}

// cannedServer answers one request per connection with answer, raw.
func cannedServer(t *testing.T, answer string) string {
	t.Helper()
	return rawServer(t, func(c net.Conn) {
		if _, err := readRequest(bufio.NewReader(c)); err != nil {
			return
		}
		fmt.Fprint(c, answer)
	})
}

// serveConns hands every connection lis accepts to serve, until the test
// ends.
func serveConns(t *testing.T, lis net.Listener, serve func(net.Conn)) {
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
}

// readRequest reads one request from c and its body.
func readRequest(br *bufio.Reader) (*http.Request, error) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, req.Body)
	return req, nil
}

// A connection that holds bytes nobody asked for is not used again.
func TestUnaskedBytesDiscardConnection(t *testing.T) {
	var conns atomic.Int32
	u := rawServer(t, func(c net.Conn) {
		conns.Add(1)
		br := bufio.NewReader(c)
		for {
			if _, err := readRequest(br); err != nil {
				return
			}
			// The answer, then a second one nobody asked for.
			fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale")
		}
	})
	tr := New(Config{})
	defer tr.CloseIdleConnections()
	for i := range 2 {
		resp, err := post(t, tr, context.Background(), u, "x")
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, resp); got != "ok" {
			t.Fatalf("answer %d: %q, want ok (a stale answer was read)", i, got)
		}
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2: the one with unasked bytes must not be reused", n)
	}
}

func TestInformationalAnswersSkipped(t *testing.T) {
	u := cannedServer(t, "HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfinal")
	tr := New(Config{})
	defer tr.CloseIdleConnections()
	resp, err := post(t, tr, context.Background(), u, "x")
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp); resp.StatusCode != 200 || got != "final" {
		t.Fatalf("got %d %q, want 200 final", resp.StatusCode, got)
	}
}

func TestConnectionCloseAndEarlyCloseNotReused(t *testing.T) {
	var counter connCounter
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/close" {
			w.Header().Set("Connection", "close")
		}
		// Larger than any buffer, so that an early Close leaves some unread.
		_, _ = w.Write([]byte(strings.Repeat("x", 64<<10)))
	}))
	srv.Config.ConnState = counter.track
	srv.Start()
	defer srv.Close()
	tr := New(Config{})
	defer tr.CloseIdleConnections()

	resp, err := post(t, tr, context.Background(), srv.URL+"/close", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp); len(got) != 64<<10 {
		t.Fatalf("read %d bytes", len(got))
	}
	if n := len(tr.idleConns()); n != 0 {
		t.Fatalf("a connection its server closes was pooled (%d idle)", n)
	}
	resp, err = post(t, tr, context.Background(), srv.URL+"/open", "")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if n := len(tr.idleConns()); n != 0 {
		t.Fatalf("a connection with an unread body was pooled (%d idle)", n)
	}
	testkit.Eventually(t, "the server to see both connections closed", 5*time.Second, func() bool { return counter.closed.Load() == 2 })
	if n := counter.opened.Load(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

// heldEventServer answers every request with an event stream of one event,
// flushed, and ends the stream once release is closed or the request ends.
func heldEventServer(t *testing.T, counter *connCounter, event string, release <-chan struct{}) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\n", event)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	srv.Config.ConnState = counter.track
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// Ending the request's context interrupts a response being read, and the
// connection is not reused.
func TestCancelInterruptsBody(t *testing.T) {
	var counter connCounter
	release := make(chan struct{})
	srv := heldEventServer(t, &counter, "first", release)
	defer close(release)
	tr := New(Config{})
	defer tr.CloseIdleConnections()

	ctx, cancel := context.WithCancel(context.Background())
	resp, err := post(t, tr, ctx, srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "data: first\n" {
		t.Fatalf("first event: %q %v", line, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("read after cancel: %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancel did not interrupt the read")
	}
	_ = resp.Body.Close()
	if n := len(tr.idleConns()); n != 0 {
		t.Fatalf("an interrupted connection was pooled")
	}
}

func TestDeadlineBeforeHeaders(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	tr := New(Config{})
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := post(t, tr, ctx, srv.URL, "x")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want context.DeadlineExceeded", err)
	}
}

// A header that would break the request's framing is refused before
// anything is sent.
func TestHeaderInjectionRefused(t *testing.T) {
	var counter connCounter
	srv := echoServer(t, &counter)
	tr := New(Config{})
	defer tr.CloseIdleConnections()
	for _, h := range [][2]string{{"X-Evil", "a\r\nInjected: yes"}, {"Bad Name", "v"}, {"X-Nul", "a\x00b"}} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x"))
		req.Header[h[0]] = []string{h[1]}
		if _, err := tr.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "invalid header") {
			t.Fatalf("header %q: %v, want refused", h[0], err)
		}
	}
	if n := counter.opened.Load(); n != 0 {
		t.Fatalf("refused requests opened %d connections", n)
	}
}

func TestResponseHeadBounded(t *testing.T) {
	u := rawServer(t, func(c net.Conn) {
		if _, err := readRequest(bufio.NewReader(c)); err != nil {
			return
		}
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nX-Big: %s\r\nContent-Length: 0\r\n\r\n", strings.Repeat("a", 64<<10))
	})
	tr := New(Config{MaxResponseHeaderBytes: 8 << 10})
	defer tr.CloseIdleConnections()
	_, err := post(t, tr, context.Background(), u, "x")
	if err == nil || !strings.Contains(err.Error(), "over 8192 bytes") {
		t.Fatalf("got %v, want the head bound", err)
	}
}

func TestUnknownLengthBodyGoesChunked(t *testing.T) {
	srv := echoServer(t, nil)
	tr := New(Config{})
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, srv.URL, io.NopCloser(strings.NewReader(strings.Repeat("y", 10000))))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp); !strings.Contains(got, " "+strings.Repeat("y", 10000)+" ") || !strings.HasSuffix(got, "te=[chunked]") {
		t.Fatalf("answer %.80q...", got)
	}
}

func TestURLUserBecomesBasicAuth(t *testing.T) {
	srv := echoServer(t, nil)
	u, _ := url.Parse(srv.URL)
	u.User = url.UserPassword("svc", "pw")
	tr := New(Config{})
	defer tr.CloseIdleConnections()
	resp, err := post(t, tr, context.Background(), u.String(), "")
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp); !strings.Contains(got, `auth="Basic c3ZjOnB3"`) {
		t.Fatalf("answer %q", got)
	}
}

func TestTLSSpeaksHTTP11(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s tls=%v", r.Proto, r.TLS != nil)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	tr := New(Config{TLS: srv.Client().Transport.(*http.Transport).TLSClientConfig})
	defer tr.CloseIdleConnections()
	for range 2 {
		resp, err := post(t, tr, context.Background(), srv.URL, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, resp); got != "HTTP/1.1 tls=true" {
			t.Fatalf("answer %q", got)
		}
	}
	if n := len(tr.idleConns()); n != 1 {
		t.Fatalf("%d idle TLS connections, want 1", n)
	}
	// An unknown authority is refused.
	bare := New(Config{})
	defer bare.CloseIdleConnections()
	if _, err := post(t, bare, context.Background(), srv.URL, ""); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("untrusted server: %v", err)
	}
}

type recordingRoundTripper struct{ seen atomic.Int32 }

func (r *recordingRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	r.seen.Add(1)
	return &http.Response{StatusCode: 299, Body: http.NoBody, Request: req}, nil
}

func TestProxiedAndOtherSchemesGoToFallback(t *testing.T) {
	srv := echoServer(t, nil)
	fallback := &recordingRoundTripper{}
	proxied := map[string]bool{}
	tr := New(Config{Fallback: fallback, Proxy: func(r *http.Request) (*url.URL, error) {
		if proxied[r.URL.Path] {
			return url.Parse("http://proxy.invalid:3128")
		}
		return nil, nil
	}})
	defer tr.CloseIdleConnections()
	proxied["/via-proxy"] = true
	for path, wantFallback := range map[string]bool{"/via-proxy": true, "/direct": false} {
		resp, err := post(t, tr, context.Background(), srv.URL+path, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.StatusCode == 299; got != wantFallback {
			t.Fatalf("%s: fallback %v, want %v", path, got, wantFallback)
		}
		readAll(t, resp)
	}
	req, _ := http.NewRequest(http.MethodGet, "ftp://example.invalid/x", nil)
	if resp, err := tr.RoundTrip(req); err != nil || resp.StatusCode != 299 {
		t.Fatalf("ftp: %v %v", resp, err)
	}
	if n := fallback.seen.Load(); n != 2 {
		t.Fatalf("fallback carried %d requests, want 2", n)
	}
	noFallback := New(Config{})
	if _, err := noFallback.RoundTrip(req); !errors.Is(err, errNoFallback) {
		t.Fatalf("no fallback: %v", err)
	}
}

// Idle connections are bounded per host, and closed once idle for longer
// than IdleTimeout.
func TestIdleBoundAndTimeout(t *testing.T) {
	var counter connCounter
	hold := make(chan struct{})
	var inFlight sync.WaitGroup
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inFlight.Done()
		<-hold
		fmt.Fprint(w, "ok")
	}))
	srv.Config.ConnState = counter.track
	srv.Start()
	defer srv.Close()
	tr := New(Config{MaxIdlePerHost: 1, IdleTimeout: 100 * time.Millisecond})
	defer tr.CloseIdleConnections()
	// Three requests at once need three connections; one is kept.
	inFlight.Add(3)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			resp, err := post(t, tr, context.Background(), srv.URL, "")
			if err == nil {
				_, _ = io.ReadAll(resp.Body)
				_ = resp.Body.Close()
			}
		})
	}
	inFlight.Wait()
	close(hold)
	wg.Wait()
	if n := len(tr.idleConns()); n != 1 {
		t.Fatalf("%d idle connections, bound 1", n)
	}
	testkit.Eventually(t, "the idle connection to time out", 5*time.Second, func() bool { return counter.closed.Load() == 3 })
	if n := len(tr.idleConns()); n != 0 {
		t.Fatalf("%d idle connections after the timeout", n)
	}
}

// Close from another goroutine while a Read runs (what raw.go's drain
// timer does) is safe, and the connection is not pooled twice.
func TestCloseDuringRead(t *testing.T) {
	srv := echoServer(t, nil)
	tr := New(Config{MaxIdlePerHost: 4})
	defer tr.CloseIdleConnections()
	for range 50 {
		resp, err := post(t, tr, context.Background(), srv.URL, "x")
		if err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(0, func() { _ = resp.Body.Close() })
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	seen := map[*conn]bool{}
	for _, c := range tr.idleConns() {
		if seen[c] {
			t.Fatal("a connection is in the pool twice")
		}
		seen[c] = true
	}
}

// tlsRawServer is rawServer over TLS, with a client configuration that
// trusts it.
func tlsRawServer(t *testing.T, serve func(net.Conn)) (string, *tls.Config) {
	t.Helper()
	ref := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(ref.Close)
	lis, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: ref.TLS.Certificates})
	if err != nil {
		t.Fatal(err)
	}
	serveConns(t, lis, serve)
	cfg := ref.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	cfg.ServerName = "example.com"
	return "https://" + lis.Addr().String(), cfg
}

// Over TLS, bytes nobody asked for can wait in TLS's own buffers where a
// peek at the socket does not see them: such a connection is not reused,
// and one caller never reads the answer meant for nobody.
func TestUnaskedBytesOverTLS(t *testing.T) {
	var conns atomic.Int32
	u, cfg := tlsRawServer(t, func(c net.Conn) {
		conns.Add(1)
		br := bufio.NewReader(c)
		for {
			if _, err := readRequest(br); err != nil {
				return
			}
			fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale")
		}
	})
	tr := New(Config{TLS: cfg})
	defer tr.CloseIdleConnections()
	for i := range 3 {
		resp, err := post(t, tr, context.Background(), u, "x")
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, resp); got != "ok" || resp.TLS == nil {
			t.Fatalf("answer %d: %q (TLS %v), want ok over TLS", i, got, resp.TLS != nil)
		}
		testkit.Eventually(t, "the unasked answer to arrive", 5*time.Second, func() bool {
			idle := tr.idleConns()
			return len(idle) == 1 && !idle[0].alive()
		})
	}
	if n := conns.Load(); n != 3 {
		t.Fatalf("%d connections for 3 requests, want 3", n)
	}
}

// A server that answers before reading a large body is heard: such bodies
// go to the standard transport, which reads while it writes.
func TestEarlyAnswerToALargeBody(t *testing.T) {
	hold := make(chan struct{})
	u := rawServer(t, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		fmt.Fprint(c, "HTTP/1.1 413 Request Entity Too Large\r\nContent-Length: 0\r\n\r\n")
		// The body is never read; the connection stays open.
		<-hold
	})
	t.Cleanup(func() { close(hold) })
	tr := New(Config{Fallback: http.DefaultTransport.(*http.Transport).Clone()})
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := post(t, tr, ctx, u, strings.Repeat("x", 32<<20))
	if err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("got %v %v, want the 413", resp, err)
	}
	_ = resp.Body.Close()
}

func TestInvalidHostAndMethodRefused(t *testing.T) {
	var counter connCounter
	srv := echoServer(t, &counter)
	tr := New(Config{})
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x"))
	req.Host = "example.com\r\nX-Injected: yes"
	if _, err := tr.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "invalid Host") {
		t.Fatalf("a Host with CR LF: %v", err)
	}
	req, _ = http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x"))
	req.Method = "POST /x HTTP/1.1\r\n"
	if _, err := tr.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "invalid method") {
		t.Fatalf("a method with spaces: %v", err)
	}
	if n := counter.opened.Load(); n != 0 {
		t.Fatalf("refused requests opened %d connections", n)
	}
	req, _ = http.NewRequest(http.MethodPost, srv.URL, nil)
	req.Method = ""
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp); !strings.HasPrefix(got, "GET / ") {
		t.Fatalf("an empty method went as %q, want GET", got)
	}
}

// A request that asks to close its connection, and a switch of protocols,
// leave nothing in the pool.
func TestClosingAnswersNotPooled(t *testing.T) {
	srv := echoServer(t, nil)
	tr := New(Config{})
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x"))
	req.Header.Set("Connection", "close")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if n := len(tr.idleConns()); n != 0 {
		t.Fatalf("Connection: close left %d idle", n)
	}
	u := cannedServer(t, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n")
	resp, err = post(t, tr, context.Background(), u, "x")
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("got %v %v", resp, err)
	}
	_ = resp.Body.Close()
	if n := len(tr.idleConns()); n != 0 {
		t.Fatalf("a 101 left %d idle", n)
	}
}

type countingBody struct {
	io.Reader
	closes atomic.Int32
}

func (b *countingBody) Close() error { b.closes.Add(1); return nil }

// The request body is closed exactly once, on success and on failure.
func TestRequestBodyClosedOnce(t *testing.T) {
	srv := echoServer(t, nil)
	hangup := rawServer(t, func(c net.Conn) { _, _ = readRequest(bufio.NewReader(c)) })
	tr := New(Config{})
	defer tr.CloseIdleConnections()
	for _, u := range []string{srv.URL, hangup} {
		b := &countingBody{Reader: strings.NewReader("abc")}
		req, _ := http.NewRequest(http.MethodPost, u, b)
		req.ContentLength = 3
		resp, err := tr.RoundTrip(req)
		if err == nil {
			readAll(t, resp)
		}
		if n := b.closes.Load(); n != 1 {
			t.Fatalf("%s: the body was closed %d times (err %v)", u, n, err)
		}
	}
	// A body longer than declared is refused, not cut.
	req, _ := http.NewRequest(http.MethodPost, srv.URL, io.NopCloser(strings.NewReader("abcdef")))
	req.ContentLength = 3
	if _, err := tr.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("an overlong body: %v", err)
	}
}

// A connection in use when CloseIdleConnections is called is closed when
// its exchange ends instead of going back to the pool.
func TestCloseIdleConnectionsCoversConnectionsInUse(t *testing.T) {
	srv := echoServer(t, nil)
	tr := New(Config{})
	resp, err := post(t, tr, context.Background(), srv.URL, "x")
	if err != nil {
		t.Fatal(err)
	}
	tr.CloseIdleConnections()
	readAll(t, resp)
	if n := len(tr.idleConns()); n != 0 {
		t.Fatalf("%d idle after CloseIdleConnections", n)
	}
	// New connections are pooled again.
	resp, err = post(t, tr, context.Background(), srv.URL, "x")
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if n := len(tr.idleConns()); n != 1 {
		t.Fatalf("%d idle after a new exchange, want 1", n)
	}
	tr.CloseIdleConnections()
}

func TestTinyIdleTimeout(t *testing.T) {
	srv := echoServer(t, nil)
	tr := New(Config{IdleTimeout: time.Nanosecond})
	resp, err := post(t, tr, context.Background(), srv.URL, "x")
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	testkit.Eventually(t, "the sweep", 5*time.Second, func() bool { return len(tr.idleConns()) == 0 })
}

// After a failed read or a Close, a body keeps saying so instead of
// looking complete.
func TestBodyErrorsStick(t *testing.T) {
	u := cannedServer(t, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\ntruncated")
	tr := New(Config{})
	defer tr.CloseIdleConnections()
	resp, err := post(t, tr, context.Background(), u, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated body: %v", err)
	}
	if _, err := resp.Body.Read(make([]byte, 8)); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a read after the failure: %v, want the failure again", err)
	}
	srv := echoServer(t, nil)
	resp, err = post(t, tr, context.Background(), srv.URL, "x")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if _, err := resp.Body.Read(make([]byte, 8)); !errors.Is(err, errBodyClosed) {
		t.Fatalf("a read after Close: %v", err)
	}
}

// After Detach, the end of a body is read after its request's context
// ended, and the connection is kept.
func TestDetachOutlivesTheContext(t *testing.T) {
	var counter connCounter
	release := make(chan struct{})
	srv := heldEventServer(t, &counter, "answer", release)
	tr := New(Config{})
	defer tr.CloseIdleConnections()

	ctx, cancel := context.WithCancel(context.Background())
	resp, err := post(t, tr, ctx, srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "data: answer\n" {
		t.Fatalf("first event: %q %v", line, err)
	}
	d, ok := resp.Body.(interface{ Detach() bool })
	if !ok || !d.Detach() {
		t.Fatal("the body could not be detached")
	}
	cancel()
	close(release)
	if rest, err := io.ReadAll(br); err != nil || string(rest) != "\n" {
		t.Fatalf("the rest after the context ended: %q %v", rest, err)
	}
	_ = resp.Body.Close()
	if tr.Idle() != 1 {
		t.Fatalf("%d idle connections after a detached body was read whole, want 1", tr.Idle())
	}

	if d.Detach() {
		t.Fatal("a body read to its end could be detached")
	}
	if n := counter.opened.Load(); n != 1 {
		t.Fatalf("opened %d connections, want 1", n)
	}
}
