// Package dualera serves both MCP protocol eras from one go-sdk server on
// one URL. go-sdk v1.8.0 serves 2026-07-28 ("Modern") only from a stateless
// handler and 2025-11-25 ("Legacy") sessions (initialize, Mcp-Session-Id,
// the GET stream, server-to-client requests) only from a stateful one, and
// ships nothing that does both, so a Router sends each request to the
// handler of its era. Both handlers share the server, so a change to its
// tools reaches Legacy sessions on their GET stream and Modern clients on
// their subscriptions/listen stream alike.
package dualera

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

// maxPeekBytes bounds how much of a request body the router buffers to
// classify it; the handlers enforce their own limits afterwards.
const maxPeekBytes = 8 << 20

// Router routes each request to Modern or Legacy.
type Router struct {
	Modern http.Handler
	Legacy http.Handler
}

// New returns a Router over server. modern and legacy are the options of the
// stateless and stateful handlers (nil for defaults); Stateless is forced on
// the first and off the second.
func New(server *mcp.Server, modern, legacy *mcp.StreamableHTTPOptions) *Router {
	getServer := func(*http.Request) *mcp.Server { return server }
	m, l := mcp.StreamableHTTPOptions{}, mcp.StreamableHTTPOptions{}
	if modern != nil {
		m = *modern
	}
	if legacy != nil {
		l = *legacy
	}
	m.Stateless, l.Stateless = true, false
	return &Router{
		Modern: mcp.NewStreamableHTTPHandler(getServer, &m),
		Legacy: mcp.NewStreamableHTTPHandler(getServer, &l),
	}
}

// ServeHTTP implements http.Handler.
func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if IsModern(r) {
		rt.Modern.ServeHTTP(w, r)
		return
	}
	rt.Legacy.ServeHTTP(w, r)
}

// IsModern decides the era of a request with mcpspec.Classify, the rule the
// gateway uses too; requests with no era marker go to the Legacy handler,
// which answers them as a 2025-11-25 server would. The body is peeked at
// only when the headers cannot decide, and is left for the handler exactly
// as the client sent it, so the chosen handler reports malformed or
// oversized bodies itself.
func IsModern(r *http.Request) bool {
	sig := mcpspec.Signals{HTTPMethod: r.Method, HeaderVersion: r.Header.Get("Mcp-Protocol-Version"), SessionID: r.Header.Get("Mcp-Session-Id")}
	if r.Method == http.MethodPost {
		sig.Method, sig.MetaVersion = peek(r)
	}
	return mcpspec.Classify(sig) == mcpspec.EraModern
}

// peek reads the JSON-RPC method and the protocol version params._meta
// names (nil for none), restoring the body.
func peek(r *http.Request) (method string, metaVersion json.RawMessage) {
	original := r.Body
	body, err := io.ReadAll(io.LimitReader(original, maxPeekBytes+1))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), original), original}
	if err != nil || len(body) > maxPeekBytes {
		return "", nil
	}
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil {
		return "", nil
	}
	return msg.Method, msg.Params.Meta[mcpspec.MetaProtocolVersion]
}
