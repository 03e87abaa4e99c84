package backend

import (
	"errors"
	"net"
	"strings"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Advice says what to do about a backend's failure when it is one a first
// configuration meets (nothing listening, a wrong path, an era the server
// does not speak), "" otherwise. It names keys, never values: it is logged
// beside the error, whose text the log already redacts. A failure the
// client classified carries the advice read from its cause (adviceFor);
// a backend's own JSON-RPC error gets none, whatever its text says.
func Advice(err error) string {
	var un *unavailableError
	if errors.As(err, &un) {
		return un.advice
	}
	var era *eraError
	if errors.As(err, &era) {
		return eraAdvice
	}
	return ""
}

const eraAdvice = "set aggregator.backends[].protocol to auto (or to the era the server speaks)"

// adviceFor is Advice read from a failure's cause before classify keeps
// only its text. Where go-sdk keeps a cause only as text (a dial error, an
// HTTP status), the text is what there is to go by; a JSON-RPC error is
// the backend's answer, not a failure to reach it, and gets no advice.
func adviceFor(err error) string {
	var dns *net.DNSError
	var era *eraError
	var wire *jsonrpc.Error
	switch {
	case err == nil, errors.As(err, &wire) && wire.Code != rejectedCode:
		return ""
	case errors.As(err, &era):
		return eraAdvice
	case errors.As(err, &dns), strings.Contains(err.Error(), "no such host"):
		return "the backend's host name does not resolve: check the host of aggregator.backends[].url"
	case errors.Is(err, syscall.ECONNREFUSED), strings.Contains(err.Error(), "connection refused"):
		return "nothing listens at the backend's address: start the server, or fix the host and port of aggregator.backends[].url"
	case strings.Contains(err.Error(), "Not Found"), strings.Contains(err.Error(), "HTTP 404"):
		return "the backend answered 404 at its URL: MCP servers usually serve at a path such as /mcp; check the path of aggregator.backends[].url"
	case strings.Contains(err.Error(), "Method Not Allowed"), strings.Contains(err.Error(), "Unsupported Media Type"),
		strings.Contains(err.Error(), "HTTP 405"), strings.Contains(err.Error(), "HTTP 415"):
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
