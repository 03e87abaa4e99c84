package lifecycle_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/lifecycle"
)

// A stream that never ends must not keep the server from stopping: after
// the grace period it is cut, and ServeHTTP returns nil.
func TestServeHTTPCutsStreamsAfterGrace(t *testing.T) {
	streaming := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		close(streaming)
		<-r.Context().Done()
	})}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lifecycle.ServeHTTP(ctx, srv, lis, 50*time.Millisecond) }()

	resp, err := http.Get("http://" + lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-streaming
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeHTTP = %v, want nil after shutdown", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeHTTP did not return after the grace period")
	}
}

// A listener that fails makes ServeHTTP return the error at once.
func TestServeHTTPReturnsServeError(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis.Close()
	if err := lifecycle.ServeHTTP(context.Background(), &http.Server{}, lis, time.Second); err == nil {
		t.Fatal("ServeHTTP on a closed listener returned nil")
	}
}
