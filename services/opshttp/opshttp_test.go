package opshttp_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/switchboard-mcp/switchboard/services/opshttp"
)

func TestEndpointsAndShutdown(t *testing.T) {
	var ready atomic.Bool
	reg := prometheus.NewRegistry()
	counter := prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_test_total", Help: "test"})
	reg.MustRegister(counter)
	counter.Inc()
	h := opshttp.Handler(func() error {
		if !ready.Load() {
			return errors.New("catalog not built yet")
		}
		return nil
	}, reg)

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		opshttp.Serve(ctx, lis, h, []string{"ops.example"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		close(stopped)
	}()
	base := "http://" + lis.Addr().String()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz = %d", code)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "catalog not built yet") {
		t.Fatalf("/readyz before ready = %d %q", code, body)
	}
	ready.Store(true)
	if code, _ := get("/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz when ready = %d", code)
	}
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "switchboard_test_total 1") {
		t.Fatalf("/metrics = %d %q", code, body)
	}

	cancel()
	<-stopped
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("server still answers after shutdown")
	}
}

// serve starts h on a loopback port and returns its base URL; the server
// stops with the test.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		opshttp.Serve(ctx, lis, h, []string{"ops.example"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		close(stopped)
	}()
	t.Cleanup(func() { cancel(); <-stopped })
	return "http://" + lis.Addr().String()
}

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

var pprofPaths = []string{
	"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/allocs", "/debug/pprof/goroutine?debug=1",
	"/debug/pprof/cmdline", "/debug/pprof/symbol", "/debug/pprof/profile?seconds=1", "/debug/pprof/trace?seconds=1",
}

// Without the option, and with it false, no profile is served: every
// pprof path answers 404, while the other endpoints keep working.
func TestPprofOffByDefault(t *testing.T) {
	ready := func() error { return nil }
	for name, h := range map[string]http.Handler{
		"no option":    opshttp.Handler(ready, prometheus.NewRegistry()),
		"Pprof(false)": opshttp.Handler(ready, prometheus.NewRegistry(), opshttp.Pprof(false)),
	} {
		base := serve(t, h)
		for _, p := range pprofPaths {
			if code, _ := get(t, base+p); code != http.StatusNotFound {
				t.Errorf("%s: GET %s = %d, want 404", name, p, code)
			}
		}
		if code, _ := get(t, base+"/healthz"); code != http.StatusOK {
			t.Errorf("%s: /healthz = %d", name, code)
		}
	}
}

// With Pprof(true) the index lists the profiles, and a CPU profile and a
// heap profile come back in the gzipped protobuf format go tool pprof
// reads.
func TestPprofOn(t *testing.T) {
	base := serve(t, opshttp.Handler(func() error { return nil }, prometheus.NewRegistry(), opshttp.Pprof(true)))
	code, body := get(t, base+"/debug/pprof/")
	if code != http.StatusOK || !strings.Contains(string(body), "allocs") || !strings.Contains(string(body), "goroutine") {
		t.Fatalf("/debug/pprof/ = %d %q", code, body)
	}
	for _, p := range []string{"/debug/pprof/profile?seconds=1", "/debug/pprof/allocs", "/debug/pprof/heap?seconds=1"} {
		code, body := get(t, base+p)
		// A profile is gzipped protobuf: it starts with the gzip magic.
		if code != http.StatusOK || len(body) < 2 || body[0] != 0x1f || body[1] != 0x8b {
			t.Errorf("GET %s = %d, %d bytes starting %x; want 200 and a gzipped profile", p, code, len(body), body[:min(len(body), 4)])
		}
	}
	if code, body := get(t, base+"/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(string(body), "goroutine profile:") {
		t.Errorf("goroutine?debug=1 = %d %q", code, body)
	}
	if code, _ := get(t, base+"/debug/pprof/no-such-profile"); code != http.StatusNotFound {
		t.Errorf("an unknown profile = %d, want 404", code)
	}
	// POST is only for symbol lookups; a POST elsewhere is refused.
	resp, err := http.Post(base+"/debug/pprof/profile?seconds=1", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /debug/pprof/profile = %d, want 405", resp.StatusCode)
	}
}

// fakeHealth answers Check with a fixed status or error.
type fakeHealth struct {
	healthpb.HealthClient
	status healthpb.HealthCheckResponse_ServingStatus
	err    error
}

func (f fakeHealth) Check(context.Context, *healthpb.HealthCheckRequest, ...grpc.CallOption) (*healthpb.HealthCheckResponse, error) {
	return &healthpb.HealthCheckResponse{Status: f.status}, f.err
}

func TestGRPCServing(t *testing.T) {
	for _, tc := range []struct {
		health fakeHealth
		ready  bool
	}{
		{fakeHealth{status: healthpb.HealthCheckResponse_SERVING}, true},
		{fakeHealth{status: healthpb.HealthCheckResponse_NOT_SERVING}, false},
		{fakeHealth{err: errors.New("connection refused")}, false},
	} {
		err := opshttp.GRPCServing(tc.health, "aggregator")()
		if (err == nil) != tc.ready {
			t.Errorf("%+v: ready error %v, want ready %v", tc.health, err, tc.ready)
		}
		if err != nil && err.Error() != "aggregator not ready" {
			t.Errorf("error %q must name the dependency and nothing else", err)
		}
	}
}

// A request whose body never arrives is answered, on any route, once the
// body's bound passes: a POST to /healthz with a Content-Length and no
// body once kept its connection and a goroutine for good, on every
// service's ops port, needing no credential.
func TestBodyThatNeverComesIsAnswered(t *testing.T) {
	defer opshttp.SetBodyTimeout(200 * time.Millisecond)()
	base := serve(t, opshttp.Handler(func() error { return nil }, prometheus.NewRegistry()))
	conn := sendRaw(t, strings.TrimPrefix(base, "http://"), "POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\nx")
	// The answer, or the connection closed, either way not held.
	if _, err := io.ReadAll(conn); err != nil {
		t.Fatalf("the connection of a body that never came is still held: %v", err)
	}
}

// A request refused before its body is read, whose client waits for
// 100 Continue before sending the body, gets its refusal at once, not
// when the body's bound passes: a wrapper around the body once hid from
// net/http that nothing was read, and it read the body the client never
// sends.
func TestRefusalOfAnExpectedBodyIsAtOnce(t *testing.T) {
	refuse := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: opshttp.BoundBodies(refuse, time.Minute)}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	conn := sendRaw(t, lis.Addr().String(), "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the refusal: %v %v, want 401 at once", resp, err)
	}
}

// sendRaw writes request to a new connection to addr, which it returns
// with 10 s to read the answer in; the test closes it.
func sendRaw(t *testing.T, addr, request string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	return conn
}
