// Package hostguard is the gateway's rule against DNS rebinding by name,
// shared by every listener that serves browsers: the MCP edge (which adds
// its configured hosts, see edge) and the ops port (metrics, probes and
// the operator console). A listener bound only to a loopback address
// answers only requests whose Host is a loopback name or address: a page
// that rebinds its own name to 127.0.0.1 still sends its own name as
// Host (a browser sets Host from the URL it loads), never a loopback one.
package hostguard

import (
	"net"
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
