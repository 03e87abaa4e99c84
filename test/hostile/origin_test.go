package hostile

import (
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// originCase is one request of the Origin and Host tests and the status
// it must get; check, when set, asserts more about the answer.
type originCase struct {
	name   string
	req    request
	status int
	check  func(t *testing.T, r response)
}

func runOriginCases(t *testing.T, c *client, cases []originCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := c.do(t, tc.req)
			t.Logf("answer: %d %v %.200s", r.status, r.header, r.body)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d; body %.300q", r.status, tc.status, r.body)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

// startEdgeCluster runs a demo backend, the aggregator and the gateway
// (no indexer) with the gateway configured by configure, and returns a
// client that talks to the gateway at its loopback address whatever it is
// bound to.
func startEdgeCluster(t *testing.T, configure func(cfg *config.Config, port string)) *client {
	t.Helper()
	var port string
	harness.Start(t, harness.Options{
		Backends:  []harness.Backend{{Name: "weather", Spec: weatherBackend}},
		NoIndexer: true,
		Configure: func(cfg *config.Config) {
			_, p, err := net.SplitHostPort(cfg.Gateway.Listen)
			if err != nil {
				t.Fatal(err)
			}
			port = p
			cfg.Logging.Level = "info"
			configure(cfg, port)
		},
	})
	return newClient(&stack{base: "http://127.0.0.1:" + port})
}

// anonymous are the headers of a conforming Modern request without a
// credential (anonymous mode), with overrides.
func anonymous(method string, overrides ...string) []header {
	return modernHeaders("", method, append([]string{"Authorization", drop}, overrides...)...)
}

// preflight is a browser's CORS preflight for a Modern POST from origin.
func preflight(path, origin string) request {
	return request{method: http.MethodOptions, path: path, header: []header{
		{"Origin", origin},
		{"Access-Control-Request-Method", "POST"},
		{"Access-Control-Request-Headers", "authorization,content-type,last-event-id,mcp-method,mcp-name,mcp-param-region,mcp-protocol-version,mcp-session-id"},
	}}
}

// wantCORS asserts that r lets a browser at origin read it, including the
// headers a client needs (the session id, the authentication challenge).
func wantCORS(origin string) func(t *testing.T, r response) {
	return func(t *testing.T, r response) {
		t.Helper()
		if got := r.header.Get("Access-Control-Allow-Origin"); got != origin {
			t.Errorf("Access-Control-Allow-Origin %q, want %q", got, origin)
		}
		if !headerListHas(r.header.Values("Vary"), "Origin") {
			t.Errorf("Vary %q lacks Origin", r.header.Values("Vary"))
		}
		exposed := r.header.Values("Access-Control-Expose-Headers")
		for _, h := range []string{"Mcp-Session-Id", "WWW-Authenticate"} {
			if !headerListHas(exposed, h) {
				t.Errorf("Access-Control-Expose-Headers %q lacks %s", exposed, h)
			}
		}
	}
}

// wantPreflight asserts a successful preflight answer for origin: the
// methods MCP uses and every header preflight asked for.
func wantPreflight(origin string) func(t *testing.T, r response) {
	return func(t *testing.T, r response) {
		t.Helper()
		if got := r.header.Get("Access-Control-Allow-Origin"); got != origin {
			t.Errorf("Access-Control-Allow-Origin %q, want %q", got, origin)
		}
		methods := r.header.Values("Access-Control-Allow-Methods")
		for _, m := range []string{"POST", "GET", "DELETE"} {
			if !headerListHas(methods, m) {
				t.Errorf("Access-Control-Allow-Methods %q lacks %s", methods, m)
			}
		}
		allowed := r.header.Values("Access-Control-Allow-Headers")
		for _, h := range []string{"Authorization", "Content-Type", "Last-Event-ID", "Mcp-Method", "Mcp-Name", "Mcp-Param-Region", "MCP-Protocol-Version", "Mcp-Session-Id"} {
			if !headerListHas(allowed, h) {
				t.Errorf("Access-Control-Allow-Headers %q lacks %s", allowed, h)
			}
		}
		if len(r.body) != 0 {
			t.Errorf("preflight answer with a body: %q", r.body)
		}
	}
}

// headerListHas reports whether a comma-separated header (possibly
// repeated) lists name, case-insensitively.
func headerListHas(values []string, name string) bool {
	for _, v := range values {
		for _, item := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(item), name) {
				return true
			}
		}
	}
	return false
}

// wantResource asserts RFC 9728 metadata naming resource.
func wantResource(resource string) func(t *testing.T, r response) {
	return func(t *testing.T, r response) {
		t.Helper()
		var meta struct {
			Resource string `json:"resource"`
		}
		if err := json.Unmarshal(r.body, &meta); err != nil || meta.Resource != resource {
			t.Errorf("metadata resource %q (%v), want %q", meta.Resource, err, resource)
		}
	}
}

// wantChallenge asserts a 401's WWW-Authenticate names the metadata URL.
func wantChallenge(metadataURL string) func(t *testing.T, r response) {
	return func(t *testing.T, r response) {
		t.Helper()
		got := r.header.Get("WWW-Authenticate")
		if !strings.Contains(got, `resource_metadata="`+metadataURL+`"`) {
			t.Errorf("WWW-Authenticate %q does not point at %s", got, metadataURL)
		}
	}
}

func both(checks ...func(t *testing.T, r response)) func(t *testing.T, r response) {
	return func(t *testing.T, r response) {
		t.Helper()
		for _, c := range checks {
			c(t, r)
		}
	}
}

// TestOriginOnEveryInterface: an anonymous gateway bound to every
// interface (0.0.0.0, as in a container) serves a browser only from an
// origin it was told to allow. A page that rebinds its own name to the
// gateway's address sends a Host and an Origin that agree with each other;
// before this rule that pair was served, so any web page a user of the
// network opened could use the gateway.
func TestOriginOnEveryInterface(t *testing.T) {
	const app = "https://app.example"
	var port string
	c := startEdgeCluster(t, func(cfg *config.Config, p string) {
		port = p
		cfg.Gateway.Listen = "0.0.0.0:" + p
		cfg.Gateway.HTTP.AllowedOrigins = []string{app}
	})
	self := "http://127.0.0.1:" + port
	rebound := "evil.example:" + port
	tl := "tools/list"
	body := modernBody(tl, "")
	runOriginCases(t, c, []originCase{
		{name: "no Origin (not a browser)", req: post("/mcp", anonymous(tl), body), status: 200},
		{name: "rebound Host with its own Origin", req: post("/mcp", anonymous(tl, "Host", rebound, "Origin", "http://"+rebound), body), status: 403},
		{name: "rebound Host with its own Origin, raw view", req: post("/mcp/raw", anonymous(tl, "Host", rebound, "Origin", "http://"+rebound), body), status: 403},
		{name: "rebound Host with its own Origin, optimized view", req: post("/mcp/optimized", anonymous(tl, "Host", rebound, "Origin", "http://"+rebound), body), status: 403},
		{name: "rebound Legacy DELETE", req: request{method: http.MethodDelete, header: legacyHeaders("", "x", "Authorization", drop, "Host", rebound, "Origin", "http://"+rebound)}, status: 403},
		{name: "rebound Legacy GET", req: request{method: http.MethodGet, header: legacyHeaders("", "x", "Authorization", drop, "Host", rebound, "Origin", "http://"+rebound)}, status: 403},
		{name: "the gateway's own address as Origin", req: post("/mcp", anonymous(tl, "Origin", self), body), status: 403},
		{name: "Origin null", req: post("/mcp", anonymous(tl, "Origin", "null"), body), status: 403},
		{name: "allowed Origin", req: post("/mcp", anonymous(tl, "Origin", app), body), status: 200, check: wantCORS(app)},
		{name: "allowed Origin, another case", req: post("/mcp", anonymous(tl, "Origin", "HTTPS://APP.example"), body), status: 200},
		{name: "allowed host, other scheme", req: post("/mcp", anonymous(tl, "Origin", "http://app.example"), body), status: 403},
		{name: "allowed host, other port", req: post("/mcp", anonymous(tl, "Origin", "https://app.example:8443"), body), status: 403},
		{name: "preflight from the allowed Origin", req: preflight("/mcp", app), status: 204, check: wantPreflight(app)},
		{name: "preflight from the allowed Origin, raw view", req: preflight("/mcp/raw", app), status: 204, check: wantPreflight(app)},
		{name: "preflight from a rebound page", req: preflight("/mcp", "http://"+rebound), status: 403},
		{name: "metadata of /mcp", req: request{method: http.MethodGet, path: "/.well-known/oauth-protected-resource/mcp"}, status: 200, check: wantResource(self + "/mcp")},
		{name: "metadata of /mcp/raw", req: request{method: http.MethodGet, path: "/.well-known/oauth-protected-resource/mcp/raw"}, status: 200, check: wantResource(self + "/mcp/raw")},
		{name: "metadata of /mcp/optimized", req: request{method: http.MethodGet, path: "/.well-known/oauth-protected-resource/mcp/optimized"}, status: 200, check: wantResource(self + "/mcp/optimized")},
		{name: "metadata at the root names the origin", req: request{method: http.MethodGet, path: "/.well-known/oauth-protected-resource"}, status: 200, check: wantResource(self)},
		{name: "metadata of no endpoint", req: request{method: http.MethodGet, path: "/.well-known/oauth-protected-resource/elsewhere"}, status: 404},
	})
}

// TestOriginBehindPublicURL: with gateway.publicURL set, the Host must be
// the public name (or one of http.allowedHosts), the public origin is the
// only browser origin allowed without listing it, and both are checked
// before authentication, as is a preflight. The metadata and the
// authentication challenge name each endpoint's own resource.
func TestOriginBehindPublicURL(t *testing.T) {
	const public = "https://mcp.example.com"
	var port string
	c := startEdgeCluster(t, func(cfg *config.Config, p string) {
		port = p
		cfg.Gateway.PublicURL = public
		cfg.Gateway.HTTP.AllowedHosts = []string{"gateway.internal"}
		cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: aliceKey, Subject: "alice"}}}
	})
	tl := "tools/list"
	body := modernBody(tl, "")
	host := "mcp.example.com"
	runOriginCases(t, c, []originCase{
		{name: "public Host", req: post("/mcp", modernHeaders(aliceKey, tl, "Host", host), body), status: 200},
		{name: "allowed Host at any port", req: post("/mcp", modernHeaders(aliceKey, tl, "Host", "gateway.internal:"+port), body), status: 200},
		{name: "the bind address as Host", req: post("/mcp", modernHeaders(aliceKey, tl, "Host", "127.0.0.1:"+port), body), status: 403},
		{name: "localhost as Host", req: post("/mcp", modernHeaders(aliceKey, tl, "Host", "localhost:"+port), body), status: 403},
		{name: "foreign Host", req: post("/mcp", modernHeaders(aliceKey, tl, "Host", "evil.example"), body), status: 403},
		{name: "public Origin, no credential", req: post("/mcp", modernHeaders(aliceKey, tl, "Host", host, "Origin", public, "Authorization", drop), body), status: 401,
			check: both(wantCORS(public), wantChallenge(public+"/.well-known/oauth-protected-resource/mcp"))},
		{name: "public Origin with its default port", req: post("/mcp", modernHeaders(aliceKey, tl, "Host", host, "Origin", public+":443"), body), status: 200, check: wantCORS(public + ":443")},
		{name: "public host, other scheme", req: post("/mcp", modernHeaders(aliceKey, tl, "Host", host, "Origin", "http://"+host), body), status: 403},
		{name: "foreign Origin, no credential: refused before authentication", req: post("/mcp", modernHeaders(aliceKey, tl, "Host", host, "Origin", "https://evil.example", "Authorization", drop), body), status: 403},
		{name: "challenge of /mcp/raw", req: post("/mcp/raw", modernHeaders(aliceKey, tl, "Host", host, "Authorization", drop), body), status: 401,
			check: wantChallenge(public + "/.well-known/oauth-protected-resource/mcp/raw")},
		{name: "challenge of /mcp/optimized", req: post("/mcp/optimized", modernHeaders(aliceKey, tl, "Host", host, "Authorization", "Bearer wrong"), body), status: 401,
			check: wantChallenge(public + "/.well-known/oauth-protected-resource/mcp/optimized")},
		{name: "preflight without a credential", req: withHost(preflight("/mcp", public), host), status: 204, check: wantPreflight(public)},
		{name: "preflight from a foreign Origin", req: withHost(preflight("/mcp", "https://evil.example"), host), status: 403},
		{name: "preflight to a foreign Host", req: withHost(preflight("/mcp", public), "evil.example"), status: 403},
		{name: "metadata of /mcp/raw", req: request{method: http.MethodGet, path: "/.well-known/oauth-protected-resource/mcp/raw", header: []header{{"Host", host}}}, status: 200,
			check: wantResource(public + "/mcp/raw")},
		{name: "metadata of /mcp/optimized", req: request{method: http.MethodGet, path: "/.well-known/oauth-protected-resource/mcp/optimized", header: []header{{"Host", host}}}, status: 200,
			check: wantResource(public + "/mcp/optimized")},
		{name: "metadata at the root names the origin", req: request{method: http.MethodGet, path: "/.well-known/oauth-protected-resource", header: []header{{"Host", host}}}, status: 200,
			check: wantResource(public)},
	})
}

func withHost(r request, host string) request {
	r.header = append(slices.Clone(r.header), header{"Host", host})
	return r
}
