package backend

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Listing a backend again decodes only what changed: an unchanged item is
// the same pointer as before, an unchanged listing is Same as the previous
// one, and a changed tool is new, with the new bytes.
func TestRelistKeepsUnchangedItems(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "relist", Version: "1"}, nil)
	noop := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	}
	for _, name := range []string{"alpha", "beta", "gamma"} {
		server.AddTool(&mcp.Tool{Name: name, Description: name + " v1", InputSchema: map[string]any{"type": "object"}}, noop)
	}
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	defer srv.Close()
	c := newTestClient(Config{Name: "relist", URL: srv.URL, Protocol: ProtocolLegacy})
	defer c.Close()
	ctx := context.Background()

	first, err := c.ListAll(ctx)
	if err != nil || len(first.Tools) != 3 {
		t.Fatalf("first listing: %v %v", first, err)
	}
	second, err := c.ListAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Same(second) {
		t.Fatal("an unchanged backend's second listing is not the same as its first")
	}
	for i := range first.Tools {
		if first.Tools[i] != second.Tools[i] {
			t.Fatalf("tool %s was decoded again", first.Tools[i].Name)
		}
	}

	server.AddTool(&mcp.Tool{Name: "beta", Description: "beta v2", InputSchema: map[string]any{"type": "object"}}, noop)
	third, err := c.ListAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if third.Same(second) {
		t.Fatal("a changed listing is the same as before")
	}
	byName := map[string]int{}
	for i, tool := range third.Tools {
		byName[tool.Name] = i
	}
	for _, tool := range second.Tools {
		now := third.Tools[byName[tool.Name]]
		if changed := tool.Name == "beta"; (now != tool) != changed {
			t.Fatalf("tool %s: a new item %v, want %v", tool.Name, now != tool, changed)
		}
	}
	if got := third.Tools[byName["beta"]].Description; got != "beta v2" {
		t.Fatalf("beta's description is %q", got)
	}
	if !contains(third.Definitions.Tools[byName["beta"]], "beta v2") {
		t.Fatalf("beta's definition is %s", third.Definitions.Tools[byName["beta"]])
	}
}

func contains(b []byte, s string) bool {
	return strings.Contains(string(b), s)
}
