package e2e

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// ticketsSpec is a demo backend with one echo tool that takes a tenant.
const ticketsSpec = `
tools:
  - name: search
    description: Search tickets.
    behaviour: echo
    inputSchema:
      type: object
      required: [tenant, query]
      properties:
        tenant: {type: string}
        query: {type: string}
        limit: {type: integer}
`

// An override renames and re-describes a tool, hides its tenant argument
// (fixed to acme) and defaults limit, through the real processes in both
// eras; a client that sets the hidden argument gets -32602.
func TestToolOverrideWithHiddenArgument(t *testing.T) {
	c := harness.Start(t, harness.Options{
		Backends:  []harness.Backend{{Name: "tickets", Spec: ticketsSpec}},
		NoIndexer: true,
		Configure: func(cfg *config.Config) {
			cfg.Aggregator.ToolOverrides = []config.ToolOverride{{
				Backend: "tickets", Tool: "search", Name: "find", Description: "Find tickets by text.",
				Annotations: map[string]any{"readOnlyHint": true},
				Arguments: map[string]config.ArgumentOverride{
					"tenant": {Hidden: true, Value: "acme"},
					"limit":  {Default: 20},
				},
			}}
		},
	})
	for _, era := range []struct{ name, version string }{{"modern", harness.Modern}, {"legacy", harness.Legacy}} {
		t.Run(era.name, func(t *testing.T) {
			cs := harness.Connect(t, c.MCPURL, era.version)
			ctx := t.Context()
			res, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(res.Tools, func(tl *mcp.Tool) bool { return tl.Name == "tickets_find" })
			if i < 0 {
				t.Fatalf("no tickets_find in %v", harness.ToolNames(t, cs))
			}
			tool := res.Tools[i]
			schema, _ := json.Marshal(tool.InputSchema)
			if tool.Description != "Find tickets by text." || tool.Annotations == nil || !tool.Annotations.ReadOnlyHint ||
				strings.Contains(string(schema), "tenant") || !strings.Contains(string(schema), `"default":20`) {
				t.Errorf("advertised tool: %q %+v schema %s", tool.Description, tool.Annotations, schema)
			}

			out, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "tickets_find", Arguments: map[string]any{"query": "printer"}})
			if err != nil || out.IsError {
				t.Fatalf("call: %+v, %v", out, err)
			}
			var echoed struct {
				Arguments map[string]any `json:"arguments"`
			}
			if err := json.Unmarshal([]byte(text(out)), &echoed); err != nil {
				t.Fatalf("echo %q: %v", text(out), err)
			}
			if a := echoed.Arguments; a["tenant"] != "acme" || a["query"] != "printer" || a["limit"] != float64(20) {
				t.Errorf("the backend got %v: want tenant acme (fixed), query printer, limit 20 (default)", a)
			}

			_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "tickets_find", Arguments: map[string]any{"query": "x", "tenant": "globex"}})
			var rpcErr *jsonrpc.Error
			if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(rpcErr.Message, "tenant") || strings.Contains(rpcErr.Message, "acme") {
				t.Errorf("a call setting the hidden tenant: %v; want -32602 naming the argument, not its value", err)
			}
		})
	}
}
