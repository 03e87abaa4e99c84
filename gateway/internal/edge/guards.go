package edge

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/switchboard-mcp/switchboard/gateway/internal/auth"
	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/hostguard"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

// The MCP endpoints. Each has a resource identifier of its own (RFC
// 9728): the public base URL followed by its path, which its metadata
// names and its authentication challenge points at (§3.3 wants the
// metadata's resource identical to the URL the client called, and MCP
// clients ask for a token with it as the RFC 8707 resource). Which tokens
// an endpoint accepts is its audience's affair: /mcp, /mcp/raw,
// /mcp/optimized and the endpoints of every virtual server without an
// audience of its own share gateway.auth.oidc.audience, so a token for one
// of them is accepted at all of them; the three endpoints of a server with
// servers[].audience accept only tokens naming that audience.
const (
	pathMCP          = "/mcp"
	pathMCPRaw       = "/mcp/raw"
	pathMCPOptimized = "/mcp/optimized"
	// wellKnownPRM is the RFC 9728 well-known path; a resource's metadata
	// is served at it followed by the resource's path (§3.1).
	wellKnownPRM = "/.well-known/oauth-protected-resource"
)

// CORS answers. Credentials are bearer tokens in Authorization, never
// cookies, so Access-Control-Allow-Credentials is not sent.
const (
	corsMethods = "GET, POST, DELETE"
	// corsHeaders are the request headers an MCP client sends (both eras)
	// and the gateway reads; Mcp-Param-* headers are added per preflight
	// as asked for, since their names are the tools'.
	corsHeaders = "Authorization, Content-Type, Mcp-Session-Id, MCP-Protocol-Version, Mcp-Method, Mcp-Name, Last-Event-ID, traceparent, tracestate"
	// corsExposed are the response headers a browser client must read:
	// the Legacy session id, the authentication challenge, and how long
	// to back off after a 429 or 503 (Fetch hides every other header but
	// a few safelisted ones, Retry-After not among them).
	corsExposed = "Mcp-Session-Id, WWW-Authenticate, Retry-After"
	// corsMaxAge lets a browser reuse a preflight answer (seconds).
	corsMaxAge = "600"
	// maxPreflightParams bounds the Mcp-Param-* names one preflight answer
	// repeats back (the aggregator accepts at most 64 per call).
	maxPreflightParams = 64
)

// edgeRules are the Host and Origin rules, computed once from the
// configuration (see config.GatewayHTTP).
type edgeRules struct {
	// hosts are the accepted Host values: http.allowedHosts and the host
	// of publicURL. Empty: the bind address decides.
	hosts []string
	// origins are the accepted browser origins in canonical form:
	// http.allowedOrigins and the origin of publicURL.
	origins   map[string]bool
	anyOrigin bool
}

func newEdgeRules(cfg config.Gateway) edgeRules {
	rules := edgeRules{hosts: append([]string(nil), cfg.HTTP.AllowedHosts...), origins: map[string]bool{}}
	for _, o := range cfg.HTTP.AllowedOrigins {
		if o == "*" {
			rules.anyOrigin = true
		} else if canon, err := config.ParseOrigin(o); err == nil {
			rules.origins[canon] = true
		}
	}
	if u, err := url.Parse(cfg.PublicURL); err == nil && cfg.PublicURL != "" {
		rules.hosts = append(rules.hosts, u.Hostname())
		if canon, err := config.ParseOrigin(u.Scheme + "://" + u.Host); err == nil {
			rules.origins[canon] = true
		}
	}
	return rules
}

// hostAllowed guards against DNS rebinding by name: with accepted hosts
// configured the Host must be one of them; otherwise, on a loopback bind,
// it must be a loopback name (the rule hostguard shares with the ops port).
func (g *Gateway) hostAllowed(r *http.Request) bool {
	host := hostguard.HostName(r.Host)
	if len(g.rules.hosts) > 0 {
		for _, a := range g.rules.hosts {
			if strings.EqualFold(a, host) || strings.EqualFold(a, r.Host) {
				return true
			}
		}
		return false
	}
	return !g.loopback || hostguard.IsLoopbackName(host)
}

// originAllowed validates a browser's Origin: it must be one configured,
// exactly, or, when none is configured (a local gateway), the gateway's
// own origin reached by a loopback address. It
// is never inferred from any other Host: a page that rebinds its own name
// to the gateway's address sends a Host and an Origin that agree, but
// that Host is the attacker's name, never a loopback one (a browser sets
// Host from the URL it loads). Requests without Origin (non-browser
// clients) pass; an empty, repeated or opaque ("null") Origin does not.
func (g *Gateway) originAllowed(r *http.Request) bool {
	values, sent := r.Header["Origin"]
	if !sent {
		return true
	}
	if len(values) != 1 {
		return false
	}
	if g.rules.anyOrigin {
		return true
	}
	canon, err := config.ParseOrigin(values[0])
	if err != nil {
		return false
	}
	if len(g.rules.origins) > 0 {
		return g.rules.origins[canon]
	}
	return sameLoopbackOrigin(r, canon)
}

// sameLoopbackOrigin reports whether origin (canonical) is the origin of
// the request's own Host and that Host is a loopback name or address: a
// page the gateway's own loopback address served (a local console or
// inspector on the same port), which DNS rebinding cannot produce.
func sameLoopbackOrigin(r *http.Request, origin string) bool {
	if !hostguard.IsLoopbackName(hostguard.HostName(r.Host)) {
		return false
	}
	own, err := config.ParseOrigin("http://" + r.Host)
	if err == nil && own == origin {
		return true
	}
	own, err = config.ParseOrigin("https://" + r.Host)
	return err == nil && own == origin
}

// guard applies the Host and Origin rules before anything else (before
// authentication), answers CORS preflights and adds the CORS headers of
// an allowed browser origin. It reports whether the request goes on.
func (g *Gateway) guard(w http.ResponseWriter, r *http.Request, methods string) bool {
	h := w.Header()
	h.Add("Vary", "Origin")
	if !g.hostAllowed(r) {
		http.Error(w, "Forbidden: Host not allowed", http.StatusForbidden)
		return false
	}
	if !g.originAllowed(r) {
		http.Error(w, "Forbidden: Origin not allowed", http.StatusForbidden)
		return false
	}
	origin := r.Header.Get("Origin")
	if origin != "" {
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Expose-Headers", corsExposed)
	}
	if r.Method != http.MethodOptions {
		return true
	}
	h.Set("Allow", methods+", OPTIONS")
	if origin != "" && r.Header.Get("Access-Control-Request-Method") != "" {
		h.Add("Vary", "Access-Control-Request-Method, Access-Control-Request-Headers")
		h.Set("Access-Control-Allow-Methods", methods)
		h.Set("Access-Control-Allow-Headers", corsHeaders+preflightParams(r.Header.Values("Access-Control-Request-Headers")))
		h.Set("Access-Control-Max-Age", corsMaxAge)
	}
	w.WriteHeader(http.StatusNoContent)
	return false
}

// preflightParams returns ", Mcp-Param-X" for every Mcp-Param-* header a
// preflight asks for (well-formed names, at most maxPreflightParams).
func preflightParams(requested []string) string {
	var b strings.Builder
	n := 0
	for _, v := range requested {
		for name := range strings.SplitSeq(v, ",") {
			name = strings.TrimSpace(name)
			if n == maxPreflightParams || len(name) <= len("mcp-param-") || !strings.EqualFold(name[:len("mcp-param-")], "mcp-param-") || !isToken(name) {
				continue
			}
			b.WriteString(", ")
			b.WriteString(name)
			n++
		}
	}
	return b.String()
}

// isToken reports whether s is an RFC 9110 token (a header field name).
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return s != ""
}

// unauthorized answers a failed authentication with the challenge that
// points at the metadata of the endpoint the client used (RFC 9728 §5.1).
// A path that names no endpoint (isEndpointPath: /mcp, its variants and
// server names of a-z, 0-9, _ and -) gets /mcp's: the challenge is a
// quoted parameter, and a path a client chose could otherwise close the
// quote and add a resource_metadata of its own.
func (g *Gateway) unauthorized(w http.ResponseWriter, r *http.Request, path string, err error) {
	if !isEndpointPath(path) {
		path = pathMCP
	}
	// Counted as a request the client got wrong, by the method its
	// headers name (a Modern request's Mcp-Method): its body is not read.
	method, era := r.Method, mcpspec.EraLegacy
	if m := r.Header.Get("Mcp-Method"); m != "" {
		method, era = m, mcpspec.EraModern
	}
	g.metrics.requests.WithLabelValues(methodLabel(method), era.String(), "rejected").Inc()
	// A request with no credential gets the challenge without an error
	// code (RFC 6750, 3.1): clients take invalid_token for "refresh the
	// token", not "authorize". The description is one for every failure,
	// so that an anonymous caller learns nothing of the issuer's state.
	challenge, body := `Bearer resource_metadata="`+g.metadataURL(r, path)+`"`, map[string]string{"error_description": "this endpoint needs a bearer token"}
	if _, ok := auth.BearerToken(r); ok {
		challenge = `Bearer error="invalid_token", resource_metadata="` + g.metadataURL(r, path) + `"`
		body = map[string]string{"error": "invalid_token", "error_description": auth.ErrUnauthenticated.Error()}
	}
	w.Header().Set("WWW-Authenticate", challenge)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_ = json.NewEncoder(w).Encode(body)
}

// publicBase is the base URL clients reach the gateway at: gateway.publicURL
// when configured (behind a proxy or load balancer), else the scheme and
// Host of the request itself.
func (g *Gateway) publicBase(r *http.Request) string {
	if g.cfg.PublicURL != "" {
		return strings.TrimSuffix(g.cfg.PublicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// splitBase splits the public base URL into its origin and its path
// ("" or "/prefix").
func (g *Gateway) splitBase(r *http.Request) (origin, path string) {
	base := g.publicBase(r)
	u, err := url.Parse(base)
	if err != nil {
		return base, ""
	}
	return u.Scheme + "://" + u.Host, strings.TrimSuffix(u.Path, "/")
}

// metadataURL is where the RFC 9728 metadata of the endpoint at path is:
// the well-known path inserted between the resource identifier's host and
// its path (§3.1).
func (g *Gateway) metadataURL(r *http.Request, path string) string {
	origin, prefix := g.splitBase(r)
	return origin + wellKnownPRM + prefix + path
}

// serveResourceMetadata serves RFC 9728 protected-resource metadata: at
// the well-known path followed by an endpoint's path, that endpoint's;
// at the well-known path itself, the metadata of the resource identifier
// without a path, the public origin (what a client that falls back to the
// root expects, §3.3). Any other path is 404. A virtual server's document
// is the same whether the server has an audience of its own, none, or
// does not exist: it tells an anonymous caller nothing the URL does not.
func (g *Gateway) serveResourceMetadata(w http.ResponseWriter, r *http.Request) {
	if !g.guard(w, r, "GET") {
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, OPTIONS")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	origin, prefix := g.splitBase(r)
	suffix := strings.TrimPrefix(r.URL.Path, wellKnownPRM)
	var resource string
	switch {
	case suffix == "" || suffix == "/":
		resource = origin
	default:
		// A proxy may pass the well-known path on with or without the
		// public URL's path prefix in it.
		p := suffix
		if prefix != "" {
			if rest, ok := strings.CutPrefix(suffix, prefix); ok && isEndpointPath(rest) {
				p = rest
			}
		}
		if isEndpointPath(p) {
			resource = origin + prefix + p
		}
	}
	if resource == "" {
		http.NotFound(w, r)
		return
	}
	meta := map[string]any{
		"resource":                 resource,
		"bearer_methods_supported": []string{"header"},
		"resource_name":            "Switchboard MCP gateway",
	}
	if a := g.auth.Load().cfg; a.Mode == "oidc" {
		meta["authorization_servers"] = []string{a.OIDC.Issuer}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(meta)
}
