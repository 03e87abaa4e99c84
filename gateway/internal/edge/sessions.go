package edge

import (
	"errors"
	"net/http"

	"github.com/switchboard-mcp/switchboard/gateway/internal/methods"
	"github.com/switchboard-mcp/switchboard/gateway/internal/session"
	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	"github.com/switchboard-mcp/switchboard/services/audit"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

// openSession opens a sealed session id for principal at the virtual
// server named server and checks that no replica deleted it; it returns
// the session's claims and its id's digest (session.IDDigest, computed
// once per request). A session of another server is unknown here, like
// any other session that is not this principal's.
func (g *Gateway) openSession(r *http.Request, id string, principal *commonv1.Principal, server string) (session.Claims, string, bool) {
	claims, err := g.sealer.Open(id, principal)
	if err != nil || claims.Server != server {
		return session.Claims{}, "", false
	}
	digest := session.IDDigest(id)
	if g.revocations.Revoked(digest) {
		return session.Claims{}, "", false
	}
	return claims, digest, true
}

// versionMismatch is why r, naming in MCP-Protocol-Version a version
// other than its session's, is a bad request, or "": the same on every
// request of the session, POST, GET and DELETE alike.
func versionMismatch(r *http.Request, claims session.Claims) string {
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && v != claims.ProtocolVersion {
		return "MCP-Protocol-Version does not match the session's version " + claims.ProtocolVersion
	}
	return ""
}

// serveSessionDelete ends a session, and what it has running (its
// requests in flight, its GET streams): on this replica at once, on the
// others once the indexer has it (session.Revocations publishes it in the
// background, so a DELETE never waits on the indexer). Past the bounds of
// what this replica records (gateway.sessions.maxPerPrincipal,
// maxDeleted) the DELETE is refused and the session stays usable until it
// expires.
func (g *Gateway) serveSessionDelete(w http.ResponseWriter, r *http.Request, ep endpoint, principal *commonv1.Principal) {
	ctx, span, rec := g.startRequest(r)
	defer g.finishRequest(span, rec)
	rec.era = mcpspec.EraLegacy
	rec.setMethod(span, "DELETE")
	id := r.Header.Get("Mcp-Session-Id")
	status := http.StatusNoContent
	var refused *wire.Error
	defer func() {
		g.auditSession(ctx, audit.KindSessionEnd, rec.start, principal, ep.server, id, refused, status)
	}()
	claims, digest, ok := g.openSession(r, id, principal, ep.server)
	if !ok {
		status = http.StatusNotFound
		http.Error(w, "session not found", status)
		return
	}
	if why := versionMismatch(r, claims); why != "" {
		// Refused: the session stays open, and the trail says so.
		status, refused = http.StatusBadRequest, wire.NewError(wire.CodeInvalidRequest, why)
		http.Error(w, "Bad Request: "+why, status)
		return
	}
	switch err := g.revocations.Revoke(digest, claims.PrincipalDigest, claims.Expiry()); {
	case errors.Is(err, session.ErrPrincipalDeletedLimit):
		status = http.StatusTooManyRequests
		w.Header().Set("Retry-After", retryDeleteAfter)
		http.Error(w, "Too Many Requests: this principal deleted as many sessions as this gateway records; the session stays open until it expires", http.StatusTooManyRequests)
		return
	case err != nil:
		status = http.StatusServiceUnavailable
		g.log.WarnContext(ctx, "session deletion refused", "err", err)
		w.Header().Set("Retry-After", retryDeleteAfter)
		http.Error(w, "Service Unavailable: this gateway records as many deleted sessions as it may; the session stays open until it expires", http.StatusServiceUnavailable)
		return
	}
	g.local.Forget(digest)
	g.local.EndSession(digest)
	rec.outcome = "ok"
	w.WriteHeader(http.StatusNoContent)
}

// retryDeleteAfter is the Retry-After of a refused DELETE, in seconds:
// records make room as the sessions they hold expire.
const retryDeleteAfter = "60"

// serveSessionStream opens the session's GET stream of server
// notifications (see methods.Server.SessionStream).
func (g *Gateway) serveSessionStream(w http.ResponseWriter, r *http.Request, ep endpoint, principal *commonv1.Principal, cred streamCredential) {
	ctx, span, rec := g.startRequest(r)
	defer g.finishRequest(span, rec)
	req := &methods.Request{Era: mcpspec.EraLegacy, View: ep.view, Server: ep.server, Principal: principal, Method: "GET"}
	ctx, release := g.holdStream(ctx, r, principal, cred, ep, true, req)
	defer release()
	r = r.WithContext(ctx)
	rec.era = mcpspec.EraLegacy
	rec.setMethod(span, "GET")
	if !wire.AcceptsSSE(r.Header) {
		http.Error(w, "Not Acceptable: the GET stream is text/event-stream", http.StatusNotAcceptable)
		return
	}
	id := r.Header.Get("Mcp-Session-Id")
	claims, digest, ok := g.openSession(r, id, principal, ep.server)
	if !ok {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	if why := versionMismatch(r, claims); why != "" {
		http.Error(w, "Bad Request: "+why, http.StatusBadRequest)
		return
	}
	req.Session, req.SessionExpiry, req.Version = digest, claims.Expiry(), claims.ProtocolVersion
	req.Reconnected = r.Header.Get("Last-Event-ID") != ""
	if rerr := g.methods.SessionStream(ctx, req, newResponse(w)); rerr != nil {
		rec.outcome = "error"
		status := http.StatusServiceUnavailable
		if rerr.HTTPStatus != 0 {
			status = rerr.HTTPStatus
		}
		setRetryAfter(w, rerr)
		http.Error(w, http.StatusText(status)+": "+rerr.Message, status)
		return
	}
	rec.outcome = "ok"
}
