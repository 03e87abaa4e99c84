package backend

import (
	"errors"
	"net"
	"strings"
	"syscall"
)

// Advice says what to do about a backend's failure when it is one a first
// configuration meets (nothing listening, a wrong path, an era the server
// does not speak), "" otherwise. It names keys, never values: it is logged
// beside the error, whose text the log already redacts.
func Advice(err error) string {
	var dns *net.DNSError
	var era *eraError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &era), strings.Contains(err.Error(), "backend negotiated protocol"):
		return "set aggregator.backends[].protocol to auto (or to the era the server speaks)"
	// The client keeps a failure's text, not its cause (unavailableError):
	// the text is what there is to go by.
	case errors.As(err, &dns), strings.Contains(err.Error(), "no such host"):
		return "the backend's host name does not resolve: check the host of aggregator.backends[].url"
	case errors.Is(err, syscall.ECONNREFUSED), strings.Contains(err.Error(), "connection refused"):
		return "nothing listens at the backend's address: start the server, or fix the host and port of aggregator.backends[].url"
	case strings.Contains(err.Error(), "Not Found"):
		return "the backend answered 404 at its URL: MCP servers usually serve at a path such as /mcp; check the path of aggregator.backends[].url"
	case strings.Contains(err.Error(), "Method Not Allowed"), strings.Contains(err.Error(), "Unsupported Media Type"):
		return "the backend's URL does not serve MCP's Streamable HTTP (an SSE-only server of the 2024 revision, or another service): check aggregator.backends[].url"
	}
	return ""
}

// eraError is a backend that negotiated another era than the one
// configured.
type eraError struct{ negotiated, configured string }

func (e *eraError) Error() string {
	return "backend negotiated protocol " + e.negotiated + ", but " + e.configured + " is configured"
}
