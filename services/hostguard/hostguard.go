// Package hostguard is the services' rule against DNS rebinding by name:
// a page that rebinds its own name to a listener's address still sends
// its own name as Host (a browser sets Host from the URL it loads), never
// the address or a loopback name. The gateway's MCP edge answers a
// loopback bind's loopback names only (adding its configured hosts, see
// edge); every ops port answers IP literals, localhost and the configured
// ops.hosts only (NamedHostsOnly, opshttp.Serve).
package hostguard

import (
	"net"
	"net/http"
	"slices"
	"strings"
)

// HostName is the name or address of a Host header, without its port or
// IPv6 brackets.
func HostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.Trim(host, "[]")
}

// IsLoopbackName reports whether host (see HostName) is localhost or a
// loopback address.
func IsLoopbackName(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// LoopbackBind reports whether a listen address binds only a loopback
// interface, which turns the Host check on.
func LoopbackBind(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	return IsLoopbackName(host)
}

// NamedHostsOnly serves h to requests whose Host is an IP literal,
// localhost, or one of hosts (compared without case), and refuses any
// other with 403, whatever the listener's bind: probes and scrapers name
// the address, a rebound page its own name.
func NamedHostsOnly(h http.Handler, hosts []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !Named(r.Host, hosts) {
			http.Error(w, "Forbidden: Host not allowed (ops.hosts)", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Named reports whether a request's Host (host[:port]) is an IP literal,
// localhost, or one of hosts (compared without case): the rule of every
// endpoint that serves operators and scrapers rather than browsers.
func Named(hostport string, hosts []string) bool {
	host := HostName(hostport)
	return host != "" && (net.ParseIP(host) != nil || strings.EqualFold(host, "localhost") ||
		slices.ContainsFunc(hosts, func(n string) bool { return strings.EqualFold(n, host) }))
}
