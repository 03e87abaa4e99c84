package config

// Dev configures switchboard-dev, the local runner that starts the whole
// system on one machine. The services ignore this section.
type Dev struct {
	// Backends are demo MCP backends (switchboard-demo-backend) to start
	// before the services. List them in aggregator.backends too, with their
	// URLs (http://<listen>/mcp), so the aggregator reaches them.
	Backends []DemoBackend `yaml:"backends"`
	// BinDir holds the binaries to start, relative to the directory of this
	// file; default: the directory of switchboard-dev itself.
	BinDir string `yaml:"binDir"`
	// StartTimeout bounds how long each process may take to become ready
	// (default 60s).
	StartTimeout Duration `yaml:"startTimeout"`
	// StopGrace is how long each process gets to exit after SIGTERM before
	// it is killed (default 10s).
	StopGrace Duration `yaml:"stopGrace"`
}

// DemoBackend is a demo MCP server started by switchboard-dev. Its MCP
// endpoint is http://<listen>/mcp.
type DemoBackend struct {
	// Name is the backend's name, reported in every answer it gives.
	Name string `yaml:"name"`
	// Listen is its HTTP address, e.g. 127.0.0.1:9101.
	Listen string `yaml:"listen"`
	// Config is a demo backend definition file (tools, resources, resource
	// templates, prompts), relative to the directory of this configuration
	// file. See docs/configuration.md.
	Config string `yaml:"config"`
	// Synthetic adds that many generated echo tools (tool_0000, ...).
	Synthetic int `yaml:"synthetic"`
	// ToolsJSON is a JSON object {"tool name": "description"}, relative to
	// the directory of this file; each entry becomes an echo tool.
	ToolsJSON string `yaml:"toolsJSON"`
	// Stateful serves Legacy sessions only (no Modern), to demonstrate the
	// fallback.
	Stateful bool `yaml:"stateful"`
}
