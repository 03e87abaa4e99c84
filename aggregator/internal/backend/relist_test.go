package backend

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/dualera"
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

// TestResourcesWithoutTemplates: a server whose capabilities name
// resources and that answers resources/templates/list "method not found"
// (many implement no templates) is listed, its resources with it, in both
// eras; its whole listing once failed, and the backend was down.
func TestResourcesWithoutTemplates(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "notemplates", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	srv.AddResource(&mcp.Resource{URI: "docs://readme", Name: "readme"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{}, nil
	})
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "resources/templates/list" {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found"}
			}
			return next(ctx, method, req)
		}
	})
	ts := httptest.NewServer(dualera.New(srv, nil, nil))
	t.Cleanup(ts.Close)
	for _, protocol := range []string{ProtocolModern, ProtocolLegacy} {
		c := newTestClient(Config{Name: "notemplates", URL: ts.URL, Protocol: protocol, Timeout: 5 * time.Second})
		t.Cleanup(c.Close)
		lists, err := c.ListAll(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", protocol, err)
		}
		if len(lists.Tools) != 1 || len(lists.Resources) != 1 || len(lists.ResourceTemplates) != 0 {
			t.Fatalf("%s: %d tools, %d resources, %d templates", protocol, len(lists.Tools), len(lists.Resources), len(lists.ResourceTemplates))
		}
	}
}
