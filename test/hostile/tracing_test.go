package hostile

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// backendRecorder sits in front of a demo backend and records every
// request the aggregator sends it: what the backend receives.
type backendRecorder struct {
	mu   sync.Mutex
	seen []recorded
	srv  *httptest.Server
}

type recorded struct {
	header http.Header
	body   []byte
}

func newBackendRecorder(t *testing.T, backendURL string) *backendRecorder {
	t.Helper()
	u, err := url.Parse(backendURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	proxy.FlushInterval = -1 // SSE answers pass as they come
	rec := &backendRecorder{}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec.mu.Lock()
		rec.seen = append(rec.seen, recorded{header: r.Header.Clone(), body: body})
		rec.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

// requests returns the recorded requests whose body contains marker.
func (b *backendRecorder) requests(marker string) []recorded {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []recorded
	for _, r := range b.seen {
		if marker == "" || bytes.Contains(r.body, []byte(marker)) {
			out = append(out, r)
		}
	}
	return out
}

// spanCollector is an OTLP/gRPC trace collector in the test process; it
// records the service and trace id of every exported span.
type spanCollector struct {
	coltracepb.UnimplementedTraceServiceServer
	addr  string
	mu    sync.Mutex
	spans []exportedSpan
}

type exportedSpan struct{ service, traceID, name string }

func newSpanCollector(t *testing.T) *spanCollector {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &spanCollector{addr: lis.Addr().String()}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, c)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return c
}

func (c *spanCollector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				c.spans = append(c.spans, exportedSpan{service: service, traceID: hex.EncodeToString(sp.GetTraceId()), name: sp.GetName()})
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// services returns the services that exported a span of trace.
func (c *spanCollector) services(trace string) map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]bool{}
	for _, s := range c.spans {
		if s.traceID == trace {
			out[s.service] = true
		}
	}
	return out
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// clientTrace is the trace context a client sends: a sampled traceparent,
// a tracestate and baggage carrying marker.
type clientTrace struct{ traceID, marker string }

func newClientTrace(t *testing.T) clientTrace {
	return clientTrace{traceID: randomHex(t, 16), marker: "client-secret-" + randomHex(t, 6)}
}

func (ct clientTrace) headers() []string {
	return []string{
		"traceparent", "00-" + ct.traceID + "-" + strings.Repeat("ab", 8) + "-01",
		"tracestate", "vendor=" + ct.marker,
		"baggage", "user.secret=" + ct.marker + ",tenant=" + ct.marker,
	}
}

// callEcho makes a Modern and a Legacy tools/call of weather_forecast
// carrying ct, with ct's marker as the city so the backend's requests can
// be told apart, and returns the marker of each.
func callEcho(t *testing.T, c *client, ct clientTrace) []string {
	t.Helper()
	modern := ct.marker + "-modern"
	meta := `,"traceparent":"00-` + ct.traceID + `-` + strings.Repeat("cd", 8) + `-01","baggage":"meta.secret=` + ct.marker + `"`
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{` + strings.TrimSuffix(modernMeta, "}") + meta + `},"name":"weather_forecast","arguments":{"city":"` + modern + `"}}}`)
	hs := anonymous("tools/call", append([]string{"Mcp-Name", "weather_forecast"}, ct.headers()...)...)
	if r := c.do(t, post("/mcp", hs, body)); r.status != http.StatusOK || !strings.Contains(string(r.body), modern) {
		t.Fatalf("Modern call: %d %s", r.status, r.body)
	}
	legacy := ct.marker + "-legacy"
	init := c.do(t, request{header: legacyHeaders("", "", "Authorization", drop, "Mcp-Protocol-Version", drop),
		body: legacyBody("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"hostile","version":"1"}}`)})
	session := init.header.Get("Mcp-Session-Id")
	if init.status != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d %s", init.status, init.body)
	}
	r := c.do(t, request{header: legacyHeaders("", session, append([]string{"Authorization", drop}, ct.headers()...)...),
		body: legacyBody("tools/call", `{"name":"weather_forecast","arguments":{"city":"`+legacy+`"},"_meta":{"baggage":"meta.secret=`+ct.marker+`"}}`)})
	if r.status != http.StatusOK || !strings.Contains(string(r.body), legacy) {
		t.Fatalf("Legacy call: %d %s", r.status, r.body)
	}
	return []string{modern, legacy}
}

// backendTraceparent returns the traceparent the backend received with
// the request carrying marker.
func backendTraceparent(t *testing.T, rec *backendRecorder, marker string) (traceID, flags string) {
	t.Helper()
	reqs := rec.requests(marker)
	if len(reqs) != 1 {
		t.Fatalf("%d backend requests carry %s, want 1", len(reqs), marker)
	}
	tp := reqs[0].header.Get("traceparent")
	parts := strings.Split(tp, "-")
	if len(parts) != 4 {
		t.Fatalf("backend request for %s: traceparent %q", marker, tp)
	}
	return parts[1], parts[3]
}

// wantNoClientBaggage fails when anything the backend received carries
// the client's marker: no baggage, nothing from _meta, and no tracestate
// unless the client's trace is trusted (tracestate belongs to the
// traceparent it came with).
func wantNoClientBaggage(t *testing.T, rec *backendRecorder, marker string, trusted bool) {
	t.Helper()
	for _, r := range rec.requests("") {
		if v := r.header.Values("baggage"); len(v) > 0 {
			t.Errorf("the backend received baggage %q", v)
		}
		for name, values := range r.header {
			for _, v := range values {
				if strings.Contains(v, marker) && !(trusted && http.CanonicalHeaderKey(name) == "Tracestate") {
					t.Errorf("the backend received the client's %s: %q", name, v)
				}
			}
		}
		if bytes.Contains(r.body, []byte("secret="+marker)) {
			t.Errorf("the backend received the client's baggage in a body: %.300s", r.body)
		}
	}
}

// TestClientTraceContext: with tracing exported and new traces never
// sampled (sampleRatio 0), a client's sampled traceparent does not make
// the gateway or the aggregator record its request, the backend sees a
// trace of the gateway's own (not sampled), and no baggage or tracestate
// a client sent reaches the backend. With
// gateway.http.trustClientTraceparent the client's trace is continued,
// sampled as it says: the test's proof that it would see forced sampling.
func TestClientTraceContext(t *testing.T) {
	collector := newSpanCollector(t)
	var rec *backendRecorder
	never := 0.0
	var port string
	cluster := harness.Start(t, harness.Options{
		Backends:  []harness.Backend{{Name: "weather", Spec: weatherBackend}},
		NoIndexer: true,
		Configure: func(cfg *config.Config) {
			_, port, _ = net.SplitHostPort(cfg.Gateway.Listen)
			cfg.Logging.Level = "info"
			cfg.Telemetry = config.Telemetry{OTLPEndpoint: collector.addr, OTLPInsecure: true, SampleRatio: &never}
			rec = newBackendRecorder(t, cfg.Aggregator.Backends[0].URL)
			cfg.Aggregator.Backends[0].URL = rec.srv.URL + "/mcp"
		},
	})
	c := newClient(&stack{base: "http://127.0.0.1:" + port})

	untrusted := newClientTrace(t)
	for _, marker := range callEcho(t, c, untrusted) {
		traceID, flags := backendTraceparent(t, rec, marker)
		if traceID == untrusted.traceID {
			t.Errorf("%s: the backend received the client's trace id", marker)
		}
		if flags != "00" {
			t.Errorf("%s: the backend received trace flags %s: the client's sampled flag forced sampling", marker, flags)
		}
	}
	wantNoClientBaggage(t, rec, untrusted.marker, false)
	if t.Failed() {
		return
	}

	// The same requests to a gateway that trusts its clients' traceparent.
	cluster.Gateway.Stop()
	cluster.Config.Gateway.HTTP.TrustClientTraceparent = true
	harness.WriteConfig(t, filepath.Dir(cluster.ConfigPath), cluster.Config)
	cluster.Gateway.Restart()
	trusted := newClientTrace(t)
	for _, marker := range callEcho(t, c, trusted) {
		if traceID, flags := backendTraceparent(t, rec, marker); traceID != trusted.traceID || flags != "01" {
			t.Errorf("%s, trusted: the backend received trace %s flags %s, want the client's %s, 01", marker, traceID, flags, trusted.traceID)
		}
	}
	wantNoClientBaggage(t, rec, trusted.marker, true)
	testkit.Eventually(t, "the trusted client's sampled trace exported by the gateway and the aggregator", 60*time.Second, func() error {
		if got := collector.services(trusted.traceID); !got["switchboard-gateway"] || !got["switchboard-aggregator"] {
			return fmt.Errorf("exported by %v", got)
		}
		return nil
	})
	// Both services export in order, so the untrusted trace would be in
	// the collector by now had anything sampled it.
	if got := collector.services(untrusted.traceID); len(got) > 0 {
		t.Errorf("spans of the untrusted client's trace were exported by %v", got)
	}
}
