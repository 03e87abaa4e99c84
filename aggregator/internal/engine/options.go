package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/authz"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/catalog"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/pinning"
	"github.com/switchboard-mcp/switchboard/services/config"
)

// This file is the one place where the aggregator's settings get their
// defaults and are validated: OptionsFromConfig translates the deployment
// configuration, applyDefaults fills what is unset (each backend's through
// backend.Config.WithDefaults), Validate refuses what cannot work.

// Options configure an Engine. Zero values get the documented defaults.
type Options struct {
	Backends []backend.Config
	Naming   *catalog.Naming
	// Authz decides access; nil allows everything.
	Authz *authz.Authorizer
	// PageSize is the default page size (1000); MaxPageSize clamps requested
	// sizes (default: the larger of PageSize and 1000).
	PageSize, MaxPageSize int
	// CatalogTTL is how often every backend is listed again without being
	// asked (30s).
	CatalogTTL time.Duration
	// FanOut bounds concurrent backend listings, and concurrent probes
	// (10).
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
	// Log receives the engine's logs (default slog.Default()).
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
}

// HealthOptions configure backend probes.
type HealthOptions struct {
	// Interval between probes (10s); Timeout of one probe (5s).
	Interval, Timeout time.Duration
	// DegradedThreshold: a slower answer is degraded (2s).
	DegradedThreshold time.Duration
	// UnhealthyThreshold consecutive failures make a backend unhealthy (3).
	UnhealthyThreshold int
}

// DefaultShutdownGrace is how long in-flight calls get to finish when the
// service stops, unless configured.
const DefaultShutdownGrace = 10 * time.Second

// OptionsFromConfig translates the aggregator section of the deployment
// configuration. A bad conflict-resolution setting or a policy file that
// does not parse is an error.
func OptionsFromConfig(c config.Aggregator) (Options, error) {
	naming, err := catalog.NewNaming(c.ConflictResolution)
	if err != nil {
		return Options{}, err
	}
	az, err := authz.Load(c.Authz.PolicyFile)
	if err != nil {
		return Options{}, err
	}
	opts := Options{
		Naming:        naming,
		Authz:         az,
		PageSize:      c.PageSize,
		MaxPageSize:   c.MaxPageSize,
		CatalogTTL:    time.Duration(c.CatalogTTL),
		FanOut:        c.FanOut,
		Instructions:  c.Instructions,
		ToolOverrides: c.ToolOverrides,
		Health: HealthOptions{
			Interval:           time.Duration(c.Health.Interval),
			Timeout:            time.Duration(c.Health.Timeout),
			DegradedThreshold:  time.Duration(c.Health.DegradedThreshold),
			UnhealthyThreshold: c.Health.UnhealthyThreshold,
		},
	}
	for _, b := range c.Backends {
		opts.Backends = append(opts.Backends, backend.Config{
			Name:      b.Name,
			URL:       b.URL,
			Protocol:  b.Protocol,
			Headers:   b.Headers,
			Auth:      backendAuth(b.Auth),
			Timeout:   time.Duration(b.Timeout),
			InputWait: time.Duration(b.InputWait),
		})
	}
	opts.applyDefaults()
	return opts, opts.Validate()
}

func (o *Options) applyDefaults() {
	if o.PageSize <= 0 {
		o.PageSize = 1000
	}
	if o.MaxPageSize <= 0 {
		o.MaxPageSize = max(o.PageSize, 1000)
	}
	o.PageSize = min(o.PageSize, o.MaxPageSize)
	if o.CatalogTTL <= 0 {
		o.CatalogTTL = 30 * time.Second
	}
	if o.FanOut <= 0 {
		o.FanOut = 10
	}
	if o.Health.Interval <= 0 {
		o.Health.Interval = 10 * time.Second
	}
	if o.Health.Timeout <= 0 {
		o.Health.Timeout = 5 * time.Second
	}
	if o.Health.DegradedThreshold <= 0 {
		o.Health.DegradedThreshold = 2 * time.Second
	}
	if o.Health.UnhealthyThreshold <= 0 {
		o.Health.UnhealthyThreshold = 3
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	for i := range o.Backends {
		o.Backends[i] = o.Backends[i].WithDefaults()
		o.Backends[i].HeldOwner = o.HeldOwner
	}
}

// Validate refuses options an engine cannot run with: no naming, a
// backend configuration that is wrong, a backend name used twice.
func (o *Options) Validate() error {
	if o.Naming == nil {
		return errors.New("no naming configured")
	}
	seen := map[string]bool{}
	for _, c := range o.Backends {
		if err := c.Validate(); err != nil {
			return err
		}
		if seen[c.Name] {
			return fmt.Errorf("backend %q is configured twice", c.Name)
		}
		seen[c.Name] = true
	}
	servers := map[string]bool{}
	for _, sv := range o.Servers {
		if sv.Name == "" || servers[sv.Name] {
			return fmt.Errorf("server %q is unnamed or configured twice", sv.Name)
		}
		servers[sv.Name] = true
		for _, b := range sv.Backends {
			if !seen[b] {
				return fmt.Errorf("server %q names backend %q, which is not configured", sv.Name, b)
			}
		}
	}
	return nil
}

// backendAuth is the backend package's form of a backend's auth section.
func backendAuth(a config.BackendAuth) backend.Auth {
	mode := a.EffectiveMode()
	if mode == config.BackendAuthStatic {
		return backend.Auth{}
	}
	a = a.WithDefaults()
	return backend.Auth{Mode: mode, Audience: a.Audience, TokenEndpoint: a.TokenEndpoint, ClientID: a.ClientID, ClientSecret: a.ClientSecret,
		Scopes: a.Scopes, CacheEntries: a.CacheEntries, RefreshBefore: time.Duration(a.RefreshBefore)}
}
