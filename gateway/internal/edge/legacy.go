package edge

import (
	"context"
	"encoding/json"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/gateway/internal/session"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// legacyShared are the 2025-11-25 requests served by dispatch; initialize,
// ping and logging/setLevel are answered here.
var legacyShared = map[string]bool{
	"tools/list": true, "tools/call": true, "resources/list": true, "resources/templates/list": true,
	"resources/read": true, "prompts/list": true, "prompts/get": true, "completion/complete": true,
}

// serveLegacyPOST serves initialize and every request of an existing
// session. Legacy errors travel as JSON-RPC errors in HTTP 200; only
// session and transport problems get HTTP error statuses.
func (g *Gateway) serveLegacyPOST(w http.ResponseWriter, c *call, msg *message, sessionID string, rec *requestRecord, span trace.Span) {
	if msg.Method == "initialize" && !msg.isNotification() {
		g.initialize(w, c, rec, span)
		return
	}
	claims, ok := g.openSession(c.r.Context(), sessionID, c.principal)
	if !ok {
		rec.outcome = "rejected"
		writeJSON(w, http.StatusNotFound, msg.ID, nil, newError(codeInvalidRequest, "session not found: initialize a new session"))
		return
	}
	if v := c.r.Header.Get("Mcp-Protocol-Version"); v != "" && v != claims.ProtocolVersion {
		rec.outcome = "rejected"
		writeJSON(w, http.StatusBadRequest, msg.ID, nil, newError(codeInvalidRequest, "MCP-Protocol-Version does not match the session's version "+claims.ProtocolVersion))
		return
	}
	c.version = claims.ProtocolVersion
	c.sessionKey = session.IDDigest(sessionID)
	span.SetAttributes(attribute.String("mcp.protocol.version", c.version))
	if msg.IsResponse {
		// The client's answer to an input request this replica sent on a
		// response stream; answers for another replica are dropped.
		g.pending.deliver(c.sessionKey, msg.ID, msg.Reply)
		rec.outcome = "ok"
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if msg.isNotification() {
		// initialized, cancelled and roots/list_changed need no action.
		rec.outcome = "ok"
		w.WriteHeader(http.StatusAccepted)
		return
	}
	_ = json.Unmarshal(claims.ClientCapabilities, &c.clientCaps)
	switch {
	case c.method == "ping":
		g.respond(w, c, rec, json.RawMessage(`{}`), nil)
	case c.method == "logging/setLevel":
		// The level applies to this session's later tool calls, whose
		// backends' log messages are relayed on their response streams.
		level, ok := stringParam(c.params, "level")
		if !ok || !logLevels[level] {
			g.respond(w, c, rec, nil, newError(codeInvalidParams, "invalid params: level must be an MCP log level"))
			return
		}
		g.logLevels.set(c.sessionKey, level, claims.Expiry())
		g.respond(w, c, rec, json.RawMessage(`{}`), nil)
	case c.method == "resources/subscribe" || c.method == "resources/unsubscribe":
		// Updates of the URI reach this session's GET stream (see
		// sessionResources) if the caller may read it and its backend
		// supports subscribe; any other URI is accepted and never updated,
		// so a denied URI looks like an unknown one.
		uri, ok := stringParam(c.params, "uri")
		if !ok || uri == "" {
			g.respond(w, c, rec, nil, newError(codeInvalidParams, "invalid params: uri is required"))
			return
		}
		if c.method == "resources/unsubscribe" {
			g.sessionResources.unsubscribe(c.sessionKey, uri, claims.Expiry())
		} else if !g.sessionResources.subscribe(c.sessionKey, uri, claims.Expiry()) {
			g.respond(w, c, rec, nil, newError(codeInvalidParams, "invalid params: too many resource subscriptions"))
			return
		}
		g.respond(w, c, rec, json.RawMessage(`{}`), nil)
	case legacyShared[c.method]:
		result, rerr := g.dispatch(c)
		g.respond(w, c, rec, result, rerr)
	default:
		g.respond(w, c, rec, nil, newError(codeMethodNotFound, "method not found: "+c.method))
	}
}

// initialize negotiates the Legacy version and mints a sealed session id.
func (g *Gateway) initialize(w http.ResponseWriter, c *call, rec *requestRecord, span trace.Span) {
	requested, ok := stringParam(c.params, "protocolVersion")
	if !ok || requested == "" {
		g.respond(w, c, rec, nil, newError(codeInvalidParams, "invalid params: protocolVersion is required"))
		return
	}
	// Only 2025-11-25 is served under Legacy: echo it, or offer it.
	c.version = versionLegacy
	span.SetAttributes(attribute.String("mcp.protocol.version", c.version))
	declared := object{}
	if raw, ok := c.params["capabilities"]; ok && json.Unmarshal(raw, &declared) != nil {
		g.respond(w, c, rec, nil, newError(codeInvalidParams, "invalid params: capabilities must be an object"))
		return
	}
	clientCaps := sessionCapabilities(declared)
	ctx, cancel := context.WithTimeout(c.r.Context(), g.requestTimeout)
	defer cancel()
	caps, instructions, rerr := g.capabilities(ctx, c)
	if rerr != nil {
		g.respond(w, c, rec, nil, rerr)
		return
	}
	caps.set("logging", struct{}{})
	id, _, err := g.sealer.Mint(c.principal, c.version, clientCaps)
	if err != nil {
		g.log.ErrorContext(ctx, "mint session", "err", err)
		g.respond(w, c, rec, nil, newError(codeInternalError, "internal error"))
		return
	}
	res := object{}
	res.set("protocolVersion", c.version)
	res.set("capabilities", caps)
	res["serverInfo"] = g.serverInfo
	if instructions != "" {
		res.set("instructions", instructions)
	}
	w.Header().Set("Mcp-Session-Id", id)
	g.respond(w, c, rec, res.encode(), nil)
}

// openSession opens a sealed session id for principal and checks that no
// replica deleted it.
func (g *Gateway) openSession(ctx context.Context, id string, principal *commonv1.Principal) (session.Claims, bool) {
	claims, err := g.sealer.Open(id, principal)
	if err != nil {
		return session.Claims{}, false
	}
	if g.revocations.Revoked(ctx, session.IDDigest(id), claims.Expiry()) {
		return session.Claims{}, false
	}
	return claims, true
}

// serveLegacyDELETE ends a session on every replica.
func (g *Gateway) serveLegacyDELETE(w http.ResponseWriter, r *http.Request, principal *commonv1.Principal) {
	ctx, span, rec := g.startRequest(r)
	defer g.finishRequest(span, rec)
	rec.era = eraLegacy
	rec.setMethod(span, "DELETE")
	id := r.Header.Get("Mcp-Session-Id")
	claims, ok := g.openSession(ctx, id, principal)
	if !ok {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	if err := g.revocations.Revoke(ctx, session.IDDigest(id), claims.Expiry()); err != nil {
		// Recorded locally; other replicas learn of it only through the
		// shared store, so say so loudly.
		g.log.WarnContext(ctx, "session revocation not recorded in the shared store; other replicas may still serve it until it expires", "err", err)
	}
	rec.outcome = "ok"
	w.WriteHeader(http.StatusNoContent)
}

// serveLegacyGET opens the session's stream of server notifications: the
// list_changed notifications of this principal's view, and the updates of
// the resources the session subscribed to on this replica.
func (g *Gateway) serveLegacyGET(w http.ResponseWriter, r *http.Request, v view, principal *commonv1.Principal) {
	ctx, span, rec := g.startRequest(r)
	defer g.finishRequest(span, rec)
	r = r.WithContext(ctx)
	rec.era = eraLegacy
	rec.setMethod(span, "GET")
	if !acceptsSSE(r) {
		http.Error(w, "Not Acceptable: the GET stream is text/event-stream", http.StatusNotAcceptable)
		return
	}
	id := r.Header.Get("Mcp-Session-Id")
	claims, ok := g.openSession(ctx, id, principal)
	if !ok {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	digest := session.IDDigest(id)
	kinds := listKinds{tools: v == viewRaw, resources: true, prompts: true}
	preamble := []byte(": ok\n\n")
	started := false
	var version uint64
	// Each change of the session's subscriptions reopens the watch with the
	// new set; the stream itself stays open.
	for {
		uris, changed := g.sessionResources.get(digest, claims.Expiry())
		wctx, cancel := context.WithCancel(ctx)
		watch, first, err := g.openWatch(wctx, principal, uris)
		if err != nil {
			cancel()
			if !started {
				rerr := grpcError(ctx, g.log, err, eraLegacy, "GET")
				rec.outcome = "error"
				http.Error(w, "Service Unavailable: "+rerr.Message, http.StatusServiceUnavailable)
			}
			return
		}
		if started && first.GetCatalogVersion() != version {
			// The catalog changed while the watch was reopened: say so,
			// in case the change was one this view sees.
			preamble = nil
			for _, method := range changedNotifications(allKinds, kinds) {
				preamble = append(preamble, sseEvent(notification(method, object{}))...)
			}
		}
		k := kinds
		k.resourceUpdates = len(first.GetSubscribedResourceUris()) > 0
		var reopen bool
		reopen, version = g.pumpCatalog(wctx, w, rec, watch, k, "legacy_get", pumpStart{preamble: preamble, started: started, restart: changed, version: first.GetCatalogVersion()}, nil)
		cancel()
		if !reopen {
			return
		}
		started, preamble = true, nil
	}
}

// allKinds is an event in which every kind changed.
var allKinds = &aggregatorv1.WatchCatalogResponse{Changed: []aggregatorv1.CatalogKind{
	aggregatorv1.CatalogKind_CATALOG_KIND_TOOLS, aggregatorv1.CatalogKind_CATALOG_KIND_RESOURCES, aggregatorv1.CatalogKind_CATALOG_KIND_PROMPTS,
}}

// maxSessionCapabilities bounds the capabilities sealed into a session id,
// which travels in a header on every request.
const maxSessionCapabilities = 1024

// sessionCapabilities keeps what the gateway consults of a Legacy client's
// capabilities: the ones input requests need. Oversized values shrink to
// their bare declaration.
func sessionCapabilities(declared object) json.RawMessage {
	kept := object{}
	for _, name := range inputCapability {
		if v, ok := declared[name]; ok {
			kept[name] = v
		}
	}
	if out := kept.encode(); len(out) <= maxSessionCapabilities {
		return out
	}
	for name := range kept {
		kept[name] = json.RawMessage(`{}`)
	}
	return kept.encode()
}
