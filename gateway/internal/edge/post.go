package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/gateway/internal/auth"
	"github.com/switchboard-mcp/switchboard/gateway/internal/mcperr"
	"github.com/switchboard-mcp/switchboard/gateway/internal/methods"
	"github.com/switchboard-mcp/switchboard/gateway/internal/session"
	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	"github.com/switchboard-mcp/switchboard/services/audit"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

// serveMCP applies the edge protections (Host, Origin, CORS preflight:
// before authentication, so that neither a rebound page nor a browser's
// preflight, which carries no credential, meets an authentication
// answer), authenticates, and routes by HTTP method. The caller
// authenticates for the endpoint's audience: a virtual server's own when
// it has one, else the shared one. An endpoint of a virtual server that
// is not configured is 404, but only once the caller is authenticated
// (for the shared audience): an anonymous probe learns no server's name
// from it.
func (g *Gateway) serveMCP(w http.ResponseWriter, r *http.Request, at endpointAt) {
	if !g.guard(w, r, corsMethods) {
		return
	}
	servers := g.servers.Load()
	authState := g.auth.Load()
	audience := servers.audience(r, at)
	principal, err := authState.authn.Authenticate(r, audience)
	if err != nil {
		g.unauthorized(w, r, r.URL.Path, err)
		return
	}
	ep, ok := g.resolveEndpoint(r, at, servers)
	if !ok {
		http.NotFound(w, r)
		return
	}
	// A stream is held with its credential, and ends with it.
	cred := streamCredential{at: at, state: authState, servers: servers}
	switch r.Method {
	case http.MethodPost:
		g.servePOST(w, r, ep, principal, subjectToken(authState, r), cred)
	case http.MethodGet, http.MethodDelete:
		if name := wire.RepeatedSessionHeader(r.Header); name != "" {
			http.Error(w, "Bad Request: "+name+" header sent more than once", http.StatusBadRequest)
			return
		}
		if mcpspec.Classify(mcpspec.Signals{HTTPMethod: r.Method, SessionID: r.Header.Get("Mcp-Session-Id")}) != mcpspec.EraLegacy {
			// Modern has no GET stream and no DELETE; only a Legacy
			// session has them.
			w.Header().Set("Allow", "POST")
			http.Error(w, "Method Not Allowed: GET and DELETE need a Legacy (2025-11-25) Mcp-Session-Id", http.StatusMethodNotAllowed)
			return
		}
		if r.Method == http.MethodGet {
			g.serveSessionStream(w, r, ep, principal, cred)
		} else {
			g.serveSessionDelete(w, r, ep, principal)
		}
	default:
		w.Header().Set("Allow", "GET, POST, DELETE, OPTIONS")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
	}
}

// subjectToken is the caller's own validated bearer token, forwarded to
// the aggregator for backends that act as the caller: only an OIDC token
// (an API key is the gateway's own secret, never a backend's), and only
// after Authenticate accepted it. It is a secret: never logged.
func subjectToken(a *authState, r *http.Request) string {
	if a.cfg.Mode != "oidc" {
		return ""
	}
	tok, _ := auth.BearerToken(r)
	return tok
}

// servePOST reads one JSON-RPC message and serves it in its era.
func (g *Gateway) servePOST(w http.ResponseWriter, r *http.Request, ep endpoint, principal *commonv1.Principal, subject string, cred streamCredential) {
	ctx, span, rec := g.startRequest(r)
	defer func() {
		g.auditRefusal(ctx, rec)
		g.finishRequest(span, rec)
	}()
	body, err := g.readBody(w, r)
	if err != nil {
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			g.refuse(w, r, rec, http.StatusRequestEntityTooLarge, nil, wire.NewError(wire.CodeInvalidRequest, "request body too large"))
		case errors.Is(err, os.ErrDeadlineExceeded):
			// The connection cannot carry another request: the rest of
			// the body may still be on its way.
			w.Header().Set("Connection", "close")
			g.refuse(w, r, rec, http.StatusRequestTimeout, nil, wire.NewError(wire.CodeInvalidRequest, "request body not received in time"))
		default:
			g.refuse(w, r, rec, http.StatusBadRequest, nil, wire.NewError(wire.CodeParseError, "cannot read request body"))
		}
		return
	}
	msg, id, rerr := wire.Parse(body)
	if rerr != nil {
		if msg != nil && msg.Method != "" && !msg.IsNotification() {
			// A request refused as it is read is recorded by what was
			// read of it, as one refused later is (auditRefusal).
			rec.req = &methods.Request{View: ep.view, Server: ep.server, Principal: principal, Method: msg.Method, Params: msg.Params, Header: r.Header}
		}
		if typeErr := wire.CheckBodyType(r.Header); typeErr != nil {
			// Not JSON as sent, and not said to be: refused for its type
			// or coding, as one that parses is below (Streamable HTTP's
			// 415).
			g.refuse(w, r, rec, http.StatusUnsupportedMediaType, id, typeErr)
			return
		}
		g.refuse(w, r, rec, http.StatusBadRequest, id, rerr)
		return
	}
	ctx, span = g.joinMetaTrace(ctx, span, rec, msg.Params)
	if ctx != r.Context() {
		// A copy of the request per call otherwise: only a span changes
		// the context.
		r = r.WithContext(ctx)
	}
	rec.method = msg.Method
	describe(span, msg)
	method := mcpspec.Methods[msg.Method]
	if method.Streams {
		// A stream lives long: it keeps only what it reads (the era's
		// _meta and its notifications filter), not the whole body, and
		// only so much of that.
		rerr := msg.Detach("_meta", "notifications")
		if rerr != nil && len(id) > wire.MaxStreamIDBytes {
			id = nil // not echoed: the answer would be as long
		} else if rerr == nil && len(msg.Params["_meta"]) > wire.MaxStreamMetaBytes {
			rerr = wire.InvalidParams(fmt.Sprintf("the _meta of a streaming request is longer than %d bytes", wire.MaxStreamMetaBytes))
		}
		if rerr != nil {
			g.refuse(w, r, rec, http.StatusBadRequest, id, rerr)
			return
		}
	}
	req := &methods.Request{View: ep.view, Server: ep.server, Principal: principal, SubjectToken: subject, ID: msg.ID, Method: msg.Method, Params: msg.Params, Header: r.Header}
	if method.Streams || method.Waits {
		// It lives as long as its credential does: no longer acting for a
		// caller whose key was removed or whose token expired.
		var release func()
		ctx, release = g.holdStream(ctx, r, principal, cred, ep, method.Streams, req)
		defer release()
		r = r.WithContext(ctx)
	}
	req.Meta, _ = wire.Meta(msg.Params)
	if !msg.IsNotification() && !msg.IsResponse {
		rec.req = req
	}
	if typeErr := wire.CheckBodyType(r.Header); typeErr != nil {
		g.refuse(w, r, rec, http.StatusUnsupportedMediaType, id, typeErr)
		return
	}
	if !wire.AcceptsBoth(r.Header) {
		g.refuse(w, r, rec, http.StatusBadRequest, id, wire.NewError(wire.CodeInvalidRequest, "Accept must list application/json and text/event-stream"))
		return
	}
	if name := wire.RepeatedSessionHeader(r.Header); name != "" {
		g.refuse(w, r, rec, http.StatusBadRequest, id, wire.NewError(wire.CodeInvalidRequest, name+" header sent more than once"))
		return
	}
	headerVersion := r.Header.Get("Mcp-Protocol-Version")
	sessionID := r.Header.Get("Mcp-Session-Id")
	req.Era = mcpspec.Classify(mcpspec.Signals{HTTPMethod: r.Method, HeaderVersion: headerVersion, SessionID: sessionID,
		Method: msg.Method, MetaVersion: req.Meta[mcpspec.MetaProtocolVersion]})
	rec.era = req.Era
	switch {
	case req.Era == mcpspec.EraModern:
		g.serveModern(w, r, req, msg, rec, span)
	case req.Era == mcpspec.EraLegacy:
		g.serveLegacy(w, r, req, msg, sessionID, rec, span)
	case headerVersion != "" && !mcpspec.IsLegacyVersion(headerVersion):
		g.refuse(w, r, rec, http.StatusBadRequest, msg.ID, wire.UnsupportedVersion(headerVersion))
	case msg.Method == "ping" && !msg.IsNotification():
		// Legacy clients may ping before initialize, so without a session.
		rec.era, rec.outcome = mcpspec.EraLegacy, "ok"
		writeJSON(w, http.NewResponseController(w), http.StatusOK, msg.ID, []byte(`{}`), nil)
	case msg.IsNotification() || msg.IsResponse:
		// A notification with no era markers (a Legacy client that lost
		// its session, or an SDK's stray cancellation): nothing to do.
		rec.outcome = "ok"
		w.WriteHeader(http.StatusAccepted)
	default:
		g.refuse(w, r, rec, http.StatusBadRequest, msg.ID, wire.InvalidParams(
			`missing _meta "`+mcpspec.MetaProtocolVersion+`" (MCP 2026-07-28), or Mcp-Session-Id (MCP 2025-11-25: send initialize first)`))
	}
}

// refuse answers a message the edge refuses before a method runs with
// rerr, and notes rerr in the request's record: its metrics and spans
// (outcome rejected) and, for a request the trail records, its audit
// event (auditRefusal). Such a request takes its rate-limit token first,
// and is answered as rate limited once its principal's are used up
// (heldToLimit).
func (g *Gateway) refuse(w http.ResponseWriter, r *http.Request, rec *requestRecord, status int, id json.RawMessage, rerr *wire.Error) {
	if limited := g.heldToLimit(r.Context(), rec.req, rerr); limited != nil {
		rerr, status = limited, limited.ModernStatus()
		setRetryAfter(w, rerr)
	}
	rec.err = rerr
	writeJSON(w, http.NewResponseController(w), status, id, nil, rerr)
}

// readBody reads the request body within its size bound. Its time is
// bounded by the server (opshttp.BoundBodies, at http.bodyTimeout), so
// that a client sending it slowly cannot hold a goroutine and a buffer for
// long; net/http lifts that deadline once the body is read to its end
// (reported with the last byte of a declared length), so a long answer
// after it is not cut. A body declared longer than the bound is refused
// before a byte of it is read: net/http invites a client that sent
// Expect: 100-continue to send its body on the first read, and such a
// body would only be cut.
func (g *Gateway) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if limit := g.cfg.HTTP.MaxBodyBytes; r.ContentLength > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	return readAll(http.MaxBytesReader(w, r.Body, g.cfg.HTTP.MaxBodyBytes), r.ContentLength)
}

// readAll is io.ReadAll for request bodies: the buffer grows fourfold as
// bytes arrive (io.ReadAll grows by a quarter at a time, so a body of
// megabytes costs several times its size in garbage) and, when the client
// declared its length, stops at exactly that size. It never holds more
// than four times what was received, so a declared length costs nothing
// until the bytes come.
func readAll(r io.Reader, declared int64) ([]byte, error) {
	const first = 16 << 10
	size := int64(first)
	if declared >= 0 {
		size = min(size, declared+1) // +1: room to see the end of the body
	}
	buf := make([]byte, 0, size)
	for {
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
		if len(buf) == cap(buf) {
			next := int64(4 * cap(buf))
			if declared >= 0 && int64(len(buf)) <= declared {
				next = min(next, declared+1)
			}
			buf = append(make([]byte, 0, next), buf...)
		}
	}
}

// serveModern validates a Modern request against every wire rule, then
// serves it.
func (g *Gateway) serveModern(w http.ResponseWriter, r *http.Request, req *methods.Request, msg *wire.Message, rec *requestRecord, span trace.Span) {
	if msg.IsResponse {
		// Modern has no server-to-client requests, so there is nothing a
		// client may answer.
		g.refuse(w, r, rec, http.StatusBadRequest, nil, wire.NewError(wire.CodeInvalidRequest, "invalid request: MCP 2026-07-28 clients must not send responses"))
		return
	}
	if msg.IsNotification() {
		if rerr := wire.CheckHeader(r.Header, "Mcp-Method", msg.Method); rerr != nil {
			g.refuse(w, r, rec, http.StatusBadRequest, nil, rerr)
			return
		}
		// The only client notification 2026-07-28 knows is
		// notifications/cancelled, which is meaningful on stdio only:
		// over HTTP, closing the response stream cancels.
		rec.outcome = "ok"
		w.WriteHeader(http.StatusAccepted)
		return
	}
	resp := newResponse(w)
	modern, rerr := wire.CheckModern(r.Header, msg.Method, msg.Params, req.Meta)
	if rerr != nil {
		if limited := g.heldToLimit(r.Context(), req, rerr); limited != nil {
			rerr = limited
		}
		rec.done(rerr)
		resp.finish(req.ID, nil, rerr, true)
		return
	}
	req.Version, req.ClientCaps = modern.Version, modern.ClientCaps
	span.SetAttributes(attribute.String("mcp.protocol.version", req.Version))
	g.serve(r.Context(), req, resp, rec, nil)
}

// serveLegacy serves initialize and every request of an existing session.
// Legacy errors travel as JSON-RPC errors in HTTP 200; only session and
// transport problems get HTTP error statuses.
func (g *Gateway) serveLegacy(w http.ResponseWriter, r *http.Request, req *methods.Request, msg *wire.Message, sessionID string, rec *requestRecord, span trace.Span) {
	resp := newResponse(w)
	if msg.Method == "initialize" && !msg.IsNotification() {
		span.SetAttributes(attribute.String("mcp.protocol.version", mcpspec.Legacy))
		start := time.Now()
		result, id, rerr := g.methods.Initialize(r.Context(), req)
		if id != "" {
			w.Header().Set("Mcp-Session-Id", id)
		}
		g.auditSession(r.Context(), audit.KindSessionStart, start, req.Principal, req.Server, id, rerr, 0)
		// Recorded here, with its session: not again as a refusal.
		req.Trail.Asked = true
		rec.done(rerr)
		resp.finish(req.ID, result, rerr, false)
		return
	}
	claims, digest, ok := g.openSession(r, sessionID, req.Principal, req.Server)
	if !ok {
		g.refuse(w, r, rec, http.StatusNotFound, msg.ID, wire.NewError(wire.CodeInvalidRequest, "session not found: initialize a new session"))
		return
	}
	if why := versionMismatch(r, claims); why != "" {
		g.refuse(w, r, rec, http.StatusBadRequest, msg.ID, wire.NewError(wire.CodeInvalidRequest, why))
		return
	}
	req.Version = claims.ProtocolVersion
	req.Session, req.SessionExpiry = digest, claims.Expiry()
	span.SetAttributes(attribute.String("mcp.protocol.version", req.Version))
	if msg.IsResponse {
		// The client's answer to an input request sent on a response
		// stream: by this replica, or by another one it is relayed to
		// (anything else is dropped).
		if reply := msg.Reply.Encode(); !g.local.DeliverReply(req.Session, msg.ID, reply) {
			g.shared.Relay(r.Context(), req.Session, session.PrincipalDigest(req.Principal), msg.ID, reply)
		}
		rec.outcome = "ok"
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if msg.IsNotification() {
		// notifications/cancelled ends the request it names: here if it
		// runs here, else on whichever replica runs it (relayed through
		// the indexer, within bounds); initialized and
		// roots/list_changed need no action.
		if msg.Method == "notifications/cancelled" {
			if id, ok := msg.Params["requestId"]; ok && !g.local.Cancel(req.Session, id) {
				err := g.shared.RelayCancellation(r.Context(), req.Session, session.PrincipalDigest(req.Principal), id)
				if errors.Is(err, session.ErrCancellationsLimited) {
					// A rate limit like any other: error code 429 in an HTTP 429 with
					// Retry-After (the relay's rate refills in a second).
					rec.outcome = "rejected"
					resp.finish(nil, nil, mcperr.RateLimited("1"), false)
					return
				}
			}
		}
		rec.outcome = "ok"
		w.WriteHeader(http.StatusAccepted)
		return
	}
	req.ClientCaps = claims.ClientCapabilities
	// The request can be cancelled by the session's notifications/cancelled
	// naming its id, as long as it runs. In this era that is the only
	// cancellation: a disconnect is not one (a proxy's idle timeout or a
	// network blip must not stop a tool with side effects halfway), so a
	// request answered once it ends runs to its end, bounded as ever by
	// the request timeout of each call to the services, and its answer is
	// dropped if the client is gone; a wait for the client's own input
	// ends when a keep-alive cannot be written. A stream (a GET, a
	// tasks/result waiting) ends with its connection.
	parent := r.Context()
	if m := mcpspec.Methods[msg.Method]; !m.Streams && !m.Waits {
		parent = context.WithoutCancel(parent)
	}
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	if parent != r.Context() {
		defer g.runOnWhenDropped(r.Context(), req.Session, claims.PrincipalDigest, cancel)()
	}
	cancelled, done := g.local.Track(req.Session, msg.ID, cancel)
	defer done()
	g.serve(ctx, req, resp, rec, cancelled)
}

// runOnWhenDropped counts a request of session whose connection (conn)
// drops as running on, as a session has only so many such requests
// (session.Local.Detach); past them it ends the request with cancel, as
// a cancelled one ends. The function it returns is called when the
// request ends.
func (g *Gateway) runOnWhenDropped(conn context.Context, session, principal string, cancel context.CancelFunc) (ended func()) {
	var release func()
	detached := make(chan struct{})
	stop := context.AfterFunc(conn, func() {
		defer close(detached)
		var ok bool
		if release, ok = g.local.Detach(session, principal); !ok {
			cancel()
		}
	})
	return func() {
		if !stop() {
			<-detached
			if release != nil {
				release()
			}
		}
	}
}

// serve runs a validated request's method and writes its outcome.
// cancelled, for a Legacy request, reports that its client cancelled it:
// the spec says the server then sends no response, so the answer is a
// stream that ends without one.
func (g *Gateway) serve(ctx context.Context, req *methods.Request, resp *response, rec *requestRecord, cancelled func() bool) {
	result, rerr := g.methods.Serve(ctx, req, resp)
	refusal := rerr
	if refusal == nil {
		// A meta-tool's error result the gateway answered itself.
		refusal = req.Trail.Refused
	}
	if limited := g.heldToLimit(ctx, req, refusal); limited != nil {
		result, rerr = nil, limited
	}
	rec.done(rerr)
	if rec.outcome == "error" && errors.Is(context.Cause(ctx), context.Canceled) {
		// It failed because its client went away: a Modern client's
		// cancellation (closing the response stream), or a Legacy
		// client's dropped connection past its session's bound. Given
		// up on, not a failure of the service.
		rec.outcome = "cancelled"
	}
	if cancelled != nil && cancelled() {
		rec.outcome = "cancelled"
		resp.startSSE()
		return
	}
	if result == nil && rerr == nil {
		// A stream that ended without a final response.
		return
	}
	resp.finish(req.ID, result, rerr, req.Era == mcpspec.EraModern)
}
