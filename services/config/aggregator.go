package config

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
	// CatalogTTL is how long a snapshot is served before a refresh.
	CatalogTTL Duration `yaml:"catalogTTL"`
	// FanOut bounds concurrent backend requests while building a snapshot.
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
}

// Backend is one backend MCP server.
type Backend struct {
	Name string `yaml:"name"`
	URL  string `yaml:"url"`
	// Protocol is auto (Modern first, Legacy fallback), 2026-07-28 or
	// 2025-11-25.
	Protocol string `yaml:"protocol"`
	// Headers are injected into every request to the backend. Values are
	// secrets as far as logging goes: they are never logged.
	Headers map[string]string `yaml:"headers"`
	// Timeout bounds every request to the backend (default 30s).
	Timeout Duration `yaml:"timeout"`
	// InputWait bounds how long a call held open for the client's input
	// (a Legacy backend's elicitation or sampling request, answered by the
	// client's retry) waits for that retry before it is cancelled
	// (default 60s).
	InputWait Duration `yaml:"inputWait"`
}

// ConflictResolution configures advertised names.
type ConflictResolution struct {
	// Strategy is prefix, priority or manual.
	Strategy string `yaml:"strategy"`
	// PrefixFormat is applied as the prefix; {backend} is replaced with the
	// backend name. Default "{backend}_".
	PrefixFormat  string   `yaml:"prefixFormat"`
	PriorityOrder []string `yaml:"priorityOrder"`
	// Overrides rename tools: key "<backend>.<tool>" (manual strategy).
	Overrides map[string]string `yaml:"overrides"`
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
