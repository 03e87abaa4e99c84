// Package edge is the gateway's HTTP handler, and only that: it applies the
// edge protections (Host, Origin, body size), authenticates the caller into
// a principal, reads the JSON-RPC message (package wire), decides its era
// (mcpspec.Classify), opens the Legacy session, hands the request to
// package methods and writes what comes back in the era's transport shape.
// It holds no catalog and no business rules.
package edge

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/gateway/internal/auth"
	"github.com/switchboard-mcp/switchboard/gateway/internal/methods"
	"github.com/switchboard-mcp/switchboard/gateway/internal/session"
	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/hostguard"
	"github.com/switchboard-mcp/switchboard/services/ratelimit"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// Deps are the gateway's collaborators.
type Deps struct {
	Aggregator aggregatorv1.AggregatorServiceClient
	// AggregatorHealth answers /readyz.
	AggregatorHealth healthpb.HealthClient
	// Servers are the virtual servers (servers[] of the configuration),
	// served at /mcp/<name>; SetServers replaces them.
	Servers []config.Server
	// Indexer serves find_tool and session revocations; nil disables both
	// (find_tool then answers with an error result, revocation stays local).
	Indexer indexerv1.IndexerServiceClient
	// ClusterState is the same indexer's ClusterStateService, for what
	// only it serves (ReleaseRequestState); nil when Indexer is.
	ClusterState indexerv1.ClusterStateServiceClient
	Auth         auth.Authenticator
	// AggregatorToken and IndexerToken are the service credentials the
	// connections above present, replaced by Reload; nil (both) leaves
	// gateway.aggregator.token and gateway.indexer.token to a restart.
	AggregatorToken, IndexerToken *svcauth.LiveToken
	// Config is the whole configuration the gateway starts with, which a
	// reload is compared with (Reload); nil: one with this gateway section
	// alone.
	Config  *config.Config
	Log     *slog.Logger
	Metrics *Metrics
	// LoopbackOnly reports that the listener is bound to a loopback address,
	// which turns on the DNS-rebinding Host check.
	LoopbackOnly bool
	// Audit records Legacy sessions' starts and ends, and the requests
	// of the trail's the gateway refuses itself (audit.go); nil: none.
	Audit *audit.Writer
	// Limiter takes the rate-limit tokens of the requests the gateway
	// refuses itself (ratelimit.go), from the buckets Indexer holds; nil:
	// they take none. Reload applies rateLimits to it.
	Limiter *ratelimit.Limiter
}

// Gateway is the MCP edge.
type Gateway struct {
	cfg       config.Gateway
	methods   *methods.Server
	aggHealth healthpb.HealthClient
	// auth and tokens are replaced by Reload (one at a time: reloadMu);
	// started is the configuration at start.
	auth atomic.Pointer[authState]
	// credStreams are the open notification streams with the credential
	// that opened each (credstreams.go).
	credStreams credentialStreams
	tokens      serviceTokens
	reloadMu    sync.Mutex
	started     *config.Config
	log         *slog.Logger
	metrics     *Metrics
	sealer      *session.Sealer
	revocations *session.Revocations
	local       *session.Local
	shared      *session.Shared
	loopback    bool
	rules       edgeRules
	// servers are the virtual servers by name (see SetServers).
	servers atomic.Pointer[serverTable]
	audit   *audit.Writer
	// limiter takes its refusals' tokens; rateLimits is the section it
	// applies (Reload).
	limiter    *ratelimit.Limiter
	rateLimits config.RateLimits
	// closing ends every notification stream at shutdown (see Close),
	// which sets graceEnds.
	closing   chan struct{}
	closeOnce sync.Once
	graceEnds time.Time
}

// New builds the gateway from its configuration section.
func New(cfg config.Gateway, deps Deps) (*Gateway, error) {
	if deps.Aggregator == nil || deps.Auth == nil {
		return nil, errors.New("edge: aggregator client and authenticator are required")
	}
	cfg = cfg.WithDefaults()
	log := deps.Log
	if log == nil {
		log = slog.Default()
	}
	sealer, err := session.NewSealer(cfg.Sessions.Key, time.Duration(cfg.Sessions.TTL))
	if err != nil {
		return nil, err
	}
	if cfg.Sessions.Key == "" {
		log.Warn("gateway.sessions.key is empty: using a random key, so Legacy sessions work on this replica only and end at restart")
	}
	info, _ := json.Marshal(map[string]string{"name": cfg.ServerInfo.Name, "version": cfg.ServerInfo.Version})
	metrics := deps.Metrics
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	limits := cfg.Sessions
	g := &Gateway{
		cfg:       cfg,
		aggHealth: deps.AggregatorHealth,
		started:   deps.Config,
		log:       log,
		metrics:   metrics,
		sealer:    sealer,
		revocations: session.NewRevocations(deps.Indexer,
			session.RevocationLimits{Total: limits.MaxDeleted, PerPrincipal: limits.MaxPerPrincipal}, log),
		local: session.NewLocal(session.Limits{Subscriptions: limits.MaxSubscriptions, URIBytes: limits.MaxURIBytes,
			PerPrincipal: limits.MaxPerPrincipal, PrincipalBytes: limits.MaxPrincipalStateBytes, TotalBytes: limits.MaxStateBytes}),
		loopback: deps.LoopbackOnly,
		rules:    newEdgeRules(cfg),
		closing:  make(chan struct{}),
		audit:    deps.Audit,
		limiter:  deps.Limiter,
	}
	if deps.Config != nil {
		g.rateLimits = deps.Config.RateLimits
	}
	// A session deleted through another replica ends its requests and
	// GET streams here as soon as the revocation arrives.
	g.revocations.OnRevoked(g.local.EndSession)
	g.SetServers(deps.Servers)
	if g.started == nil {
		g.started = &config.Config{Gateway: cfg}
	}
	g.auth.Store(&authState{authn: deps.Auth, cfg: cfg.Auth})
	g.tokens = serviceTokens{aggregator: deps.AggregatorToken, indexer: deps.IndexerToken,
		aggregatorValue: cfg.Aggregator.Token, indexerValue: cfg.Indexer.Token}
	if err := g.revocations.RegisterMetrics(metrics.registry); err != nil {
		return nil, err
	}
	if err := metrics.registerSessionState(g.local); err != nil {
		return nil, err
	}
	g.shared = session.NewShared(deps.Indexer, g.local, sealer, log)
	if err := g.shared.RegisterMetrics(metrics.registry); err != nil {
		return nil, err
	}
	g.methods = methods.New(methods.Config{
		ServerInfo:          info,
		Instructions:        cfg.ServerInfo.Instructions,
		CacheTTL:            time.Duration(cfg.Cache.TTL),
		RequestTimeout:      time.Duration(cfg.Timeouts.Request),
		ClientInput:         time.Duration(cfg.Timeouts.ClientInput),
		KeepAlive:           time.Duration(cfg.HTTP.KeepAlive),
		SearchLimit:         uint32(cfg.Optimizer.Limit),
		StreamsPerPrincipal: cfg.Streams.MaxPerPrincipal,
		MaxStreams:          cfg.Streams.MaxOpen,
		MaxURIBytes:         cfg.Sessions.MaxURIBytes,
		MaxSubscriptions:    cfg.Sessions.MaxSubscriptions,
	}, methods.Deps{
		Aggregator: deps.Aggregator, Indexer: deps.Indexer, Sealer: sealer, StateUses: session.NewStateUses(deps.Indexer, deps.ClusterState, log), Local: g.local, Shared: g.shared, Revoked: g.revocations.Revoked, Log: log,
		Streams: metrics.openStream, Closing: g.closing,
	})
	return g, nil
}

// Close ends every open notification stream, so that an HTTP server's
// graceful shutdown is not held up by them; clients reconnect elsewhere.
// The shutdown grace begins. Register it with
// http.Server.RegisterOnShutdown, and call Stop once the server is shut.
func (g *Gateway) Close() {
	g.closeOnce.Do(func() {
		g.graceEnds = time.Now().Add(time.Duration(g.cfg.ShutdownGrace))
		close(g.closing)
		g.shared.Close()
	})
}

// minDeletionDrain is how long a stopping gateway at least has to send
// its last session deletions, however long its requests took to end.
const minDeletionDrain = 2 * time.Second

// Stop ends the gateway's background work once it serves no more
// requests. Session deletions made here that the indexer has not
// recorded yet, those made during the shutdown grace included, are sent
// until the grace Close began ends (at least minDeletionDrain).
func (g *Gateway) Stop() {
	g.Close()
	deadline := g.graceEnds
	if least := time.Now().Add(minDeletionDrain); deadline.Before(least) {
		deadline = least
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	g.revocations.Close(ctx)
}

// Handler serves MCP and the operational endpoints:
//
//	/mcp             the raw view, or the optimizer view when gateway.optimizer.enabled
//	/mcp/raw         the raw view (aggregated tools), always
//	/mcp/optimized   the optimizer view (find_tool, call_tool), always
//	/mcp/<server>[/raw|/optimized]   the same three for a virtual server (servers[]);
//	                 the first as servers[].optimizer says, else as gateway.optimizer.enabled
//	/.well-known/oauth-protected-resource[/mcp[/<server>][/raw|/optimized]]   RFC 9728 metadata
//	/healthz, /readyz, /metrics
func (g *Gateway) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(pathMCP, g.mcpHandler(endpointAt{variant: variantMain}))
	mux.Handle(pathMCPRaw, g.mcpHandler(endpointAt{variant: variantRaw}))
	mux.Handle(pathMCPOptimized, g.mcpHandler(endpointAt{variant: variantOptimized}))
	mux.Handle(pathServer, g.mcpHandler(endpointAt{variant: variantMain, ofServer: true}))
	mux.Handle(pathServer+"/raw", g.mcpHandler(endpointAt{variant: variantRaw, ofServer: true}))
	mux.Handle(pathServer+"/optimized", g.mcpHandler(endpointAt{variant: variantOptimized, ofServer: true}))
	mux.HandleFunc(wellKnownPRM, g.serveResourceMetadata)
	mux.HandleFunc(wellKnownPRM+"/", g.serveResourceMetadata)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", g.serveReady)
	mux.Handle("/metrics", g.metrics.Handler())
	return g.checkHost(mux)
}

// checkHost applies the ops ports' Host rule (hostguard.Named: an IP
// literal, localhost, or a name of gateway.http.allowedHosts or
// publicURL) to /readyz and /metrics, which guard does not cover
// (/healthz tells nothing and stays open): a rebound page could otherwise
// read them with a same-origin GET, which carries no Origin, on any bind.
// kubelet and Prometheus address a pod by its IP; a rebound page always
// sends its own name.
func (g *Gateway) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ops := r.URL.Path == "/readyz" || r.URL.Path == "/metrics"
		// A configured name:port entry counts as hostAllowed reads it.
		named := hostguard.Named(r.Host, g.rules.hosts) || len(g.rules.hosts) > 0 && g.hostAllowed(r)
		if ops && !named {
			http.Error(w, "Forbidden: Host not allowed", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (g *Gateway) mcpHandler(at endpointAt) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { g.serveMCP(w, r, at) })
}

// serveReady reports ready when the aggregator answers its health check.
// Over a connection balanced across aggregator replicas, a check can go to
// a replica in the instant it goes away and fail UNAVAILABLE while the
// others serve; the balancer drops that replica at once, so a second check
// tells one replica gone from all of them, and one aggregator replica's
// end does not take every gateway out of its load balancer together.
func (g *Gateway) serveReady(w http.ResponseWriter, r *http.Request) {
	if g.aggHealth == nil {
		_, _ = io.WriteString(w, "ok\n")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	resp, err := g.aggHealth.Check(ctx, &healthpb.HealthCheckRequest{})
	if status.Code(err) == codes.Unavailable && ctx.Err() == nil {
		resp, err = g.aggHealth.Check(ctx, &healthpb.HealthCheckRequest{})
	}
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		http.Error(w, "aggregator not ready", http.StatusServiceUnavailable)
		return
	}
	_, _ = io.WriteString(w, "ok\n")
}
