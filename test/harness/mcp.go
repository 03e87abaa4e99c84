package harness

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Protocol versions a test client can pin.
const (
	// Modern leaves the version to the SDK's default Connect: discover
	// first, 2026-07-28.
	Modern = ""
	// Legacy pins the 2025-11-25 initialize handshake and session.
	Legacy = "2025-11-25"
)

// Connect opens a go-sdk client session to url at version (Modern or
// Legacy); t.Cleanup closes it.
func Connect(t testing.TB, url, version string) *mcp.ClientSession {
	t.Helper()
	return ConnectWith(t, url, version, nil)
}

// ConnectWith is Connect with client options (handlers for list_changed,
// elicitation, ...).
func ConnectWith(t testing.TB, url, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "switchboard-test", Version: "0"}, opts)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect to %s (version %q): %v", url, version, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// ToolNames lists every tool of cs, following every page.
func ToolNames(t testing.TB, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatalf("list tools: %v", err)
		}
		names = append(names, tool.Name)
	}
	return names
}
