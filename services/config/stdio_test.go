package config

import "testing"

// TestStdioBackendIsValid: a command with its environment and directory is
// a backend of its own kind, with the defaults of any backend.
func TestStdioBackendIsValid(t *testing.T) {
	b := Backend{Name: "files", Command: []string{"npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv"},
		Env: map[string]string{"API_KEY": "k"}, Dir: "/srv"}.WithDefaults()
	if err := b.Validate("aggregator.backends[0]"); err != nil {
		t.Fatal(err)
	}
	if b.Protocol != ProtocolAuto || b.Timeout == 0 {
		t.Fatalf("defaults: %+v", b)
	}
}
