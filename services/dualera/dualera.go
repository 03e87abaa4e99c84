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
)

// modernVersion is the first revision of the stateless wire.
const modernVersion = "2026-07-28"

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

// IsModern decides the era of a request. Only a POST without a Legacy
// session can be Modern. An MCP-Protocol-Version header naming a Modern
// revision decides; otherwise the body's _meta does, so that a Modern
// request with a missing or unknown header version still reaches the
// stateless handler, which answers with the Modern error (-32020 or -32022)
// instead of a Legacy "session required". The body is left for the handler
// exactly as the client sent it.
func IsModern(r *http.Request) bool {
	if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
		return false
	}
	if r.Header.Get("Mcp-Protocol-Version") >= modernVersion {
		return true
	}
	original := r.Body
	body, err := io.ReadAll(io.LimitReader(original, maxPeekBytes+1))
	// Hand on what was read followed by the unread rest, so the chosen
	// handler reports malformed or oversized bodies itself.
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), original), original}
	if err != nil || len(body) > maxPeekBytes {
		return false
	}
	var msg struct {
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil {
		return false
	}
	_, ok := msg.Params.Meta[mcp.MetaKeyProtocolVersion]
	return ok
}
