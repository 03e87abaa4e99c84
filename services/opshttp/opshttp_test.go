package opshttp_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

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
		opshttp.Serve(ctx, lis, h, slog.New(slog.NewTextHandler(io.Discard, nil)))
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
