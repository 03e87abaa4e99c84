package config

import (
	"errors"
	"time"
)

// Indexer configures the search service.
type Indexer struct {
	// Listen is the gRPC address (host:port).
	Listen string `yaml:"listen"`
	// Database is a PostgreSQL URL. switchboard-dev starts a throwaway
	// PostgreSQL when it is empty; the indexer itself requires it.
	Database string `yaml:"database"`
	// Aggregator is where the indexer reads principals' views.
	Aggregator Endpoint `yaml:"aggregator"`
	// ScopeTTL bounds how long a principal's scope is trusted without
	// checking the aggregator (default 30s). Catalog change events
	// invalidate scopes sooner.
	ScopeTTL Duration `yaml:"scopeTTL"`
	// DefaultLimit is the number of hits when a search names none
	// (default 8); MaxLimit caps what a search may ask for (default and
	// at most 50).
	DefaultLimit int `yaml:"defaultLimit"`
	MaxLimit     int `yaml:"maxLimit"`
	// HTTPListen serves /healthz, /readyz (200 once the schema is
	// migrated) and Prometheus /metrics; empty disables.
	HTTPListen string `yaml:"httpListen"`
	// GCInterval is how often unused scopes, unreferenced documents and
	// expired revocations are collected (default 10m); ScopeRetention is
	// how long an unused scope is kept (default 24h).
	GCInterval     Duration `yaml:"gcInterval"`
	ScopeRetention Duration `yaml:"scopeRetention"`
	// MaxRevocationTTL is the furthest expiry a session revocation may
	// have (default 24h); gateway.sessions.ttl must not exceed it. A
	// RevokeSession expiring later than the session TTL (the smaller of
	// the two), plus five minutes of clock skew, is clamped to it.
	MaxRevocationTTL Duration `yaml:"maxRevocationTTL"`
	// MaxRevocationsPerCaller bounds the live revocations one service
	// credential that is not an operator's may have recorded through one
	// indexer replica (default 100000); past it RevokeSession is
	// RESOURCE_EXHAUSTED until some expire.
	MaxRevocationsPerCaller int `yaml:"maxRevocationsPerCaller,omitempty"`
	// SessionStates bounds the Legacy session states the cluster records.
	SessionStates IndexerSessionStates `yaml:"sessionStates,omitempty"`
	// ScopeCache bounds the scopes each replica holds in memory to search.
	ScopeCache IndexerScopeCache `yaml:"scopeCache,omitempty"`
}

// IndexerScopeCache bounds the principals' scopes an indexer replica keeps
// in memory for searching, least recently searched out first. The scope
// being searched is kept whatever its size. A scope evicted is read again
// from the database by its next search.
type IndexerScopeCache struct {
	// Documents bounds the distinct tool documents the scopes hold (a
	// document in several scopes is held once; default 50000).
	Documents int `yaml:"documents,omitempty"`
	// Memberships bounds the sum of the scopes' sizes (a document in three
	// scopes counts three times; default 100000): each scope holds, for
	// each of its documents, its postings, its vector of meaning and its
	// places.
	Memberships int `yaml:"memberships,omitempty"`
}

// IndexerSessionStates bounds the Legacy session states (log levels,
// resource subscriptions) every gateway replica records in the indexer's
// database.
type IndexerSessionStates struct {
	// MaxBytes bounds the state of all sessions of the cluster together,
	// overhead included (default 64 MiB); past it a change that adds
	// state is RESOURCE_EXHAUSTED. Each indexer replica holds a copy, as
	// each gateway replica does (which gateway.sessions.maxStateBytes
	// bounds on that replica).
	MaxBytes int64 `yaml:"maxBytes,omitempty"`
}

// Defaults of the indexer section.
const (
	DefaultIndexerScopeTTL          = 30 * time.Second
	DefaultIndexerLimit             = 8
	MaxIndexerLimit                 = 50
	DefaultIndexerGCInterval        = 10 * time.Minute
	DefaultIndexerScopeRetention    = 24 * time.Hour
	DefaultIndexerMaxRevocationTTL  = 24 * time.Hour
	DefaultMaxRevocationsPerCaller  = 100_000
	DefaultClusterSessionStateBytes = 64 << 20
	DefaultScopeCacheDocuments      = 50_000
	DefaultScopeCacheMemberships    = 100_000
)

// WithDefaults returns the section with every unset value at its default.
// Limits out of range are brought into it: maxLimit to at most 50, and
// defaultLimit to at most maxLimit.
func (c Indexer) WithDefaults() Indexer {
	c.ScopeTTL = Duration(c.ScopeTTL.Or(DefaultIndexerScopeTTL))
	c.GCInterval = Duration(c.GCInterval.Or(DefaultIndexerGCInterval))
	c.ScopeRetention = Duration(c.ScopeRetention.Or(DefaultIndexerScopeRetention))
	c.MaxRevocationTTL = Duration(c.MaxRevocationTTL.Or(DefaultIndexerMaxRevocationTTL))
	if c.SessionStates.MaxBytes <= 0 {
		c.SessionStates.MaxBytes = DefaultClusterSessionStateBytes
	}
	if c.MaxRevocationsPerCaller <= 0 {
		c.MaxRevocationsPerCaller = DefaultMaxRevocationsPerCaller
	}
	if c.ScopeCache.Documents <= 0 {
		c.ScopeCache.Documents = DefaultScopeCacheDocuments
	}
	if c.ScopeCache.Memberships <= 0 {
		c.ScopeCache.Memberships = DefaultScopeCacheMemberships
	}
	if c.MaxLimit <= 0 || c.MaxLimit > MaxIndexerLimit {
		c.MaxLimit = MaxIndexerLimit
	}
	if c.DefaultLimit <= 0 {
		c.DefaultLimit = DefaultIndexerLimit
	}
	c.DefaultLimit = min(c.DefaultLimit, c.MaxLimit)
	return c
}

// RevocationTTL is the longest a session revocation is kept: as long as a
// session lives (gateway.sessions.ttl), and never longer than
// indexer.maxRevocationTTL, defaults applied to both.
func (c *Config) RevocationTTL() time.Duration {
	return min(time.Duration(c.Indexer.WithDefaults().MaxRevocationTTL), time.Duration(c.Gateway.WithDefaults().Sessions.TTL))
}

// Validate reports what the indexer cannot run without.
func (c Indexer) Validate() error {
	var errs []error
	if c.Listen == "" {
		errs = append(errs, errors.New("indexer.listen is required"))
	}
	if c.Database == "" {
		errs = append(errs, errors.New("indexer.database is required (a PostgreSQL URL)"))
	}
	if c.Aggregator.Address == "" {
		errs = append(errs, errors.New("indexer.aggregator.address is required"))
	}
	if err := c.Aggregator.ValidateAddress("indexer.aggregator.address"); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
