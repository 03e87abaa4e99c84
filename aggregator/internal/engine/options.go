package engine

import (
	"log/slog"
	"time"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/authz"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/catalog"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/pinning"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/traffic"
	"github.com/switchboard-mcp/switchboard/services/config"
)

// The aggregator's settings get their defaults and are validated in
// services/config (config.Aggregator.WithDefaults, ValidateAggregator),
// once for each configuration loaded; OptionsFromConfig only translates
// the result.

// Options configure an Engine, as OptionsFromConfig translates them from
// a configuration with its defaults.
type Options struct {
	Backends []backend.Config
	Naming   *catalog.Naming
	// Authz decides access; nil allows everything.
	Authz *authz.Authorizer
	// PageSize is the default page size; MaxPageSize clamps requested
	// sizes.
	PageSize, MaxPageSize int
	// CatalogTTL is how often every backend is listed again without being
	// asked.
	CatalogTTL time.Duration
	// FanOut bounds concurrent backend listings, and concurrent probes.
	FanOut int
	// Health configures probes.
	Health HealthOptions
	// Instructions are passed to MCP clients through Discover.
	Instructions string
	// Servers are the virtual servers (config.Server), each a catalog of
	// its own built from the same backend listings.
	Servers []config.Server
	// ToolOverrides are the global tool overrides (config.ToolOverride);
	// a server's own apply on top of them in that server.
	ToolOverrides []config.ToolOverride
	// Log receives the engine's logs (nil: slog.Default()).
	Log *slog.Logger
	// Metrics records Prometheus metrics; nil records nothing.
	Metrics *Metrics
	// HeldOwner is this replica's address as its peers reach it, named by
	// the requestState of every call a Legacy backend holds for the
	// client's input (backend.Config.HeldOwner); empty without peers.
	HeldOwner string
	// Pinning quarantines tools whose definitions changed since they were
	// approved; nil lists every tool.
	Pinning *pinning.Guard
	// MaxWatchesPerCaller bounds the WatchCatalog streams one caller that
	// is not an operator holds open (0: rpc.DefaultStreamsPerCaller).
	MaxWatchesPerCaller int
	// Traffic records the backends' health changes and reloads for the
	// console's traffic page (the pinning guard its quarantines); nil
	// records nothing.
	Traffic *traffic.Recorder
}

// HealthOptions configure backend probes.
type HealthOptions struct {
	// Interval between probes; Timeout of one probe.
	Interval, Timeout time.Duration
	// DegradedThreshold: a slower answer is degraded.
	DegradedThreshold time.Duration
	// UnhealthyThreshold consecutive failures make a backend unhealthy.
	UnhealthyThreshold int
}

// OptionsFromConfig translates the aggregator section of a configuration
// that config.ValidateAggregator accepted, with its defaults
// (config.Aggregator.WithDefaults). A policy file that cannot be read or
// parsed is an error.
func OptionsFromConfig(c config.Aggregator) (Options, error) {
	az, err := authz.Load(c.Authz.PolicyFile)
	if err != nil {
		return Options{}, err
	}
	opts := Options{
		Naming:        catalog.NewNaming(c.ConflictResolution),
		Authz:         az,
		PageSize:      c.PageSize,
		MaxPageSize:   c.MaxPageSize,
		CatalogTTL:    time.Duration(c.CatalogTTL),
		FanOut:        c.FanOut,
		Instructions:  c.Instructions,
		ToolOverrides: c.ToolOverrides,
		// Read at start (Reconfigure: fixedChanges).
		MaxWatchesPerCaller: c.MaxWatchesPerCaller,
		Health: HealthOptions{
			Interval:           time.Duration(c.Health.Interval),
			Timeout:            time.Duration(c.Health.Timeout),
			DegradedThreshold:  time.Duration(c.Health.DegradedThreshold),
			UnhealthyThreshold: c.Health.UnhealthyThreshold,
		},
	}
	for _, b := range c.Backends {
		opts.Backends = append(opts.Backends, backend.Config{
			Name:               b.Name,
			URL:                b.URL,
			URLFromEnvironment: b.URLFromEnvironment,
			Protocol:           b.Protocol,
			Headers:            b.Headers,
			Auth:               backendAuth(b.Auth),
			Timeout:            time.Duration(b.Timeout),
			InputWait:          time.Duration(b.InputWait),
			HeldPerPrincipal:   b.HeldPerPrincipal,
			Command:            b.Command,
			Env:                b.Env,
			Dir:                b.Dir,
		})
	}
	return opts, nil
}

// backendAuth is the backend package's form of a backend's auth section.
func backendAuth(a config.BackendAuth) backend.Auth {
	mode := a.EffectiveMode()
	if mode == config.BackendAuthStatic {
		return backend.Auth{}
	}
	return backend.Auth{Mode: mode, Audience: a.Audience, TokenEndpoint: a.TokenEndpoint, ClientID: a.ClientID, ClientSecret: a.ClientSecret,
		Scopes: a.Scopes, CacheEntries: a.CacheEntries, RefreshBefore: time.Duration(a.RefreshBefore)}
}
