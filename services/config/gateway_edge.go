package config

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// ParseOrigin returns the canonical form of a web origin (RFC 6454):
// scheme://host[:port], lower-cased, without the scheme's default port, so
// that "HTTPS://App.example:443" and "https://app.example" compare equal.
// Anything that is not a scheme and a host, alone, is an error: the
// opaque origin "null", a path, a query, user information.
func ParseOrigin(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Opaque != "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(u.Host, ":") {
		// Not quoted: an origin of the configuration may be an expanded
		// secret, one of a request is the client's.
		return "", errors.New("not an origin (scheme://host[:port])")
	}
	scheme := strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	switch port := u.Port(); {
	case port == "", scheme == "http" && port == "80", scheme == "https" && port == "443":
	default:
		host += ":" + port
	}
	return scheme + "://" + host, nil
}

// validateEdge checks the settings the gateway's Host and Origin rules are
// built from.
func (g Gateway) validateEdge() error {
	if g.PublicURL != "" {
		u, err := url.Parse(g.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return keyErr("gateway.publicURL", "want an absolute http or https URL without query")
		}
	}
	for i, o := range g.HTTP.AllowedOrigins {
		if o == "*" {
			continue
		}
		if _, err := ParseOrigin(o); err != nil {
			return keyErr(fmt.Sprintf("gateway.http.allowedOrigins[%d]", i), "%w", err)
		}
	}
	for i, h := range g.HTTP.AllowedHosts {
		if h == "" || strings.ContainsAny(h, "/@ ") {
			return keyErr(fmt.Sprintf("gateway.http.allowedHosts[%d]", i), "want a host name or name:port")
		}
	}
	return nil
}
