// Package edge is the gateway's MCP endpoint: one handler that serves MCP
// 2026-07-28 ("Modern", stateless, per-request _meta) and 2025-11-25
// ("Legacy", initialize plus sealed Mcp-Session-Id) over Streamable HTTP.
//
// The package holds no catalog and no business rules. It authenticates the
// caller into a principal, tells the eras apart, validates the wire, turns
// each MCP method into a call to the aggregator (or the indexer, for the
// optimizer's find_tool) and turns the answer back into that era's shape.
// MCP objects travel through as raw JSON so nothing a backend sent is lost.
package edge

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/switchboard-mcp/switchboard/gateway/internal/auth"
	"github.com/switchboard-mcp/switchboard/gateway/internal/session"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

// Protocol versions the gateway speaks, newest first.
const (
	versionModern = "2026-07-28"
	versionLegacy = "2025-11-25"
)

var supportedVersions = []string{versionModern, versionLegacy}

// olderLegacyVersions are versions a Legacy client may still announce in
// MCP-Protocol-Version; they are not rejected, the session pins 2025-11-25.
var olderLegacyVersions = map[string]bool{versionLegacy: true, "2025-06-18": true, "2025-03-26": true, "2024-11-05": true}

// era is the protocol generation a request is served under.
type era int

const (
	eraModern era = iota
	eraLegacy
)

func (e era) String() string {
	if e == eraLegacy {
		return "legacy"
	}
	return "modern"
}

// view selects the tool surface: the aggregated tools, or the optimizer's
// find_tool and call_tool.
type view int

const (
	viewRaw view = iota
	viewOptimized
)

// Defaults for settings left empty in gateway configuration.
const (
	defaultMaxBody        = 4 << 20
	defaultKeepAlive      = 15 * time.Second
	defaultCacheTTL       = 60 * time.Second
	defaultSessionTTL     = 24 * time.Hour
	defaultRequestTimeout = 2 * time.Minute
	defaultSearchLimit    = 8
	// headerSpecTTL bounds how long a tool's x-mcp-header declarations are
	// trusted without re-reading them from the aggregator.
	headerSpecTTL = 30 * time.Second
)

// Deps are the gateway's collaborators.
type Deps struct {
	Aggregator aggregatorv1.AggregatorServiceClient
	// AggregatorHealth answers /readyz.
	AggregatorHealth healthpb.HealthClient
	// Indexer serves find_tool and session revocations; nil disables both
	// (find_tool then answers with an error result, revocation stays local).
	Indexer indexerv1.IndexerServiceClient
	Auth    auth.Authenticator
	Log     *slog.Logger
	Metrics *Metrics
	// LoopbackOnly reports that the listener is bound to a loopback address,
	// which turns on the DNS-rebinding Host check.
	LoopbackOnly bool
}

// Gateway is the MCP edge.
type Gateway struct {
	cfg         config.Gateway
	agg         aggregatorv1.AggregatorServiceClient
	aggHealth   healthpb.HealthClient
	idx         indexerv1.IndexerServiceClient
	auth        auth.Authenticator
	log         *slog.Logger
	metrics     *Metrics
	sealer      *session.Sealer
	revocations *session.Revocations
	headerSpecs *headerSpecs
	pending     *pendingReplies
	logLevels   *sessionLogLevels
	// sessionResources are the Legacy sessions' resource subscriptions.
	sessionResources *sessionResources
	loopback         bool
	serverInfo       json.RawMessage

	maxBody        int64
	keepAlive      time.Duration
	cacheTTLms     int64
	requestTimeout time.Duration
	searchLimit    uint32
	// closing ends every notification stream at shutdown (see Close).
	closing   chan struct{}
	closeOnce sync.Once
}

// New builds the gateway from its configuration section.
func New(cfg config.Gateway, deps Deps) (*Gateway, error) {
	if deps.Aggregator == nil || deps.Auth == nil {
		return nil, errors.New("edge: aggregator client and authenticator are required")
	}
	log := deps.Log
	if log == nil {
		log = slog.Default()
	}
	sealer, err := session.NewSealer(cfg.Sessions.Key, cfg.Sessions.TTL.Or(defaultSessionTTL))
	if err != nil {
		return nil, err
	}
	if cfg.Sessions.Key == "" {
		log.Warn("gateway.sessions.key is empty: using a random key, so Legacy sessions work on this replica only and end at restart")
	}
	name := cfg.ServerInfo.Name
	if name == "" {
		name = "switchboard"
	}
	version := cfg.ServerInfo.Version
	if version == "" {
		version = "dev"
	}
	info, _ := json.Marshal(map[string]string{"name": name, "version": version})
	metrics := deps.Metrics
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	limit := cfg.Optimizer.Limit
	if limit <= 0 {
		limit = defaultSearchLimit
	}
	g := &Gateway{
		cfg:              cfg,
		agg:              deps.Aggregator,
		aggHealth:        deps.AggregatorHealth,
		idx:              deps.Indexer,
		auth:             deps.Auth,
		log:              log,
		metrics:          metrics,
		sealer:           sealer,
		revocations:      session.NewRevocations(deps.Indexer, log),
		headerSpecs:      newHeaderSpecs(deps.Aggregator, headerSpecTTL),
		pending:          newPendingReplies(),
		logLevels:        newSessionLogLevels(),
		sessionResources: newSessionResources(),
		loopback:         deps.LoopbackOnly,
		serverInfo:       info,
		maxBody:          cfg.HTTP.MaxBodyBytes,
		keepAlive:        cfg.HTTP.KeepAlive.Or(defaultKeepAlive),
		cacheTTLms:       cfg.Cache.TTL.Or(defaultCacheTTL).Milliseconds(),
		requestTimeout:   cfg.Timeouts.Request.Or(defaultRequestTimeout),
		searchLimit:      uint32(limit),
		closing:          make(chan struct{}),
	}
	if g.maxBody <= 0 {
		g.maxBody = defaultMaxBody
	}
	return g, nil
}

// Close ends every open notification stream, so that an HTTP server's
// graceful shutdown is not held up by them; clients reconnect elsewhere.
// Register it with http.Server.RegisterOnShutdown.
func (g *Gateway) Close() { g.closeOnce.Do(func() { close(g.closing) }) }

// Handler serves MCP and the operational endpoints:
//
//	/mcp             the raw view, or the optimizer view when gateway.optimizer.enabled
//	/mcp/raw         the raw view (aggregated tools), always
//	/mcp/optimized   the optimizer view (find_tool, call_tool), always
//	/.well-known/oauth-protected-resource   RFC 9728 metadata
//	/healthz, /readyz, /metrics
func (g *Gateway) Handler() http.Handler {
	mux := http.NewServeMux()
	main := viewRaw
	if g.cfg.Optimizer.Enabled {
		main = viewOptimized
	}
	mux.Handle("/mcp", g.mcpHandler(main))
	mux.Handle("/mcp/raw", g.mcpHandler(viewRaw))
	mux.Handle("/mcp/optimized", g.mcpHandler(viewOptimized))
	mux.HandleFunc("/.well-known/oauth-protected-resource", g.serveResourceMetadata)
	mux.HandleFunc("/.well-known/oauth-protected-resource/", g.serveResourceMetadata)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", g.serveReady)
	mux.Handle("/metrics", g.metrics.Handler())
	return mux
}

func (g *Gateway) mcpHandler(v view) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { g.serveMCP(w, r, v) })
}

// serveMCP applies the edge protections, authenticates, and routes by HTTP
// method.
func (g *Gateway) serveMCP(w http.ResponseWriter, r *http.Request, v view) {
	if !g.hostAllowed(r) {
		http.Error(w, "Forbidden: Host not allowed", http.StatusForbidden)
		return
	}
	if !g.originAllowed(r) {
		http.Error(w, "Forbidden: Origin not allowed", http.StatusForbidden)
		return
	}
	principal, err := g.auth.Authenticate(r)
	if err != nil {
		g.unauthorized(w, r, err)
		return
	}
	switch r.Method {
	case http.MethodPost:
		g.servePOST(w, r, v, principal)
	case http.MethodGet, http.MethodDelete:
		if r.Header.Get("Mcp-Session-Id") == "" {
			// Modern has no GET stream and no DELETE; only a Legacy
			// session has them.
			w.Header().Set("Allow", "POST")
			http.Error(w, "Method Not Allowed: GET and DELETE need a Legacy (2025-11-25) Mcp-Session-Id", http.StatusMethodNotAllowed)
			return
		}
		if r.Method == http.MethodGet {
			g.serveLegacyGET(w, r, v, principal)
		} else {
			g.serveLegacyDELETE(w, r, principal)
		}
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
	}
}

// call is one MCP request being served.
type call struct {
	era       era
	view      view
	principal *commonv1.Principal
	id        json.RawMessage
	method    string
	params    object
	// clientCaps are the client's declared capabilities: per request under
	// Modern, from the sealed session under Legacy.
	clientCaps object
	version    string
	r          *http.Request
	w          http.ResponseWriter
	// sessionKey is the digest of the Legacy session id (empty for Modern).
	sessionKey string
	// streaming is set once the response became an SSE stream (to carry
	// requests to a Legacy client); the final response then goes on it.
	streaming bool
}

func (g *Gateway) servePOST(w http.ResponseWriter, r *http.Request, v view, principal *commonv1.Principal) {
	ctx, span, rec := g.startRequest(r)
	defer g.finishRequest(span, rec)
	r = r.WithContext(ctx)

	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, g.maxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			rec.outcome = "rejected"
			writeJSON(w, http.StatusRequestEntityTooLarge, nil, nil, newError(codeInvalidRequest, "request body too large"))
			return
		}
		rec.outcome = "rejected"
		writeJSON(w, http.StatusBadRequest, nil, nil, newError(codeParseError, "cannot read request body"))
		return
	}
	msg, id, rerr := parseMessage(body)
	if rerr != nil {
		rec.outcome = "rejected"
		writeJSON(w, http.StatusBadRequest, id, nil, rerr)
		return
	}
	rec.setMethod(span, msg.Method)
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		rec.outcome = "rejected"
		writeJSON(w, http.StatusUnsupportedMediaType, id, nil, newError(codeInvalidRequest, "Content-Type must be application/json"))
		return
	}
	if !acceptsBoth(r) {
		rec.outcome = "rejected"
		writeJSON(w, http.StatusBadRequest, id, nil, newError(codeInvalidRequest, "Accept must list application/json and text/event-stream"))
		return
	}
	params := object{}
	if msg.Params != nil {
		if err := json.Unmarshal(msg.Params, &params); err != nil {
			rec.outcome = "rejected"
			writeJSON(w, http.StatusBadRequest, id, nil, newError(codeInvalidParams, "invalid params: params must be an object"))
			return
		}
	}
	c := &call{view: v, principal: principal, id: msg.ID, method: msg.Method, params: params, r: r, w: w}

	_, hasMetaVersion := metaString(params, metaProtocolVersion)
	headerVersion := r.Header.Get("Mcp-Protocol-Version")
	sessionID := r.Header.Get("Mcp-Session-Id")
	switch {
	case hasMetaVersion || (headerVersion >= versionModern && sessionID == "" && msg.Method != "initialize"):
		c.era = eraModern
		rec.era = c.era
		g.serveModern(w, c, msg, rec, span)
	case msg.Method == "initialize" || sessionID != "":
		c.era = eraLegacy
		rec.era = c.era
		g.serveLegacyPOST(w, c, msg, sessionID, rec, span)
	case msg.Method == "ping" && !msg.isNotification():
		// Legacy clients may ping before initialize, so without a session.
		rec.era = eraLegacy
		rec.outcome = "ok"
		writeJSON(w, http.StatusOK, msg.ID, json.RawMessage(`{}`), nil)
	case headerVersion != "" && !olderLegacyVersions[headerVersion]:
		rec.outcome = "rejected"
		writeJSON(w, http.StatusBadRequest, msg.ID, nil, unsupportedVersion(headerVersion))
	case msg.isNotification() || msg.IsResponse:
		// A notification with no era markers (a Legacy client that lost
		// its session, or an SDK's stray cancellation): nothing to do.
		rec.outcome = "ok"
		w.WriteHeader(http.StatusAccepted)
	default:
		rec.outcome = "rejected"
		writeJSON(w, http.StatusBadRequest, msg.ID, nil, newError(codeInvalidParams,
			`invalid params: missing _meta "`+metaProtocolVersion+`" (MCP 2026-07-28), or Mcp-Session-Id (MCP 2025-11-25: send initialize first)`))
	}
}

// respond writes a method's outcome in the request's era.
func (g *Gateway) respond(w http.ResponseWriter, c *call, rec *requestRecord, result json.RawMessage, rerr *rpcError) {
	if c.streaming {
		rec.outcome = "ok"
		if rerr != nil {
			rec.outcome = "error"
		}
		_, _ = w.Write(sseEvent(encodeResponse(c.id, result, rerr)))
		_ = http.NewResponseController(w).Flush()
		return
	}
	if rerr != nil {
		rec.outcome = "error"
		status := http.StatusOK
		if c.era == eraModern {
			status = rerr.modernStatus()
		}
		writeJSON(w, status, c.id, nil, rerr)
		return
	}
	rec.outcome = "ok"
	writeJSON(w, http.StatusOK, c.id, result, nil)
}

func unsupportedVersion(requested string) *rpcError {
	e := newError(codeUnsupportedVer, "unsupported protocol version: "+requested)
	e.Data = map[string]any{"supported": supportedVersions, "requested": requested}
	return e
}

// metaString reads a string key of params._meta.
func metaString(params object, key string) (string, bool) {
	meta, ok := metaObject(params)
	if !ok {
		return "", false
	}
	raw, ok := meta[key]
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		// Present but not a string: still a Modern request, and an
		// invalid one.
		return "", true
	}
	return s, true
}

func metaObject(params object) (object, bool) {
	raw, ok := params["_meta"]
	if !ok {
		return nil, false
	}
	var meta object
	if json.Unmarshal(raw, &meta) != nil || meta == nil {
		return nil, false
	}
	return meta, true
}

func acceptsBoth(r *http.Request) bool {
	var jsonOK, sseOK bool
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			switch mt {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				sseOK = true
			case "*/*":
				jsonOK, sseOK = true, true
			}
		}
	}
	return jsonOK && sseOK
}

func acceptsSSE(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && (mt == "text/event-stream" || mt == "text/*" || mt == "*/*") {
				return true
			}
		}
	}
	return false
}

// hostAllowed guards against DNS rebinding: with configured allowed hosts
// the Host must be one of them; on a loopback bind it must be a loopback
// name.
func (g *Gateway) hostAllowed(r *http.Request) bool {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if len(g.cfg.HTTP.AllowedHosts) > 0 {
		for _, a := range g.cfg.HTTP.AllowedHosts {
			if strings.EqualFold(a, host) || strings.EqualFold(a, r.Host) {
				return true
			}
		}
		return false
	}
	if !g.loopback {
		return true
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// originAllowed validates a browser's Origin: allowed when listed, or when it
// names the host the request was sent to. Requests without Origin (non-browser
// clients) pass.
func (g *Gateway) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	for _, a := range g.cfg.HTTP.AllowedOrigins {
		if a == "*" || strings.EqualFold(a, origin) {
			return true
		}
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

func (g *Gateway) unauthorized(w http.ResponseWriter, r *http.Request, err error) {
	w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token", resource_metadata="`+g.publicBase(r)+`/.well-known/oauth-protected-resource"`)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_token", "error_description": err.Error()})
}

// publicBase is the base URL clients reach the gateway at: gateway.publicURL
// when configured (behind a proxy or load balancer), else the scheme and
// Host of the request itself.
func (g *Gateway) publicBase(r *http.Request) string {
	if g.cfg.PublicURL != "" {
		return strings.TrimSuffix(g.cfg.PublicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// serveResourceMetadata serves RFC 9728 protected-resource metadata.
func (g *Gateway) serveResourceMetadata(w http.ResponseWriter, r *http.Request) {
	meta := map[string]any{
		"resource":                 g.publicBase(r) + "/mcp",
		"bearer_methods_supported": []string{"header"},
		"resource_name":            "Switchboard MCP gateway",
	}
	if g.cfg.Auth.Mode == "oidc" {
		meta["authorization_servers"] = []string{g.cfg.Auth.OIDC.Issuer}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(meta)
}

// serveReady reports ready when the aggregator answers its health check.
func (g *Gateway) serveReady(w http.ResponseWriter, r *http.Request) {
	if g.aggHealth == nil {
		_, _ = io.WriteString(w, "ok\n")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	resp, err := g.aggHealth.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		http.Error(w, "aggregator not ready", http.StatusServiceUnavailable)
		return
	}
	_, _ = io.WriteString(w, "ok\n")
}

// spanFrom is a shorthand used by handlers that annotate the request span.
func spanFrom(ctx context.Context) trace.Span { return trace.SpanFromContext(ctx) }
