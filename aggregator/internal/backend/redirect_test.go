package backend

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestSameOrigin(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"http://h/mcp", "http://h/other?x=1", true},
		{"http://H:80/mcp", "http://h/mcp", true},
		{"https://h/mcp", "https://h:443/x", true},
		{"https://h/mcp", "http://h/mcp", false},
		{"http://h:8080/mcp", "http://h:8081/mcp", false},
		{"http://h/mcp", "http://h.evil/mcp", false},
		{"http://h/mcp", "http://user@h2/mcp", false},
	} {
		a, _ := url.Parse(tc.a)
		b, _ := url.Parse(tc.b)
		if got := sameOrigin(a, b); got != tc.same {
			t.Errorf("sameOrigin(%s, %s) = %v", tc.a, tc.b, got)
		}
	}
}

// A backend redirecting to another origin: nothing reaches that origin,
// from the session's handshake or a probe, and the failure is
// ErrRedirected with a text that names no URL.
func TestCrossOriginRedirectIsNotFollowed(t *testing.T) {
	var reached atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
	}))
	defer other.Close()
	target := other.URL + "/steal?token=target-secret"
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target, http.StatusTemporaryRedirect)
	}))
	defer backend.Close()

	c := newTestClient(Config{Name: "b", URL: backend.URL + "/mcp?key=url-secret", Headers: map[string]string{"Authorization": "Bearer header-secret"}, Timeout: 5 * time.Second})
	defer c.Close()
	ctx := context.Background()
	_, err := c.ListAll(ctx)
	if !errors.Is(err, ErrRedirected) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("ListAll: %v, want ErrRedirected", err)
	}
	if err := c.Probe(ctx, 5*time.Second); !errors.Is(err, ErrRedirected) {
		t.Fatalf("Probe: %v, want ErrRedirected", err)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("%d requests reached the other origin", n)
	}
	st := c.Status()
	for _, leak := range []string{"target-secret", "url-secret", "header-secret", other.URL} {
		if strings.Contains(st.LastError, leak) || strings.Contains(err.Error(), leak) {
			t.Errorf("failure text %q / %q shows %q", st.LastError, err, leak)
		}
	}
	if !strings.Contains(st.LastError, "redirect") {
		t.Errorf("last error %q does not say redirect", st.LastError)
	}
}

// The kind of a failure survives classify: what ListBackends tells
// callers that are not operators.
func TestFailureKinds(t *testing.T) {
	refused := httptest.NewServer(http.NotFoundHandler())
	url := refused.URL + "/mcp"
	refused.Close() // nothing listens there any more
	c := newTestClient(Config{Name: "down", URL: url, Timeout: 5 * time.Second})
	defer c.Close()
	if _, err := c.ListAll(context.Background()); err == nil {
		t.Fatal("ListAll of a backend that is not there succeeded")
	}
	if got := c.Status().Failure; got != FailureUnreachable {
		t.Errorf("listing a closed port: failure %v (%q), want unreachable", got, c.Status().LastError)
	}
	if err := c.Probe(context.Background(), 5*time.Second); err == nil || c.Status().Failure != FailureUnreachable {
		t.Errorf("probing a closed port: %v, failure %v", err, c.Status().Failure)
	}
	for _, tc := range []struct {
		err  error
		want Failure
	}{
		{nil, FailureNone},
		{refusedRedirect(ErrRedirected), FailureRedirected},
		{ErrTimeout, FailureTimeout},
		{ErrProtocolViolation, FailureProtocol},
		{&ProtocolError{Code: -32603, Message: "x"}, FailureRejected},
		{errors.New("sending \"initialize\": Not Found"), FailureUnavailable},
	} {
		if got := failureOf(tc.err); got != tc.want {
			t.Errorf("failureOf(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
