package isolation

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/devstack"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// redirectStack is an aggregator whose backends all live behind one test
// HTTP server (the backends' origin): some answer with a redirect to
// another origin (a second test server that records whatever reaches it),
// some with a redirect on their own origin to the real demo backend, and
// one ("flip") works until the test makes it redirect elsewhere.
type redirectStack struct {
	cluster *harness.Cluster
	// elsewhere records every request that reached the other origin.
	elsewhere *headerLog
	// atBackend records every request the demo backend got through the
	// backends' origin.
	atBackend *headerLog
	origin    string // the backends' origin, http://127.0.0.1:port
	other     string // the other origin
	flipped   atomic.Bool
}

// Every backend is configured with these headers (the name filled in),
// and the cross-origin ones with a secret in their URL's query too.
const (
	authHeaderValue   = "Bearer backend-secret-%s"
	secretHeaderName  = "X-Backend-Secret"
	secretHeaderValue = "hdr-secret-%s"
	urlSecret         = "url-secret-value"
)

var crossCodes = []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect}

func startRedirectStack(t *testing.T, extra func(*config.Config)) *redirectStack {
	t.Helper()
	demoAddr := harness.FreeAddr(t)
	harness.StartProc(t, "backend:demo", devstack.DemoBackendBin, []string{"--listen", demoAddr, "--name", "demo"}, nil,
		devstack.HTTPOK("http://"+demoAddr+"/healthz"))
	demo := &url.URL{Scheme: "http", Host: demoAddr}

	s := &redirectStack{elsewhere: &headerLog{}, atBackend: &headerLog{}}
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.elsewhere.record(r)
		http.Error(w, "not an MCP server", http.StatusNotFound)
	}))
	t.Cleanup(other.Close)
	s.other = other.URL

	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(demo)
			r.Out.URL.Path = "/mcp"
			r.Out.Host = demoAddr
		},
		FlushInterval: -1,
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		s.atBackend.record(r)
		proxy.ServeHTTP(w, r)
	})
	mux.HandleFunc("/same307/mcp", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/mcp", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/same308/mcp", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, s.origin+"/mcp", http.StatusPermanentRedirect)
	})
	mux.HandleFunc("/flip/mcp", func(w http.ResponseWriter, r *http.Request) {
		if s.flipped.Load() {
			http.Redirect(w, r, s.other+"/flip?"+urlSecret, http.StatusTemporaryRedirect)
			return
		}
		s.atBackend.record(r)
		proxy.ServeHTTP(w, r)
	})
	for _, code := range crossCodes {
		mux.HandleFunc(fmt.Sprintf("/cross%d/mcp", code), func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, fmt.Sprintf("%s/collect/%d", s.other, code), code)
		})
	}
	front := httptest.NewServer(mux)
	t.Cleanup(front.Close)
	s.origin = front.URL

	backend := func(name, path string) config.Backend {
		return config.Backend{Name: name, URL: s.origin + path, Timeout: config.Duration(5 * time.Second), Headers: map[string]string{
			"Authorization":  fmt.Sprintf(authHeaderValue, name),
			secretHeaderName: fmt.Sprintf(secretHeaderValue, name),
		}}
	}
	s.cluster = harness.Start(t, harness.Options{NoIndexer: true, Configure: func(cfg *config.Config) {
		cfg.Aggregator.Backends = []config.Backend{
			backend("same307", "/same307/mcp"),
			backend("same308", "/same308/mcp"),
			backend("flip", "/flip/mcp"),
		}
		for _, code := range crossCodes {
			cfg.Aggregator.Backends = append(cfg.Aggregator.Backends, backend(fmt.Sprintf("cross%d", code), fmt.Sprintf("/cross%d/mcp?key=%s", code, urlSecret)))
		}
		cfg.Aggregator.Health = config.HealthCheck{Interval: config.Duration(200 * time.Millisecond), UnhealthyThreshold: 1}
		if extra != nil {
			extra(cfg)
		}
	}})
	return s
}

// secrets are the texts no error message and no other origin may see.
func (s *redirectStack) secrets() []string {
	out := []string{urlSecret, "backend-secret-", "hdr-secret-"}
	for _, b := range s.cluster.Config.Aggregator.Backends {
		for _, v := range []string{b.Headers["Authorization"], b.Headers[secretHeaderName]} {
			if v != "" {
				out = append(out, v)
			}
		}
	}
	return out
}

// TestBackendRedirects: a backend that redirects to another origin gets no
// request sent there (so the headers configured for it never reach that
// origin), and its failure is reported as a redirect with no secret in the
// text; a redirect on the backend's own origin is followed with the
// configured headers, by the session's requests and the calls alike.
func TestBackendRedirects(t *testing.T) {
	s := startRedirectStack(t, nil)
	agg := aggregatorAs(t, s.cluster.Config.Aggregator.Listen, s.cluster.OperatorToken)

	// Every cross-origin backend has been tried and has failed.
	testkit.Eventually(t, "every cross-origin backend reported failing", svcDeadline, func() error {
		resp, err := agg.ListBackends(callCtx(t), &aggregatorv1.ListBackendsRequest{})
		if err != nil {
			return err
		}
		for _, b := range resp.GetBackends() {
			if strings.HasPrefix(b.GetName(), "cross") && (b.GetLastError() == "" || b.GetHealth() != aggregatorv1.BackendHealth_BACKEND_HEALTH_UNHEALTHY) {
				return fmt.Errorf("%s: %s %q", b.GetName(), b.GetHealth(), b.GetLastError())
			}
		}
		return nil
	})

	t.Run("the other origin receives nothing", func(t *testing.T) {
		for _, h := range s.elsewhere.all() {
			t.Errorf("the other origin got a request with headers %v", h)
		}
	})

	t.Run("the failure says redirect, without secrets", func(t *testing.T) {
		resp, err := agg.ListBackends(callCtx(t), &aggregatorv1.ListBackendsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range resp.GetBackends() {
			if !strings.HasPrefix(b.GetName(), "cross") {
				continue
			}
			if !strings.Contains(b.GetLastError(), "redirect") {
				t.Errorf("%s: last error %q does not say it redirected", b.GetName(), b.GetLastError())
			}
			for _, secret := range s.secrets() {
				if strings.Contains(b.GetLastError(), secret) || strings.Contains(b.GetUrl(), secret) {
					t.Errorf("%s: %q / %q shows the secret %q", b.GetName(), b.GetLastError(), b.GetUrl(), secret)
				}
			}
		}
	})

	t.Run("same-origin redirects keep the configured headers", func(t *testing.T) {
		for _, name := range []string{"same307", "same308"} {
			testkit.Eventually(t, name+" listed", svcDeadline, func() error {
				resp, err := agg.ListTools(callCtx(t), &aggregatorv1.ListToolsRequest{})
				if err != nil {
					return err
				}
				for _, tool := range resp.GetTools() {
					if tool.GetName() == name+"_echo" {
						return nil
					}
				}
				return fmt.Errorf("no %s_echo in %d tools", name, len(resp.GetTools()))
			})
			res, err := agg.CallTool(callCtx(t), &aggregatorv1.CallToolRequest{Name: name + "_echo", ArgumentsJson: `{"text":"through a redirect"}`})
			if err != nil {
				t.Fatalf("call %s_echo through a same-origin redirect: %v", name, err)
			}
			if res.GetIsError() || !strings.Contains(res.GetResultJson(), "through a redirect") {
				t.Errorf("call %s_echo: %s", name, res.GetResultJson())
			}
			auth, secret := fmt.Sprintf(authHeaderValue, name), fmt.Sprintf(secretHeaderValue, name)
			if !slices.ContainsFunc(s.atBackend.all(), func(h http.Header) bool {
				return h.Get("Authorization") == auth && h.Get(secretHeaderName) == secret
			}) {
				t.Errorf("%s: no request reached the backend with its configured headers", name)
			}
		}
	})

	t.Run("a call to a backend that starts redirecting elsewhere", func(t *testing.T) {
		testkit.Eventually(t, "flip_echo callable", svcDeadline, func() error {
			_, err := agg.CallTool(callCtx(t), &aggregatorv1.CallToolRequest{Name: "flip_echo", ArgumentsJson: `{}`})
			return err
		})
		s.flipped.Store(true)
		_, err := agg.CallTool(callCtx(t), &aggregatorv1.CallToolRequest{Name: "flip_echo", ArgumentsJson: `{"text":"hello"}`})
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("call to a backend redirecting elsewhere: %v, want UNAVAILABLE", err)
		}
		msg := status.Convert(err).Message()
		if !strings.Contains(msg, "redirect") {
			t.Errorf("the caller's error %q does not say the backend redirected", msg)
		}
		for _, secret := range append(s.secrets(), strings.TrimPrefix(s.other, "http://")) {
			if strings.Contains(msg, secret) {
				t.Errorf("the caller's error %q shows %q", msg, secret)
			}
		}
		// The health probes meet the redirect too.
		testkit.Eventually(t, "flip reported failing", svcDeadline, func() error {
			resp, err := agg.ListBackends(callCtx(t), &aggregatorv1.ListBackendsRequest{})
			if err != nil {
				return err
			}
			for _, b := range resp.GetBackends() {
				if b.GetName() == "flip" && strings.Contains(b.GetLastError(), "redirect") {
					return nil
				}
			}
			return fmt.Errorf("flip not failing with a redirect: %v", resp.GetBackends())
		})
		for _, h := range s.elsewhere.all() {
			t.Errorf("the other origin got a request with headers %v", h)
		}
	})
}
