package backend

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// newTestClient is New of c with what it leaves unset at the defaults the
// aggregator's configuration gives a backend at load
// (config.Backend.WithDefaults): protocol auto, the timeout and input
// wait, and the token cache bounds of its auth mode.
func newTestClient(c Config) *Client { return newTestClientLogging(c, nil) }

// newTestClientLogging is newTestClient logging to log (nil: the default
// logger).
func newTestClientLogging(c Config, log *slog.Logger) *Client {
	d := config.Backend{Protocol: c.Protocol, Timeout: config.Duration(c.Timeout), InputWait: config.Duration(c.InputWait),
		Auth: config.BackendAuth{Mode: c.Auth.Mode, CacheEntries: c.Auth.CacheEntries, RefreshBefore: config.Duration(c.Auth.RefreshBefore)}}.WithDefaults()
	c.Protocol, c.Timeout, c.InputWait = d.Protocol, time.Duration(d.Timeout), time.Duration(d.InputWait)
	c.Auth.CacheEntries, c.Auth.RefreshBefore = d.Auth.CacheEntries, time.Duration(d.Auth.RefreshBefore)
	return New(c, nil, log)
}

func TestHealthStates(t *testing.T) {
	var changes []string
	c := newTestClient(Config{Name: "a", URL: "http://127.0.0.1:1"})
	c.SetHealthPolicy(HealthPolicy{DegradedAfter: time.Second, UnhealthyAfter: 2}, func(prev, now State, _ bool) {
		changes = append(changes, prev.String()+">"+now.String())
	})
	c.health.success(time.Millisecond, nil)
	c.health.success(2*time.Second, nil)
	c.health.failure("boom", FailureUnavailable)
	if s := c.Status(); s.State != Degraded || s.LastError != "boom" {
		t.Fatalf("after one failure: %+v", s)
	}
	c.health.failure("boom again", FailureUnavailable)
	c.health.success(time.Millisecond, &Lists{ProtocolVersion: ProtocolModern})
	want := []string{"unknown>healthy", "healthy>degraded", "degraded>unhealthy", "unhealthy>healthy"}
	if !slices.Equal(changes, want) {
		t.Fatalf("transitions %v, want %v", changes, want)
	}
	if s := c.Status(); s.LastError != "" || s.ProtocolVersion != ProtocolModern || s.LastCheck.IsZero() {
		t.Fatalf("after recovery: %+v", s)
	}
}

func TestUnreachableBackendIsUnavailableAndRedacted(t *testing.T) {
	c := newTestClient(Config{Name: "a", URL: "http://user:pa55word@127.0.0.1:1/mcp?token=s3cret", Timeout: 2 * time.Second})
	defer c.Close()
	_, err := c.ListAll(context.Background())
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	for _, secret := range []string{"pa55word", "s3cret"} {
		if msg := err.Error() + c.Status().LastError; strings.Contains(msg, secret) {
			t.Fatalf("error leaks %q: %s", secret, msg)
		}
	}
	// A credential in the user name alone (https://TOKEN@host) is the
	// whole credential: the user information goes as a whole.
	c = newTestClient(Config{Name: "b", URL: "http://tok3n-in-the-user-name@127.0.0.1:1/mcp", Timeout: 2 * time.Second})
	defer c.Close()
	_, err = c.ListAll(context.Background())
	if msg := err.Error() + c.Status().LastError; !errors.Is(err, ErrUnavailable) || strings.Contains(msg, "tok3n") || !strings.Contains(msg, "127.0.0.1") {
		t.Fatalf("a user-name credential: %s", msg)
	}
	// A key the environment wrote into the path
	// (config.Backend.URLFromEnvironment) goes too, as it is and as the
	// printed URL escapes it.
	for _, key := range []string{"k3y-in-the-path", "k3y in/the path"} {
		c = newTestClient(Config{Name: "c", URL: "http://127.0.0.1:1/api/" + key + "/mcp", URLFromEnvironment: []string{key}, Timeout: 2 * time.Second})
		defer c.Close()
		_, err = c.ListAll(context.Background())
		if msg := err.Error() + c.Status().LastError; !errors.Is(err, ErrUnavailable) || strings.Contains(msg, "k3y") || !strings.Contains(msg, "/api/[redacted]/mcp") {
			t.Fatalf("a key in the path: %s", msg)
		}
	}
}

// TestBackendURLsShownWithoutSecrets: a backend's URL as operators see it
// (ListBackends) keeps no user info, no query value, no fragment (the
// fragment once stayed) and no key the environment wrote into its path;
// a host and port from the environment stay, as does a short path.
func TestBackendURLsShownWithoutSecrets(t *testing.T) {
	for _, tc := range []struct {
		url             string
		fromEnvironment []string
		want            string
	}{
		{"https://user:pw@mcp.example.com/mcp?token=s3cret#key=s3cret", nil, "https://mcp.example.com/mcp?redacted"},
		{"http://127.0.0.1:8080/mcp", nil, "http://127.0.0.1:8080/mcp"},
		{"https://mcp.example.com/mcp#s3cret", nil, "https://mcp.example.com/mcp"},
		{"https://mcp.example.com/api/s/k3y-of-zap/mcp", []string{"k3y-of-zap"}, "https://mcp.example.com/api/s/[redacted]/mcp"},
		// Written as it is, a key the URL's printing escapes: a space, a
		// letter outside ASCII (a slash and a comma it leaves alone).
		{"https://mcp.example.com/api/k3y/with space1/mcp", []string{"k3y/with space1"}, "https://mcp.example.com/api/[redacted]/mcp"},
		{"https://mcp.example.com/api/clé,secrète123/mcp", []string{"clé,secrète123"}, "https://mcp.example.com/api/[redacted]/mcp"},
		// Written escaped, as a key holding a slash must be.
		{"https://mcp.example.com/api/abc%2Fdef12345/mcp", []string{"abc%2Fdef12345"}, "https://mcp.example.com/api/[redacted]/mcp"},
		// url: ${ZAP_URL}: the whole URL from a secret, the path with it.
		{"https://mcp.example.com/api/s/k3y-of-zap/mcp", []string{"https://mcp.example.com/api/s/k3y-of-zap/mcp"}, "https://mcp.example.com[redacted]"},
		// A value reaching into the path from before it or past it:
		// url: ${BASE}/mcp, https://${HOST_AND_PREFIX}/mcp,
		// https://mcp.example.com/api/${KEY_AND_REST}.
		{"http://127.0.0.1:1/api/k3y12345678/mcp", []string{"http://127.0.0.1:1/api/k3y12345678"}, "http://127.0.0.1:1[redacted]/mcp"},
		{"https://mcp.example.com/api/k3y12345678/mcp", []string{"mcp.example.com/api/k3y12345678"}, "https://mcp.example.com[redacted]/mcp"},
		{"https://mcp.example.com/api/k3y12345678/mcp?tenant=acme", []string{"k3y12345678/mcp?tenant=acme"}, "https://mcp.example.com/api/[redacted]?redacted"},
		// url: http://${HOST}:${PORT}/mcp, and url: ${URL} whose path is short.
		{"http://mcp-server.tools.svc:8080/mcp", []string{"mcp-server.tools.svc", "8080"}, "http://mcp-server.tools.svc:8080/mcp"},
		{"http://mcp-server.tools.svc:8080/mcp", []string{"http://mcp-server.tools.svc:8080/mcp"}, "http://mcp-server.tools.svc:8080/mcp"},
	} {
		c := newTestClient(Config{Name: "a", URL: tc.url, URLFromEnvironment: tc.fromEnvironment})
		if got := c.ShownURL(); got != tc.want {
			t.Errorf("ShownURL of %q = %q, want %q", tc.url, got, tc.want)
		}
		c.Close()
	}
}
