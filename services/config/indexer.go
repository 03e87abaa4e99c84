package config

// Indexer configures the search service.
type Indexer struct {
	Listen string `yaml:"listen"`
	// Database is a PostgreSQL URL. switchboard-dev starts a throwaway
	// PostgreSQL when it is empty; the indexer itself requires it.
	Database   string   `yaml:"database"`
	Aggregator Endpoint `yaml:"aggregator"`
	// ScopeTTL bounds how long a principal's scope is trusted without
	// checking the aggregator.
	ScopeTTL     Duration `yaml:"scopeTTL"`
	DefaultLimit int      `yaml:"defaultLimit"`
	MaxLimit     int      `yaml:"maxLimit"`
	HTTPListen   string   `yaml:"httpListen"`
}
