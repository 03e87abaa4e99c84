package config

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
	// (default 8); MaxLimit caps what a search may ask for (default 50).
	DefaultLimit int `yaml:"defaultLimit"`
	MaxLimit     int `yaml:"maxLimit"`
	// HTTPListen serves /healthz, /readyz (200 once the schema is
	// migrated) and Prometheus /metrics; empty disables.
	HTTPListen string `yaml:"httpListen"`
	// GCInterval is how often unused scopes and unreferenced documents are
	// collected (default 10m); ScopeRetention is how long an unused scope
	// is kept (default 24h).
	GCInterval     Duration `yaml:"gcInterval"`
	ScopeRetention Duration `yaml:"scopeRetention"`
}
