package edge

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// TestEdgeProtections checks authentication failures, RFC 9728 metadata,
// Origin and Host validation and the body limit.
func TestEdgeProtections(t *testing.T) {
	b := startBackends(t)
	cfg := testGatewayConfig(b)
	cfg.PublicURL = "https://mcp.example.com"
	cfg.HTTP.MaxBodyBytes = 512
	cfg.HTTP.AllowedOrigins = []string{"https://app.example.com"}
	// With publicURL set the Host must be its host or listed; the test
	// server is at 127.0.0.1.
	cfg.HTTP.AllowedHosts = []string{"127.0.0.1"}
	_, srv := startGateway(t, b, cfg)
	url := srv.URL + "/mcp"
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + modernMeta + `}}`

	// A request with no credential is challenged without an error code
	// (RFC 6750, 3.1); a wrong one as an invalid token.
	for authorization, challenge := range map[string]string{
		"":                 `Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"`,
		"Bearer wrong-key": `Bearer error="invalid_token", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"`,
	} {
		resp := send(t, http.MethodPost, url, modernHeaders("tools/list", "Authorization", authorization), list)
		if resp.status != http.StatusUnauthorized || resp.header.Get("WWW-Authenticate") != challenge {
			t.Fatalf("Authorization %q: %d %q, want %q", authorization, resp.status, resp.header.Get("WWW-Authenticate"), challenge)
		}
	}
	for path, resource := range map[string]string{"": "https://mcp.example.com", "/mcp": "https://mcp.example.com/mcp", "/mcp/raw": "https://mcp.example.com/mcp/raw"} {
		resp := send(t, http.MethodGet, srv.URL+"/.well-known/oauth-protected-resource"+path, nil, "")
		var meta map[string]any
		if json.Unmarshal(resp.body, &meta) != nil || meta["resource"] != resource {
			t.Fatalf("metadata at %q: %s", path, resp.body)
		}
	}

	cases := []struct {
		name   string
		header []string
		status int
	}{
		{"foreign origin", []string{"Origin", "https://evil.example"}, http.StatusForbidden},
		{"allowed origin", []string{"Origin", "https://app.example.com"}, http.StatusOK},
		{"public origin", []string{"Origin", "https://mcp.example.com"}, http.StatusOK},
		{"the server's own address, not listed", []string{"Origin", srv.URL}, http.StatusForbidden},
		{"foreign origin without a credential", []string{"Origin", "https://evil.example", "Authorization", ""}, http.StatusForbidden},
	}
	for _, tc := range cases {
		if resp := send(t, http.MethodPost, url, modernHeaders("tools/list", tc.header...), list); resp.status != tc.status {
			t.Errorf("%s: %d, want %d", tc.name, resp.status, tc.status)
		}
	}
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + modernMeta + `,"pad":"` + strings.Repeat("x", 600) + `"}}`
	if resp := send(t, http.MethodPost, url, modernHeaders("tools/list"), big); resp.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized body: %d", resp.status)
	}
}

// TestLoopbackHostCheck: on a loopback bind, a request whose Host is not a
// loopback name (DNS rebinding) is refused.
func TestLoopbackHostCheck(t *testing.T) {
	b := startBackends(t)
	gw, srv := startGateway(t, b, testGatewayConfig(b))
	gw.loopback = true
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + modernMeta + `}}`
	for host, want := range map[string]int{"attacker.example:80": http.StatusForbidden, "localhost:8080": http.StatusOK, "127.0.0.1": http.StatusOK, "[::1]:9": http.StatusOK} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(list))
		for k, v := range modernHeaders("tools/list") {
			req.Header.Set(k, v)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
}

// TestOIDCModeWiring: in oidc mode the metadata names the issuer as the
// authorization server, and requests without a valid JWT get 401 with the
// metadata pointer (token validation itself is tested in package auth).
func TestOIDCModeWiring(t *testing.T) {
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"keys":[]}`)
	}))
	defer jwks.Close()
	b := startBackends(t)
	cfg := testGatewayConfig(b)
	cfg.Auth = config.GatewayAuth{Mode: "oidc", OIDC: config.OIDC{Issuer: "https://issuer.example", Audience: "switchboard", JWKSURL: jwks.URL}}
	_, srv := startGateway(t, b, cfg)

	resp := send(t, http.MethodGet, srv.URL+"/.well-known/oauth-protected-resource", nil, "")
	// The root document describes the resource without a path (RFC 9728
	// §3.3); each endpoint's is at the well-known path followed by its own.
	var meta struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if json.Unmarshal(resp.body, &meta) != nil || meta.Resource != srv.URL || len(meta.AuthorizationServers) != 1 || meta.AuthorizationServers[0] != "https://issuer.example" {
		t.Fatalf("metadata: %s", resp.body)
	}
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + modernMeta + `}}`
	for _, authorization := range []string{"", "Bearer not.a.jwt", "Bearer alice-key"} {
		resp := send(t, http.MethodPost, srv.URL+"/mcp", modernHeaders("tools/list", "Authorization", authorization), list)
		if resp.status != http.StatusUnauthorized || !strings.Contains(resp.header.Get("WWW-Authenticate"), "resource_metadata=") {
			t.Fatalf("Authorization %q: %d %q", authorization, resp.status, resp.header.Get("WWW-Authenticate"))
		}
	}
}

// TestPreflightParams: a preflight's Mcp-Param-* names are repeated back
// when well-formed, at most maxPreflightParams of them; other names are not.
func TestPreflightParams(t *testing.T) {
	var asked []string
	for i := range 100 {
		asked = append(asked, "mcp-param-p"+strings.Repeat("x", i))
	}
	got := preflightParams([]string{"content-type, mcp-param-, mcp-param-ok", "Mcp-Param-Bad Name, x-other", strings.Join(asked, ",")})
	names := strings.Split(strings.TrimPrefix(got, ", "), ", ")
	if len(names) != maxPreflightParams || names[0] != "mcp-param-ok" {
		t.Fatalf("%d names, first %q: %q", len(names), names[0], got)
	}
	for _, n := range names {
		if !strings.HasPrefix(n, "mcp-param-") || strings.Contains(n, " ") {
			t.Errorf("repeated %q", n)
		}
	}
}

// TestOwnLoopbackOrigin: a gateway with no origins configured accepts a
// browser page of its own loopback origin (what the conformance suite's
// valid-localhost case sends), and nothing else: not another port, and
// not a rebound name whose Host and Origin agree.
func TestOwnLoopbackOrigin(t *testing.T) {
	b := startBackends(t)
	_, srv := startGateway(t, b, testGatewayConfig(b))
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + modernMeta + `}}`
	host := strings.TrimPrefix(srv.URL, "http://")
	_, port, _ := strings.Cut(host, ":")
	cases := []struct {
		name, host, origin string
		want               int
	}{
		{"own loopback origin", host, srv.URL, http.StatusOK},
		{"own origin as localhost", "localhost:" + port, "http://localhost:" + port, http.StatusOK},
		{"another loopback port", host, "http://127.0.0.1:1", http.StatusForbidden},
		{"loopback origin, other host", "localhost:" + port, srv.URL, http.StatusForbidden},
		{"rebound name agreeing with its Host", "attacker.example:" + port, "http://attacker.example:" + port, http.StatusForbidden},
	}
	for _, tc := range cases {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(list))
		for k, v := range modernHeaders("tools/list") {
			req.Header.Set(k, v)
		}
		req.Host = tc.host
		req.Header.Set("Origin", tc.origin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
	}
}

// TestOpsPathsRefuseNamesOnAnyBind: bound to every address with no host
// configured (the shipped manifests), the metrics and readiness paths
// still refuse a name that is not localhost, as every ops port does: a
// rebound page sends its own name, probes and scrapers an address.
func TestOpsPathsRefuseNamesOnAnyBind(t *testing.T) {
	b := startBackends(t)
	cfg := testGatewayConfig(b)
	cfg.Listen = "0.0.0.0:8080"
	_, srv := startGateway(t, b, cfg)
	for host, want := range map[string]int{"attacker.example": http.StatusForbidden, "10.1.2.3:8080": http.StatusOK, "localhost:8080": http.StatusOK} {
		for _, path := range []string{"/metrics", "/readyz"} {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
			req.Host = host
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if (resp.StatusCode == http.StatusForbidden) != (want == http.StatusForbidden) {
				t.Errorf("%s with Host %s: %d, want %d", path, host, resp.StatusCode, want)
			}
		}
	}
}

// TestOpsPathsFollowTheHostRule: with accepted hosts configured, the
// metrics and readiness paths refuse another name (a rebound page could
// read them) but accept an IP address, as probes and scrapers send.
func TestOpsPathsFollowTheHostRule(t *testing.T) {
	b := startBackends(t)
	cfg := testGatewayConfig(b)
	cfg.HTTP.AllowedHosts = []string{"mcp.example.com", "ops.example.com:8443"}
	_, srv := startGateway(t, b, cfg)
	for _, tc := range []struct {
		path, host string
		want       int
	}{
		{"/metrics", "attacker.example", http.StatusForbidden},
		{"/readyz", "attacker.example", http.StatusForbidden},
		{"/metrics", "10.1.2.3:8080", http.StatusOK},
		{"/metrics", "mcp.example.com", http.StatusOK},
		{"/readyz", "ops.example.com:8443", http.StatusOK},
		{"/readyz", "ops.example.com:9443", http.StatusForbidden},
		{"/healthz", "10.1.2.3", http.StatusOK},
		{"/mcp", "10.1.2.3:8080", http.StatusForbidden},
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+tc.path, nil)
		req.Host = tc.host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if tc.path == "/mcp" {
			if resp.StatusCode != tc.want {
				t.Errorf("%s with Host %s: %d, want %d", tc.path, tc.host, resp.StatusCode, tc.want)
			}
			continue
		}
		if (resp.StatusCode == http.StatusForbidden) != (tc.want == http.StatusForbidden) {
			t.Errorf("%s with Host %s: %d, want %d", tc.path, tc.host, resp.StatusCode, tc.want)
		}
	}
}

// TestEncodedBodyRefused: the gateway decodes no Content-Encoding, so a
// body sent with one is 415 (RFC 9110, 8.4), whether it is compressed
// (not misreported as a JSON parse error) or only labelled so (not read
// as other than what its sender, or a proxy that decodes it, says it is).
func TestEncodedBodyRefused(t *testing.T) {
	b := startBackends(t)
	_, srv := startGateway(t, b, testGatewayConfig(b))
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + modernMeta + `}}`
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	_, _ = io.WriteString(zw, list)
	_ = zw.Close()
	for name, tc := range map[string]struct{ encoding, body string }{
		"gzip":              {"gzip", zipped.String()},
		"labelled gzip":     {"gzip", list},
		"identity and gzip": {"identity, gzip", list},
	} {
		resp := send(t, http.MethodPost, srv.URL+"/mcp", modernHeaders("tools/list", "Content-Encoding", tc.encoding), tc.body)
		if _, _, rerr := resp.rpc(t); resp.status != http.StatusUnsupportedMediaType || rerr == nil || rerr.Code != -32600 {
			t.Errorf("%s: %d %s, want 415 with -32600", name, resp.status, resp.body)
		}
	}
	if resp := send(t, http.MethodPost, srv.URL+"/mcp", modernHeaders("tools/list", "Content-Encoding", "identity"), list); resp.status != http.StatusOK {
		t.Errorf("identity: %d %s", resp.status, resp.body)
	}
}

// TestBrowserReadsRetryAfter: a browser client of an allowed origin is
// told to back off as any client is: the Retry-After of a 429 is among
// the headers exposed to it (Fetch hides any other but a few).
func TestBrowserReadsRetryAfter(t *testing.T) {
	b := startBackends(t)
	cfg := testGatewayConfig(b)
	cfg.Sessions.MaxPerPrincipal = 1
	_, srv := startGateway(t, b, cfg)
	url := srv.URL + "/mcp"
	first, second := initializeOn(t, url, "alice-key"), initializeOn(t, url, "alice-key")
	if r := send(t, http.MethodDelete, url, legacyHeaders("alice-key", first), ""); r.status != http.StatusNoContent {
		t.Fatalf("DELETE within the bound: %d %s", r.status, r.body)
	}
	header := legacyHeaders("alice-key", second)
	header["Origin"] = srv.URL // the gateway's own loopback origin
	r := send(t, http.MethodDelete, url, header, "")
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" || r.header.Get("Access-Control-Allow-Origin") != srv.URL {
		t.Fatalf("DELETE past the bound: %d %v", r.status, r.header)
	}
	exposed := false
	for _, v := range r.header.Values("Access-Control-Expose-Headers") {
		for name := range strings.SplitSeq(v, ",") {
			exposed = exposed || strings.EqualFold(strings.TrimSpace(name), "Retry-After")
		}
	}
	if !exposed {
		t.Errorf("Access-Control-Expose-Headers %q lacks Retry-After", r.header.Values("Access-Control-Expose-Headers"))
	}
}
