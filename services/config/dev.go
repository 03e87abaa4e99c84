package config

// Dev configures switchboard-dev.
type Dev struct {
	// Backends are demo MCP backends to start, each with its tools.
	Backends []DemoBackend `yaml:"backends"`
	// BinDir holds the service binaries; default: the directory of
	// switchboard-dev itself.
	BinDir string `yaml:"binDir"`
}

// DemoBackend is a demo MCP server started by switchboard-dev.
type DemoBackend struct {
	Name   string `yaml:"name"`
	Listen string `yaml:"listen"`
	// Config is a demo backend definition file (see services/demo).
	Config string `yaml:"config"`
	// Stateful serves Legacy sessions only (no Modern), to demonstrate the
	// fallback.
	Stateful bool `yaml:"stateful"`
}
