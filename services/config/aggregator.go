package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Aggregator configures the catalog service.
type Aggregator struct {
	// Listen is the gRPC listen address (host:port).
	Listen   string    `yaml:"listen"`
	Backends []Backend `yaml:"backends"`
	// ConflictResolution decides advertised names.
	ConflictResolution ConflictResolution `yaml:"conflictResolution"`
	// PageSize is the default list page size (1000); MaxPageSize clamps the
	// sizes callers ask for (default: the larger of PageSize and 1000).
	PageSize    int `yaml:"pageSize"`
	MaxPageSize int `yaml:"maxPageSize"`
	// CatalogTTL is how long a snapshot is served before a refresh
	// (default 30s).
	CatalogTTL Duration `yaml:"catalogTTL"`
	// FanOut bounds concurrent backend requests while building a snapshot,
	// and concurrent probes (default 10).
	FanOut int         `yaml:"fanOut"`
	Health HealthCheck `yaml:"health"`
	Authz  Authz       `yaml:"authz"`
	// HTTPListen serves /healthz, /readyz and /metrics; empty disables.
	HTTPListen string `yaml:"httpListen"`
	// Instructions are server instructions passed to MCP clients.
	Instructions string `yaml:"instructions"`
	// ShutdownGrace is how long in-flight calls get to finish on shutdown
	// (default 10s).
	ShutdownGrace Duration `yaml:"shutdownGrace"`
	// AdvertiseAddress is the host:port other aggregator replicas reach
	// this one at; a call a Legacy backend holds for the client's input
	// names it in its requestState (see Peers). Default: see
	// AdvertiseAddr.
	AdvertiseAddress string `yaml:"advertiseAddress"`
	// Peers are the aggregator replicas a retry of a held call may be
	// forwarded to. Unset: held calls name no owner and a retry must reach
	// the replica holding the call.
	Peers AggregatorPeers `yaml:"peers"`
	// ToolOverrides rename, re-describe, fix arguments of and time-bound
	// backend tools everywhere (servers.go); a server's own overrides
	// apply on top in that server.
	ToolOverrides []ToolOverride `yaml:"toolOverrides"`
	// Pinning quarantines tools whose definitions change after they were
	// approved (pinning.go).
	Pinning Pinning `yaml:"pinning"`
	// Indexer is the indexer the aggregator takes rate-limit tokens from
	// (rateLimits): its token is the aggregator's own credential, which
	// the indexer must allow AggregatorMethods. Unset: pinning.indexer.
	Indexer Endpoint `yaml:"indexer"`
	// MaxWatchesPerCaller bounds the WatchCatalog streams one service
	// credential that is not an operator's holds open on one replica
	// (default DefaultMaxWatchesPerCaller). The gateway opens one per open
	// MCP notification stream, and its replicas may share one credential,
	// so it is at least their gateway.streams.maxOpen together (over the
	// aggregator replicas their watches spread over). Read at start.
	MaxWatchesPerCaller int `yaml:"maxWatchesPerCaller"`
	// Tasks configures the tasks the aggregator runs (tasks.go).
	Tasks Tasks `yaml:"tasks"`
	// CodeMode configures the run_code tool (codemode.go).
	CodeMode CodeMode `yaml:"codeMode"`
}

// Aggregator defaults, applied by WithDefaults.
const (
	DefaultPageSize           = 1000
	DefaultCatalogTTL         = 30 * time.Second
	DefaultFanOut             = 10
	DefaultShutdownGrace      = 10 * time.Second
	DefaultHealthInterval     = 10 * time.Second
	DefaultHealthTimeout      = 5 * time.Second
	DefaultDegradedThreshold  = 2 * time.Second
	DefaultUnhealthyThreshold = 3
	DefaultBackendTimeout     = 30 * time.Second
	DefaultInputWait          = 60 * time.Second
	// MaxHeldCalls bounds the calls one backend holds open for their
	// clients' input, on one aggregator replica.
	MaxHeldCalls = 1024
	// DefaultHeldPerPrincipal is a principal's share of them.
	DefaultHeldPerPrincipal = 64
	// DefaultPrefixFormat is the prefix of the prefix strategy.
	DefaultPrefixFormat = "{backend}_"
	// DefaultMaxWatchesPerCaller is four gateway replicas' streams at
	// their default gateway.streams.maxOpen (4096); a watch costs the
	// aggregator about 15 KiB.
	DefaultMaxWatchesPerCaller = 16384
)

// WithDefaults returns the section with every unset value at its default:
// the one place the aggregator's defaults live. The aggregator applies it
// once to each configuration it loads (at start and on every reload) and
// builds its engine from the result. pageSize is brought down to
// maxPageSize.
func (a Aggregator) WithDefaults() Aggregator {
	a.PageSize = orInt(a.PageSize, DefaultPageSize)
	a.MaxPageSize = orInt(a.MaxPageSize, max(a.PageSize, DefaultPageSize))
	a.PageSize = min(a.PageSize, a.MaxPageSize)
	a.CatalogTTL = Duration(a.CatalogTTL.Or(DefaultCatalogTTL))
	a.FanOut = orInt(a.FanOut, DefaultFanOut)
	a.ShutdownGrace = Duration(a.ShutdownGrace.Or(DefaultShutdownGrace))
	a.MaxWatchesPerCaller = orInt(a.MaxWatchesPerCaller, DefaultMaxWatchesPerCaller)
	h := &a.Health
	h.Interval = Duration(h.Interval.Or(DefaultHealthInterval))
	h.Timeout = Duration(h.Timeout.Or(DefaultHealthTimeout))
	h.DegradedThreshold = Duration(h.DegradedThreshold.Or(DefaultDegradedThreshold))
	h.UnhealthyThreshold = orInt(h.UnhealthyThreshold, DefaultUnhealthyThreshold)
	a.ConflictResolution = a.ConflictResolution.WithDefaults()
	a.Tasks = a.Tasks.WithDefaults()
	a.Backends = slices.Clone(a.Backends)
	for i := range a.Backends {
		a.Backends[i] = a.Backends[i].WithDefaults()
	}
	return a
}

// Validate checks the section: the backends, the naming, the peers and
// pinning. The Cedar policy file is parsed by the aggregator on top.
// Messages name keys, never values (a value may be an expanded secret).
func (a Aggregator) Validate() error {
	var errs []error
	if a.Listen == "" {
		errs = append(errs, errors.New("aggregator.listen is required"))
	}
	if a.MaxWatchesPerCaller < 0 {
		errs = append(errs, keyErr("aggregator.maxWatchesPerCaller", "is negative (unset: %d)", DefaultMaxWatchesPerCaller))
	}
	named := map[string]int{}
	for i, b := range a.Backends {
		at := fmt.Sprintf("aggregator.backends[%d]", i)
		errs = append(errs, b.Validate(at))
		if first, dup := named[b.Name]; dup && b.Name != "" {
			errs = append(errs, keyErr(at+".name", "also aggregator.backends[%d]'s: each backend needs a name of its own", first))
		} else if !dup {
			named[b.Name] = i
		}
	}
	return errors.Join(append(errs, a.ConflictResolution.Validate(), a.ValidatePeers(), a.Pinning.Validate())...)
}

// IndexerEndpoint is aggregator.indexer, or else aggregator.pinning.indexer.
func (a Aggregator) IndexerEndpoint() Endpoint {
	if a.Indexer.Address != "" {
		return a.Indexer
	}
	return a.Pinning.Indexer
}

// ValidateRateLimits checks the rateLimits section and, when a limit
// applies to a method the aggregator serves, the indexer it needs.
func (c *Config) ValidateRateLimits() error {
	if err := c.RateLimits.Validate(); err != nil {
		return err
	}
	needed := false
	for _, l := range c.RateLimits.Limits {
		for _, m := range l.EffectiveMethods() {
			needed = needed || m != RateMethodFindTool
		}
	}
	if !needed {
		return nil
	}
	e := c.Aggregator.IndexerEndpoint()
	if e.Address == "" || e.Token == "" {
		return errors.New("aggregator.indexer (address and token) is required with rateLimits: the shared buckets are kept by the indexer")
	}
	return e.ValidateAddress("aggregator.indexer.address")
}

// AggregatorPeers lists the aggregator replicas of a deployment, for
// forwarding the retry of a held call to the replica that holds it. Only
// an address in this set is ever dialled, whatever a requestState says.
type AggregatorPeers struct {
	// DNS is a name:port that resolves to every replica's address, such as
	// a headless Service ("switchboard-aggregator-headless:50051"): a peer
	// is any address it resolves to, with that port.
	DNS string `yaml:"dns"`
	// Addresses lists peers explicitly (host:port); with DNS, both count.
	Addresses []string `yaml:"addresses"`
	// Token is this aggregator's own service credential (${ENV}), which a
	// peer must allow exactly AggregatorMethods.
	Token string `yaml:"token"`
}

// Enabled reports whether any peer is configured.
func (p AggregatorPeers) Enabled() bool { return p.DNS != "" || len(p.Addresses) > 0 }

// PodIPEnv names the environment variable the advertise address defaults
// from: in Kubernetes, the pod's IP through the downward API.
const PodIPEnv = "POD_IP"

// AdvertiseAddr is the address this aggregator advertises to its peers:
// advertiseAddress if set; else $POD_IP (read with getenv) with the port
// of listen; else listen itself when it names a host; else the machine's
// host name with that port.
func (a Aggregator) AdvertiseAddr(getenv func(string) string, hostname func() (string, error)) (string, error) {
	if a.AdvertiseAddress != "" {
		return a.AdvertiseAddress, nil
	}
	host, port, err := net.SplitHostPort(a.Listen)
	if err != nil {
		return "", keyErr("aggregator.listen", "want host:port (%s)", addrProblem(err))
	}
	if ip := getenv(PodIPEnv); ip != "" {
		return net.JoinHostPort(ip, port), nil
	}
	if addr, err := netip.ParseAddr(host); host != "" && (err != nil || !addr.IsUnspecified()) {
		return a.Listen, nil
	}
	name, err := hostname()
	if err != nil {
		return "", fmt.Errorf("aggregator.advertiseAddress is unset and the host name is unknown: %w", err)
	}
	return net.JoinHostPort(name, port), nil
}

// ValidatePeers checks the peer configuration.
func (a Aggregator) ValidatePeers() error {
	p := a.Peers
	if !p.Enabled() {
		return nil
	}
	if p.Token == "" {
		return errors.New("aggregator.peers.token is required with peers: the aggregator's own service credential")
	}
	if p.DNS != "" {
		if _, _, err := net.SplitHostPort(p.DNS); err != nil {
			return keyErr("aggregator.peers.dns", "want name:port (%s)", addrProblem(err))
		}
	}
	for i, addr := range p.Addresses {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return keyErr(fmt.Sprintf("aggregator.peers.addresses[%d]", i), "want host:port (%s)", addrProblem(err))
		}
	}
	if a.AdvertiseAddress != "" {
		if _, _, err := net.SplitHostPort(a.AdvertiseAddress); err != nil {
			return keyErr("aggregator.advertiseAddress", "want host:port (%s)", addrProblem(err))
		}
	}
	return nil
}

// Protocol versions a backend may be pinned to (aggregator.backends[].protocol).
const (
	// ProtocolAuto tries Modern first and falls back to Legacy (the
	// default).
	ProtocolAuto   = "auto"
	ProtocolModern = "2026-07-28"
	ProtocolLegacy = "2025-11-25"
)

// Backend is one backend MCP server.
type Backend struct {
	Name string `yaml:"name"`
	URL  string `yaml:"url"`
	// URLFromEnvironment are the values the environment wrote into the
	// file (${VAR}) that URL holds, which Parse records: a backend's key
	// may sit in its URL's path (https://host/api/${KEY}/mcp), where
	// nothing else marks it as one (the aggregator's redaction decides
	// which parts are). Any value of the file counts, so that a URL
	// reached through a YAML alias or merge key has its values too.
	URLFromEnvironment []string `yaml:"-"`
	// Command, instead of URL, is a stdio backend: the program and its
	// arguments, which each aggregator replica runs and speaks MCP with
	// over its stdin and stdout (aggregator/internal/stdio). Env is its
	// whole environment (PATH and HOME come from the aggregator unless
	// set), Dir its working directory.
	Command []string          `yaml:"command"`
	Env     map[string]string `yaml:"env"`
	Dir     string            `yaml:"dir"`
	// Protocol is auto (Modern first, Legacy fallback), 2026-07-28 or
	// 2025-11-25.
	Protocol string `yaml:"protocol"`
	// Headers are injected into every request to the backend. Values are
	// secrets as far as logging goes: they are never logged.
	Headers map[string]string `yaml:"headers"`
	// Auth is whose identity the backend's requests carry (static headers
	// by default; backendauth.go).
	Auth BackendAuth `yaml:"auth"`
	// Timeout bounds every request to the backend (default 30s).
	Timeout Duration `yaml:"timeout"`
	// InputWait bounds how long a call held open for the client's input
	// (a Legacy backend's elicitation or sampling request, answered by the
	// client's retry) waits for that retry before it is cancelled
	// (default 60s).
	InputWait Duration `yaml:"inputWait"`
	// HeldPerPrincipal bounds the calls of one principal this backend
	// holds open for the client's input on one replica (default 64, at
	// most MaxHeldCalls, which bounds them all): one principal cannot
	// take every other's elicitation or sampling calls from them.
	HeldPerPrincipal int `yaml:"heldPerPrincipal"`
}

// WithDefaults returns the backend with protocol auto, a 30s timeout, a
// 60s input wait and its auth section's defaults.
func (b Backend) WithDefaults() Backend {
	if b.Protocol == "" {
		b.Protocol = ProtocolAuto
	}
	b.Timeout = Duration(b.Timeout.Or(DefaultBackendTimeout))
	b.InputWait = Duration(b.InputWait.Or(DefaultInputWait))
	if b.HeldPerPrincipal == 0 {
		b.HeldPerPrincipal = DefaultHeldPerPrincipal
	}
	b.Auth = b.Auth.WithDefaults()
	return b
}

// Validate checks the backend at key at (aggregator.backends[i]) before
// any connection is attempted. Neither the URL (it may carry a token) nor
// a header (its name may be a mistyped "Name: ${SECRET}") is quoted.
func (b Backend) Validate(at string) error {
	var errs []error
	if b.Name == "" {
		errs = append(errs, fmt.Errorf("%s.name is required", at))
	}
	if len(b.Command) > 0 || b.URL == "" && (len(b.Env) > 0 || b.Dir != "") {
		errs = append(errs, b.validateStdio(at)...)
	} else if u, err := url.Parse(b.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, keyErr(at+".url", "must be an absolute http(s) URL (or give command for a stdio server)"))
	} else if mode := b.Auth.EffectiveMode(); mode == BackendAuthTokenExchange || mode == BackendAuthClientCredentials {
		// The backend receives OAuth access tokens (a user's exchanged
		// token, or the aggregator's own), which must not cross the
		// network in clear, as their token endpoint may not either.
		if err := SecureURL(b.URL); err != nil {
			errs = append(errs, keyErr(at+".url", "%w with auth.mode %s: the backend receives OAuth access tokens", err, mode))
		}
	}
	switch b.Protocol {
	case "", ProtocolAuto, ProtocolModern, ProtocolLegacy:
	default:
		errs = append(errs, keyErr(at+".protocol", "want %s, %s or %s", ProtocolAuto, ProtocolModern, ProtocolLegacy))
	}
	if b.HeldPerPrincipal < 0 || b.HeldPerPrincipal > MaxHeldCalls {
		errs = append(errs, keyErr(at+".heldPerPrincipal", "want 1 to %d (or unset: %d)", MaxHeldCalls, DefaultHeldPerPrincipal))
	}
	for k := range b.Headers {
		if k == "" || strings.ContainsAny(k, " :\r\n") {
			errs = append(errs, keyErr(at+".headers", "a header name is empty or holds a space, a colon or a line break"))
			break
		}
	}
	return errors.Join(append(errs, b.Auth.Validate(at+".auth", b.Headers))...)
}

// Conflict-resolution strategies (aggregator.conflictResolution.strategy).
const (
	StrategyPrefix   = "prefix"
	StrategyPriority = "priority"
	StrategyManual   = "manual"
)

// ConflictResolution configures advertised names.
type ConflictResolution struct {
	// Strategy is prefix (the default), priority or manual.
	Strategy string `yaml:"strategy"`
	// PrefixFormat is applied as the prefix; {backend} is replaced with the
	// backend name. Default "{backend}_".
	PrefixFormat  string   `yaml:"prefixFormat"`
	PriorityOrder []string `yaml:"priorityOrder"`
	// Overrides rename tools: key "<backend>.<tool>" (manual strategy).
	Overrides map[string]string `yaml:"overrides"`
}

// WithDefaults returns the section with the prefix strategy and the
// "{backend}_" prefix format when unset.
func (c ConflictResolution) WithDefaults() ConflictResolution {
	if c.Strategy == "" {
		c.Strategy = StrategyPrefix
	}
	if c.PrefixFormat == "" {
		c.PrefixFormat = DefaultPrefixFormat
	}
	return c
}

// Validate checks what the strategy needs.
func (c ConflictResolution) Validate() error {
	const at = "aggregator.conflictResolution"
	c = c.WithDefaults()
	switch c.Strategy {
	case StrategyPrefix:
		if !strings.Contains(c.PrefixFormat, "{backend}") {
			return keyErr(at+".prefixFormat", "must contain {backend}")
		}
	case StrategyPriority:
		if len(c.PriorityOrder) == 0 {
			return fmt.Errorf("%s.priorityOrder must list at least one backend for the priority strategy", at)
		}
		seen := map[string]bool{}
		for i, b := range c.PriorityOrder {
			if seen[b] {
				return keyErr(fmt.Sprintf("%s.priorityOrder[%d]", at, i), "names a backend listed before it")
			}
			seen[b] = true
		}
	case StrategyManual:
		for k, v := range c.Overrides {
			b, t, ok := strings.Cut(k, ".")
			if !ok || b == "" || t == "" || v == "" {
				return keyErr(at+".overrides."+k, "must map \"<backend>.<tool>\" to a non-empty name")
			}
		}
	default:
		return keyErr(at+".strategy", "want %s, %s or %s", StrategyPrefix, StrategyPriority, StrategyManual)
	}
	return nil
}

// HealthCheck configures backend probes. Probes carry no user
// credentials, only the backend's configured headers.
type HealthCheck struct {
	// Interval between probes (default 10s).
	Interval Duration `yaml:"interval"`
	// Timeout of one probe (default 5s).
	Timeout Duration `yaml:"timeout"`
	// DegradedThreshold: a probe answered slower than this marks the
	// backend degraded (default 2s).
	DegradedThreshold Duration `yaml:"degradedThreshold"`
	// UnhealthyThreshold consecutive failed probes or listings mark the
	// backend unhealthy, which hides its items (default 3).
	UnhealthyThreshold int `yaml:"unhealthyThreshold"`
}

// Authz configures Cedar authorization.
type Authz struct {
	// PolicyFile is a Cedar policy set. Empty allows everything.
	PolicyFile string `yaml:"policyFile"`
}

// recordURLsFromEnvironment sets each backend's URLFromEnvironment from
// fromEnv, the values the environment wrote anywhere in the file.
func (a *Aggregator) recordURLsFromEnvironment(fromEnv []string) {
	values := uniqueSorted(fromEnv)
	for i := range a.Backends {
		b := &a.Backends[i]
		b.URLFromEnvironment = nil
		for _, v := range values {
			if strings.Contains(b.URL, v) {
				b.URLFromEnvironment = append(b.URLFromEnvironment, v)
			}
		}
	}
}
