package edge

import (
	"net/http"

	"github.com/switchboard-mcp/switchboard/gateway/internal/methods"
	"github.com/switchboard-mcp/switchboard/gateway/internal/session"
	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

// openSession opens a sealed session id for principal and checks that no
// replica deleted it.
func (g *Gateway) openSession(r *http.Request, id string, principal *commonv1.Principal) (session.Claims, bool) {
	claims, err := g.sealer.Open(id, principal)
	if err != nil {
		return session.Claims{}, false
	}
	if g.revocations.Revoked(session.IDDigest(id)) {
		return session.Claims{}, false
	}
	return claims, true
}

// serveSessionDelete ends a session on every replica.
func (g *Gateway) serveSessionDelete(w http.ResponseWriter, r *http.Request, principal *commonv1.Principal) {
	ctx, span, rec := g.startRequest(r)
	defer g.finishRequest(span, rec)
	rec.era = mcpspec.EraLegacy
	rec.setMethod(span, "DELETE")
	id := r.Header.Get("Mcp-Session-Id")
	claims, ok := g.openSession(r, id, principal)
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

// serveSessionStream opens the session's GET stream of server
// notifications (see methods.Server.SessionStream).
func (g *Gateway) serveSessionStream(w http.ResponseWriter, r *http.Request, v methods.View, principal *commonv1.Principal) {
	ctx, span, rec := g.startRequest(r)
	defer g.finishRequest(span, rec)
	r = r.WithContext(ctx)
	rec.era = mcpspec.EraLegacy
	rec.setMethod(span, "GET")
	if !wire.AcceptsSSE(r.Header) {
		http.Error(w, "Not Acceptable: the GET stream is text/event-stream", http.StatusNotAcceptable)
		return
	}
	id := r.Header.Get("Mcp-Session-Id")
	claims, ok := g.openSession(r, id, principal)
	if !ok {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	req := &methods.Request{Era: mcpspec.EraLegacy, View: v, Principal: principal, Method: "GET",
		Session: session.IDDigest(id), SessionExpiry: claims.Expiry(), Version: claims.ProtocolVersion}
	if rerr := g.methods.SessionStream(ctx, req, newResponse(w)); rerr != nil {
		rec.outcome = "error"
		status := http.StatusServiceUnavailable
		if rerr.HTTPStatus != 0 {
			status = rerr.HTTPStatus
		}
		http.Error(w, http.StatusText(status)+": "+rerr.Message, status)
		return
	}
	rec.outcome = "ok"
}
