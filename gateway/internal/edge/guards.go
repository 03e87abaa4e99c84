package edge

import (
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// hostAllowed guards against DNS rebinding: with configured allowed hosts
// the Host must be one of them; on a loopback bind it must be a loopback
// name.
func (g *Gateway) hostAllowed(r *http.Request) bool {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if len(g.cfg.HTTP.AllowedHosts) > 0 {
		for _, a := range g.cfg.HTTP.AllowedHosts {
			if strings.EqualFold(a, host) || strings.EqualFold(a, r.Host) {
				return true
			}
		}
		return false
	}
	if !g.loopback {
		return true
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// originAllowed validates a browser's Origin: allowed when listed, or when it
// names the host the request was sent to. Requests without Origin (non-browser
// clients) pass.
func (g *Gateway) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	for _, a := range g.cfg.HTTP.AllowedOrigins {
		if a == "*" || strings.EqualFold(a, origin) {
			return true
		}
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

func (g *Gateway) unauthorized(w http.ResponseWriter, r *http.Request, err error) {
	w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token", resource_metadata="`+g.publicBase(r)+`/.well-known/oauth-protected-resource"`)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_token", "error_description": err.Error()})
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

// serveResourceMetadata serves RFC 9728 protected-resource metadata.
func (g *Gateway) serveResourceMetadata(w http.ResponseWriter, r *http.Request) {
	meta := map[string]any{
		"resource":                 g.publicBase(r) + "/mcp",
		"bearer_methods_supported": []string{"header"},
		"resource_name":            "Switchboard MCP gateway",
	}
	if g.cfg.Auth.Mode == "oidc" {
		meta["authorization_servers"] = []string{g.cfg.Auth.OIDC.Issuer}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(meta)
}
