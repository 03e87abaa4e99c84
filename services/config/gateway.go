package config

import (
	"errors"
	"time"
)

// Gateway configures the MCP edge (switchboard-gateway). Unset values take
// the defaults named below, applied by the gateway.
type Gateway struct {
	// Listen is the HTTP address (default 127.0.0.1:8080). MCP is served at
	// /mcp, with /mcp/raw and /mcp/optimized beside it; /healthz, /readyz,
	// /metrics and /.well-known/oauth-protected-resource on the same port.
	// On a loopback address the Host header must be a loopback name (DNS
	// rebinding protection) unless http.allowedHosts says otherwise.
	Listen string `yaml:"listen"`
	// OpsListen, when set, serves /healthz, /readyz, /metrics and (with
	// ops.pprof) /debug/pprof/ on a port of their own, apart from MCP
	// traffic; empty disables. The MCP port keeps its own /healthz,
	// /readyz and /metrics either way, but never the profiles.
	OpsListen string `yaml:"opsListen"`
	// PublicURL is the externally visible base URL, used in RFC 9728
	// metadata and in WWW-Authenticate. Unset, the scheme and Host of each
	// request are used; set it behind a proxy or load balancer. Set, its
	// host is an accepted Host (besides http.allowedHosts, and then only
	// those) and its origin an accepted browser Origin.
	PublicURL string `yaml:"publicURL"`
	// Aggregator is the AggregatorService endpoint (required).
	Aggregator Endpoint `yaml:"aggregator"`
	// Indexer is the IndexerService endpoint. It serves find_tool and
	// records Legacy session deletions and the request states used up, for
	// every replica. Empty: find_tool answers with an error result, and
	// deletions and used request states stay local to a replica.
	Indexer    Endpoint      `yaml:"indexer"`
	Auth       GatewayAuth   `yaml:"auth"`
	Optimizer  Optimizer     `yaml:"optimizer"`
	Sessions   Sessions      `yaml:"sessions"`
	HTTP       GatewayHTTP   `yaml:"http"`
	Cache      CachePolicy   `yaml:"cache"`
	ServerInfo ServerInfo    `yaml:"serverInfo"`
	Timeouts   GatewayTiming `yaml:"timeouts"`
	Streams    StreamLimits  `yaml:"streams"`
	// Console is the operator console on the ops port (console.go).
	Console Console `yaml:"console"`
	// ShutdownGrace is how long in-flight requests get to finish on
	// shutdown (default 10s); notification streams are cut after it.
	ShutdownGrace Duration `yaml:"shutdownGrace"`
}

// GatewayAuth selects how MCP callers authenticate.
type GatewayAuth struct {
	// Mode is anonymous (the default: every caller is the anonymous
	// principal), apiKeys or oidc. A failed authentication gets HTTP 401
	// with WWW-Authenticate pointing at the RFC 9728 metadata.
	Mode string `yaml:"mode"`
	// APIKeys are the accepted keys in apiKeys mode, sent as
	// "Authorization: Bearer <key>".
	APIKeys []APIKey `yaml:"apiKeys"`
	OIDC    OIDC     `yaml:"oidc"`
}

// APIKey maps a bearer key to an identity.
type APIKey struct {
	// Key is the secret; use ${ENV} so it stays out of the file.
	Key     string   `yaml:"key"`
	Subject string   `yaml:"subject"`
	Groups  []string `yaml:"groups"`
}

// OIDC configures JWT bearer validation (asymmetric signatures only). Keys
// are fetched from JWKSURL, cached, and refetched when a token names an
// unknown key id (rotation) or the cache is JWKSRefresh.MaxAge old; see
// JWKSRefresh for how often.
//
// Issuer and JWKSURL are https, or http to a loopback address (SecureURL),
// whatever the mode: the operator console's OIDC login uses them too.
type OIDC struct {
	// Issuer must equal the token's iss claim.
	Issuer string `yaml:"issuer"`
	// Audience must be among the token's aud claim.
	Audience string `yaml:"audience"`
	// JWKSURL serves the issuer's signing keys, fetched without
	// following redirects.
	JWKSURL string `yaml:"jwksURL"`
	// GroupsClaim names the claim holding the user's groups ("groups"); an
	// array of strings or a single string.
	GroupsClaim string      `yaml:"groupsClaim"`
	JWKSRefresh JWKSRefresh `yaml:"jwksRefresh"`
}

// JWKSRefresh bounds how the gateway refreshes the issuer's signing keys.
// One fetch runs at a time and no request waits on it while holding a
// lock others need: a token whose key is already held is verified at once
// even while the issuer hangs; only a token naming a key id the gateway
// does not hold waits, for the fetch under way, or is refused when no
// fetch may start yet.
type JWKSRefresh struct {
	// MinInterval is the least time between the start of two fetches,
	// whatever asks for them, so tokens naming unknown key ids cannot make
	// the gateway fetch in a loop (default 10s).
	MinInterval Duration `yaml:"minInterval"`
	// MaxBackoff caps the wait after failed fetches, which doubles from
	// MinInterval with each consecutive failure (default 2m).
	MaxBackoff Duration `yaml:"maxBackoff"`
	// MaxAge is the age at which held keys are refreshed in the
	// background; they stay in use meanwhile, and for as long as the
	// issuer cannot be reached (default 10m).
	MaxAge Duration `yaml:"maxAge"`
	// Timeout bounds one fetch (default 10s).
	Timeout Duration `yaml:"timeout"`
}

// WithDefaults returns o with every unset JWKS refresh bound at its
// default.
func (o OIDC) WithDefaults() OIDC {
	r := &o.JWKSRefresh
	r.MinInterval = Duration(r.MinInterval.Or(DefaultJWKSMinInterval))
	r.MaxBackoff = Duration(max(r.MaxBackoff.Or(DefaultJWKSMaxBackoff), time.Duration(r.MinInterval)))
	r.MaxAge = Duration(r.MaxAge.Or(DefaultJWKSMaxAge))
	r.Timeout = Duration(r.Timeout.Or(DefaultJWKSTimeout))
	return o
}

// Optimizer configures find_tool/call_tool mode.
type Optimizer struct {
	// Enabled serves the optimizer view at /mcp; the raw view then stays at
	// /mcp/raw. /mcp/optimized always serves the optimizer view.
	Enabled bool `yaml:"enabled"`
	// Limit is the number of find_tool hits asked of the indexer (default 8,
	// the indexer caps it at 50).
	Limit int `yaml:"limit"`
}

// Sessions configures Legacy (2025-11-25) sessions. A session id is sealed
// (AES-256-GCM) and carries the session itself, so any replica serves it.
type Sessions struct {
	// Key seals session ids: 32 bytes, base64 (use ${ENV}). Every gateway
	// replica must share it. Empty generates a random key at start, so
	// sessions then work on one replica only and end at restart.
	Key string `yaml:"key"`
	// TTL is a session's lifetime from initialize (default 24h); the
	// client then initializes again.
	TTL Duration `yaml:"ttl"`

	// What a Legacy session sets after initialize (its resource
	// subscriptions, its log level) is held by the replica that received
	// it, as is the record of a deleted session until it expires. A client
	// chooses all of it, so all of it is bounded; past a bound the request
	// that would add more gets an error and nothing held changes.

	// MaxSubscriptions bounds the resource URIs one session subscribes to
	// (default and most 256, the aggregator's bound for one watch).
	MaxSubscriptions int `yaml:"maxSubscriptions"`
	// MaxURIBytes bounds one subscribed URI (default 4096 bytes).
	MaxURIBytes int `yaml:"maxURIBytes"`
	// MaxPerPrincipal bounds the sessions of one principal that hold state
	// on this replica, and separately the deleted sessions of one principal
	// this replica records (default 1024 each).
	MaxPerPrincipal int `yaml:"maxPerPrincipal"`
	// MaxPrincipalStateBytes bounds the state of one principal's sessions
	// on this replica (default 1 MiB).
	MaxPrincipalStateBytes int64 `yaml:"maxPrincipalStateBytes"`
	// MaxStateBytes bounds the state of all sessions on this replica
	// (default 8 MiB); every session with state counts a fixed overhead
	// besides its URIs and level, so this bounds their number too.
	MaxStateBytes int64 `yaml:"maxStateBytes"`
	// MaxDeleted bounds the deleted sessions this replica records itself
	// until they expire (default 100000); deletions other replicas record
	// arrive from the indexer, which bounds them.
	MaxDeleted int `yaml:"maxDeleted"`
}

// GatewayHTTP holds edge protections.
type GatewayHTTP struct {
	// MaxBodyBytes limits a request body (default 4 MiB); larger gets 413.
	MaxBodyBytes int64 `yaml:"maxBodyBytes"`
	// AllowedOrigins lists the browser origins (scheme://host[:port])
	// allowed besides the origin of PublicURL ("*" allows all). A request
	// with any other Origin, the gateway's own address included, gets 403
	// before authentication (DNS rebinding); requests without Origin (not
	// from a browser) are not affected.
	AllowedOrigins []string `yaml:"allowedOrigins"`
	// AllowedHosts is the list of accepted Host header values (a name
	// accepts any port, name:port that port only), besides the host of
	// PublicURL. When either is set, any other Host gets 403; when neither
	// is, a loopback bind accepts loopback names only and any other bind
	// any Host.
	AllowedHosts []string `yaml:"allowedHosts"`
	// KeepAlive is the interval of SSE keep-alive comments on listen and GET
	// streams, and on a Legacy request's stream while it waits for the
	// client's answer to an input request (default 15s).
	KeepAlive Duration `yaml:"keepAlive"`
	// TrustClientTraceparent continues a client's W3C traceparent (and its
	// tracestate): the gateway's span is its child, so the client's trace
	// id reaches the services and the backends and its sampled flag decides
	// sampling. Off (the default), a client cannot force or suppress
	// sampling: every request starts a trace of the gateway's own, sampled
	// by telemetry.sampleRatio, with a link to the client's span context.
	// Turn it on only when whatever sends the traceparent is trusted (a
	// proxy that starts traces). Client baggage is never taken either way.
	TrustClientTraceparent bool `yaml:"trustClientTraceparent"`
	// ReadHeaderTimeout bounds reading a request's headers (default 10s).
	ReadHeaderTimeout Duration `yaml:"readHeaderTimeout"`
	// BodyTimeout bounds reading a request's body, from the end of its
	// headers (default 30s): a client that sends its body more slowly gets
	// 408 and loses the connection.
	BodyTimeout Duration `yaml:"bodyTimeout"`
}

// CachePolicy sets the ttlMs the gateway advertises on cacheable results
// (server/discover, the lists, resources/read). Their cacheScope is always
// "private": every view is filtered per principal. A resources/read result
// is the backend's: it gets the smaller of this TTL and the backend's
// ttlMs (absent or negative counts as 0), and an input retry's result 0.
type CachePolicy struct {
	// TTL is the advertised freshness (default 60s; "0s" is not possible,
	// use a small value such as 1ms to make results immediately stale).
	TTL Duration `yaml:"ttl"`
}

// ServerInfo is what the gateway calls itself in serverInfo.
type ServerInfo struct {
	// Name defaults to "switchboard".
	Name string `yaml:"name"`
	// Version defaults to "dev".
	Version string `yaml:"version"`
	// Instructions are sent to clients when the aggregator has none.
	Instructions string `yaml:"instructions"`
}

// GatewayTiming bounds calls to the services.
type GatewayTiming struct {
	// Request bounds each of an MCP request's calls to the services
	// (default 2m). Streams are not bounded, and neither is the wait for a
	// Legacy client's answer to an input request (see ClientInput).
	Request Duration `yaml:"request"`
	// ClientInput bounds how long a Legacy request waits for its client to
	// answer an elicitation, sampling or roots request sent on its stream
	// (default 10m, as long as a Modern client's requestState lives); the
	// stream carries keep-alives meanwhile, and a client that goes away
	// ends the wait.
	ClientInput Duration `yaml:"clientInput"`
}

// StreamLimits bound the long-lived notification streams (Modern
// subscriptions/listen and the Legacy GET stream) a replica holds open:
// each holds an aggregator watch. A stream past a limit is refused with
// HTTP 429 (a listen with a JSON-RPC error in the body).
type StreamLimits struct {
	// MaxPerPrincipal bounds one principal's open streams (default 32). In
	// anonymous mode every client is the same principal: raise it to
	// MaxOpen there.
	MaxPerPrincipal int `yaml:"maxPerPrincipal"`
	// MaxOpen bounds the open streams of the replica (default 4096).
	MaxOpen int `yaml:"maxOpen"`
}

// Gateway defaults, applied by WithDefaults.
const (
	DefaultGatewayListen = "127.0.0.1:8080"
	DefaultMaxBodyBytes  = 4 << 20
	// MaxBodyBytesLimit caps http.maxBodyBytes: a request's body goes to
	// the aggregator in one gRPC message, which the services take up to
	// MaxServiceMessageBytes, beside the call's other fields (a retry's
	// sealed state among them). A body past it was answered "retry
	// later" by a service that would refuse it every time.
	MaxBodyBytesLimit     = MaxServiceMessageBytes / 2
	DefaultKeepAlive      = 15 * time.Second
	DefaultCacheTTL       = 60 * time.Second
	DefaultSessionTTL     = 24 * time.Hour
	DefaultRequestTimeout = 2 * time.Minute
	DefaultSearchLimit    = 8

	DefaultJWKSMinInterval = 10 * time.Second
	DefaultJWKSMaxBackoff  = 2 * time.Minute
	DefaultJWKSMaxAge      = 10 * time.Minute
	DefaultJWKSTimeout     = 10 * time.Second
	// DefaultStreamsPerPrincipal and DefaultMaxStreams bound the open
	// notification streams of a replica.
	DefaultStreamsPerPrincipal = 32
	DefaultMaxStreams          = 4096
	DefaultReadHeaderTimeout   = 10 * time.Second
	DefaultBodyTimeout         = 30 * time.Second
	DefaultClientInputTimeout  = 10 * time.Minute

	// MaxSessionSubscriptions is the most resource URIs one session may
	// subscribe to: the aggregator's bound on one watch.
	MaxSessionSubscriptions   = 256
	DefaultSessionMaxURIBytes = 4096
	// MaxSessionURIBytes is the most gateway.sessions.maxURIBytes may be:
	// the aggregator's bound on one URI a catalog watch names.
	MaxSessionURIBytes                = 16 << 10
	DefaultSessionsPerPrincipal       = 1024
	DefaultPrincipalSessionStateBytes = 1 << 20
	DefaultSessionStateBytes          = 8 << 20
	DefaultMaxDeletedSessions         = 100000
)

// WithDefaults returns g with every unset value at its default: the one
// place the gateway's defaults live.
func (g Gateway) WithDefaults() Gateway {
	if g.Listen == "" {
		g.Listen = DefaultGatewayListen
	}
	if g.HTTP.MaxBodyBytes <= 0 {
		g.HTTP.MaxBodyBytes = DefaultMaxBodyBytes
	}
	g.HTTP.KeepAlive = Duration(g.HTTP.KeepAlive.Or(DefaultKeepAlive))
	g.Cache.TTL = Duration(g.Cache.TTL.Or(DefaultCacheTTL))
	g.Sessions.TTL = Duration(g.Sessions.TTL.Or(DefaultSessionTTL))
	g.Sessions.MaxSubscriptions = orInt(g.Sessions.MaxSubscriptions, MaxSessionSubscriptions)
	g.Sessions.MaxURIBytes = orInt(g.Sessions.MaxURIBytes, DefaultSessionMaxURIBytes)
	g.Sessions.MaxPerPrincipal = orInt(g.Sessions.MaxPerPrincipal, DefaultSessionsPerPrincipal)
	g.Sessions.MaxPrincipalStateBytes = orInt(g.Sessions.MaxPrincipalStateBytes, DefaultPrincipalSessionStateBytes)
	g.Sessions.MaxStateBytes = orInt(g.Sessions.MaxStateBytes, DefaultSessionStateBytes)
	g.Sessions.MaxDeleted = orInt(g.Sessions.MaxDeleted, DefaultMaxDeletedSessions)
	g.HTTP.ReadHeaderTimeout = Duration(g.HTTP.ReadHeaderTimeout.Or(DefaultReadHeaderTimeout))
	g.HTTP.BodyTimeout = Duration(g.HTTP.BodyTimeout.Or(DefaultBodyTimeout))
	g.Timeouts.Request = Duration(g.Timeouts.Request.Or(DefaultRequestTimeout))
	g.ShutdownGrace = Duration(g.ShutdownGrace.Or(DefaultShutdownGrace))
	g.Auth.OIDC = g.Auth.OIDC.WithDefaults()
	g.Timeouts.ClientInput = Duration(g.Timeouts.ClientInput.Or(DefaultClientInputTimeout))
	g.Console = g.Console.WithDefaults()
	if g.Optimizer.Limit <= 0 {
		g.Optimizer.Limit = DefaultSearchLimit
	}
	// The indexer answers at most MaxIndexerLimit hits, whatever is asked.
	g.Optimizer.Limit = min(g.Optimizer.Limit, MaxIndexerLimit)
	if g.Streams.MaxPerPrincipal <= 0 {
		g.Streams.MaxPerPrincipal = DefaultStreamsPerPrincipal
	}
	if g.Streams.MaxOpen <= 0 {
		g.Streams.MaxOpen = DefaultMaxStreams
	}
	if g.ServerInfo.Name == "" {
		g.ServerInfo.Name = "switchboard"
	}
	if g.ServerInfo.Version == "" {
		g.ServerInfo.Version = "dev"
	}
	return g
}

// Validate checks what WithDefaults cannot fill in.
func (g Gateway) Validate() error {
	var errs []error
	if g.Aggregator.Address == "" {
		errs = append(errs, errors.New("gateway.aggregator.address is required"))
	}
	errs = append(errs, g.Aggregator.ValidateAddress("gateway.aggregator.address"), g.Indexer.ValidateAddress("gateway.indexer.address"))
	switch g.Auth.Mode {
	case "", "anonymous", "apiKeys", "oidc":
		errs = append(errs, g.authModeMissing())
	default:
		errs = append(errs, keyErr("gateway.auth.mode", "want anonymous, apiKeys or oidc"))
	}
	if g.HTTP.MaxBodyBytes > MaxBodyBytesLimit {
		errs = append(errs, keyErr("gateway.http.maxBodyBytes", "at most %d (%d MiB): a request goes on to the services in one message of at most %d MiB", int64(MaxBodyBytesLimit), MaxBodyBytesLimit>>20, MaxServiceMessageBytes>>20))
	}
	if g.Streams.MaxPerPrincipal < 0 || g.Streams.MaxOpen < 0 {
		errs = append(errs, errors.New("gateway.streams: limits must not be negative (0 takes the default)"))
	}
	// Zero and negative session bounds mean the default (WithDefaults);
	// what is left to check is how the bounds relate.
	s := g.Sessions
	if s.MaxSubscriptions > MaxSessionSubscriptions {
		errs = append(errs, keyErr("gateway.sessions.maxSubscriptions", "at most %d (the aggregator's bound on one watch)", MaxSessionSubscriptions))
	}
	if s.MaxURIBytes > MaxSessionURIBytes {
		errs = append(errs, keyErr("gateway.sessions.maxURIBytes", "at most %d (the aggregator's bound on one watched URI)", MaxSessionURIBytes))
	}
	if s.MaxPrincipalStateBytes > 0 && s.MaxStateBytes > 0 && s.MaxPrincipalStateBytes > s.MaxStateBytes {
		errs = append(errs, keyErr("gateway.sessions.maxPrincipalStateBytes", "more than gateway.sessions.maxStateBytes"))
	}
	return errors.Join(append(errs, g.Auth.OIDC.validate(g.Auth.Mode), g.validateEdge(), g.validateConsole())...)
}

// authModeMissing refuses credentials written without the mode that
// reads them: a file whose mode line was dropped (or never written)
// would otherwise serve every caller as the anonymous principal, the
// keys ignored. OIDC settings the console's login uses stand on their
// own: the console may log operators in through that provider alone.
func (g Gateway) authModeMissing() error {
	a := g.Auth
	switch {
	case len(a.APIKeys) > 0 && a.Mode != "apiKeys":
		mode := a.Mode
		if mode == "" {
			mode = "not set (anonymous)"
		}
		return keyErr("gateway.auth.apiKeys", "listed while gateway.auth.mode is %s: the keys would be ignored and every caller served as anonymous; set gateway.auth.mode: apiKeys", mode)
	case a.Mode == "" && (a.OIDC.Issuer != "" || a.OIDC.JWKSURL != "") && !(g.Console.Enabled && g.Console.OIDC.Enabled()):
		return keyErr("gateway.auth.oidc", "set while gateway.auth.mode is not: every caller would be served as anonymous; set gateway.auth.mode: oidc (or anonymous, to serve MCP without authentication)")
	}
	return nil
}

// orInt is v, or def when v is not positive (unset).
func orInt[T int | int64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
