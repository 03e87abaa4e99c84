package edge

import (
	"net/http"
	"strings"

	"github.com/switchboard-mcp/switchboard/gateway/internal/methods"
	"github.com/switchboard-mcp/switchboard/services/config"
)

// pathServer is the route of a virtual server's endpoints: /mcp/<server>,
// /mcp/<server>/raw and /mcp/<server>/optimized. The literal /mcp/raw and
// /mcp/optimized routes are more specific, so they win over it (and the
// configuration refuses servers named raw or optimized).
const pathServer = "/mcp/{server}"

// variant is which of an MCP path's three endpoints a route is.
type variant int

const (
	// variantMain serves the tools or the optimizer's two, as configured.
	variantMain variant = iota
	variantRaw
	variantOptimized
)

// endpointAt is what a route knows before the request is read: which
// variant, and whether the path names a virtual server.
type endpointAt struct {
	variant  variant
	ofServer bool
}

// endpoint is the resolved target of one request: the virtual server (""
// for the whole catalog) and the tool surface.
type endpoint struct {
	server string
	view   methods.View
}

// serverRoute is what the edge needs of one virtual server.
type serverRoute struct {
	// optimizer: /mcp/<server> serves find_tool and call_tool.
	optimizer bool
	// audience is the server's own (servers[].audience): the one an OIDC
	// token must name at its endpoints; "" shares gateway.auth.oidc.audience.
	audience string
}

// SetServers replaces the virtual servers the gateway serves: from the
// next request on, /mcp/<name> serves exactly these. A server's optimizer
// setting defaults to gateway.optimizer.enabled.
func (g *Gateway) SetServers(servers []config.Server) {
	table := serverTable{routes: make(map[string]serverRoute, len(servers)), from: servers}
	for _, s := range servers {
		r := serverRoute{optimizer: g.cfg.Optimizer.Enabled, audience: s.Audience}
		if s.Optimizer != nil {
			r.optimizer = *s.Optimizer
		}
		table.routes[s.Name] = r
	}
	g.servers.Store(&table)
}

// serverTable is the virtual servers in force, and the configuration they
// were made from (to tell a reload that changes them).
type serverTable struct {
	routes map[string]serverRoute
	from   []config.Server
}

// audience is the audience an OIDC token must name at the endpoint a
// request is for: the virtual server's own, or "" (the shared
// gateway.auth.oidc.audience) at /mcp and its variants, at a server
// without one and at a name no server has.
func (t *serverTable) audience(r *http.Request, at endpointAt) string {
	if !at.ofServer {
		return ""
	}
	return t.routes[r.PathValue("server")].audience
}

// resolveEndpoint resolves a request's endpoint in the virtual servers
// of servers (the table the request was authenticated with); false for a
// virtual server that is not configured.
func (g *Gateway) resolveEndpoint(r *http.Request, at endpointAt, servers *serverTable) (endpoint, bool) {
	optimizer := g.cfg.Optimizer.Enabled
	var ep endpoint
	if at.ofServer {
		ep.server = r.PathValue("server")
		route, ok := servers.routes[ep.server]
		if !ok {
			return endpoint{}, false
		}
		optimizer = route.optimizer
	}
	switch at.variant {
	case variantRaw:
		ep.view = methods.ViewRaw
	case variantOptimized:
		ep.view = methods.ViewOptimized
	default:
		ep.view = methods.ViewRaw
		if optimizer {
			ep.view = methods.ViewOptimized
		}
	}
	return ep, true
}

// isEndpointPath reports whether p is the path of an MCP endpoint: /mcp,
// /mcp/raw, /mcp/optimized, or one of a virtual server's. Any well-formed
// server name counts, configured or not, so the unauthenticated metadata
// endpoint tells nobody which servers exist.
func isEndpointPath(p string) bool {
	rest, ok := strings.CutPrefix(p, pathMCP)
	if !ok {
		return false
	}
	if rest == "" {
		return true
	}
	rest, ok = strings.CutPrefix(rest, "/")
	if !ok {
		return false
	}
	name, tail, _ := strings.Cut(rest, "/")
	return config.IsServerName(name) && (tail == "" || tail == "raw" || tail == "optimized") ||
		(tail == "" && (name == "raw" || name == "optimized"))
}
