package config

// Gateway configures the MCP edge.
type Gateway struct {
	// Listen is the HTTP address; MCP is served at /mcp.
	Listen string `yaml:"listen"`
	// PublicURL is the externally visible base URL (for OAuth metadata and
	// logs); defaults to http://<listen>.
	PublicURL  string        `yaml:"publicURL"`
	Aggregator Endpoint      `yaml:"aggregator"`
	Indexer    Endpoint      `yaml:"indexer"`
	Auth       GatewayAuth   `yaml:"auth"`
	Optimizer  Optimizer     `yaml:"optimizer"`
	Sessions   Sessions      `yaml:"sessions"`
	HTTP       GatewayHTTP   `yaml:"http"`
	Cache      CachePolicy   `yaml:"cache"`
	ServerInfo ServerInfo    `yaml:"serverInfo"`
	Timeouts   GatewayTiming `yaml:"timeouts"`
}

// GatewayAuth selects how MCP callers authenticate.
type GatewayAuth struct {
	// Mode is anonymous, apiKeys or oidc.
	Mode    string   `yaml:"mode"`
	APIKeys []APIKey `yaml:"apiKeys"`
	OIDC    OIDC     `yaml:"oidc"`
}

// APIKey maps a bearer key to an identity.
type APIKey struct {
	Key     string   `yaml:"key"`
	Subject string   `yaml:"subject"`
	Groups  []string `yaml:"groups"`
}

// OIDC configures JWT bearer validation.
type OIDC struct {
	Issuer   string `yaml:"issuer"`
	Audience string `yaml:"audience"`
	JWKSURL  string `yaml:"jwksURL"`
	// GroupsClaim names the claim holding the user's groups ("groups").
	GroupsClaim string `yaml:"groupsClaim"`
}

// Optimizer configures find_tool/call_tool mode.
type Optimizer struct {
	// Enabled serves the optimizer view at /mcp; the raw view then moves to
	// /mcp/raw. Both views are always available at their own paths.
	Enabled bool `yaml:"enabled"`
	// Limit is the default number of find_tool hits.
	Limit int `yaml:"limit"`
}

// Sessions configures Legacy (2025-11-25) sessions.
type Sessions struct {
	// Key seals session ids (32 bytes, base64). Every gateway replica must
	// share it. Empty generates a random key at start (one replica only).
	Key string `yaml:"key"`
	// TTL bounds a session's idle life.
	TTL Duration `yaml:"ttl"`
}

// GatewayHTTP holds edge protections.
type GatewayHTTP struct {
	MaxBodyBytes   int64    `yaml:"maxBodyBytes"`
	AllowedOrigins []string `yaml:"allowedOrigins"`
	AllowedHosts   []string `yaml:"allowedHosts"`
	// KeepAlive is the interval of SSE keep-alive comments.
	KeepAlive Duration `yaml:"keepAlive"`
}

// CachePolicy sets the ttlMs the gateway advertises on cacheable results.
type CachePolicy struct {
	TTL Duration `yaml:"ttl"`
}

// ServerInfo is what the gateway calls itself.
type ServerInfo struct {
	Name         string `yaml:"name"`
	Version      string `yaml:"version"`
	Instructions string `yaml:"instructions"`
}

// GatewayTiming bounds calls to the services.
type GatewayTiming struct {
	Request Duration `yaml:"request"`
}
