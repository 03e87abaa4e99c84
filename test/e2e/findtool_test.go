package e2e

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// ledgerSpec is a demo backend whose tools carry everything a listing may:
// a title, annotations and an output schema on one, none on the other.
const ledgerSpec = `
tools:
  - name: balance
    title: Account balance
    description: Read the balance of a ledger account.
    behaviour: echo
    annotations: {readOnlyHint: true, openWorldHint: false}
    inputSchema:
      type: object
      properties: {account: {type: string}}
      required: [account]
    outputSchema:
      type: object
      properties: {backend: {type: string}, tool: {type: string}}
  - name: purge
    description: Purge every entry of a ledger account.
    behaviour: echo
`

// A find_tool hit is the tool as tools/list shows the same principal:
// title, annotations and output schema included, as the view lists them
// (an override's title and annotations, not the backend's). Through the
// optimizer a model must learn what a tool returns, and a host whether it
// only reads or destroys, as through tools/list.
func TestFindToolHitIsTheListedTool(t *testing.T) {
	c := harness.Start(t, harness.Options{
		Backends: []harness.Backend{{Name: "ledger", Spec: ledgerSpec}},
		Configure: func(cfg *config.Config) {
			cfg.Aggregator.ToolOverrides = []config.ToolOverride{{
				Backend: "ledger", Tool: "purge", Title: "Purge account",
				Annotations: map[string]any{"destructiveHint": true, "readOnlyHint": false},
			}}
		},
	})
	ctx := t.Context()
	listed := map[string]map[string]any{}
	raw := harness.Connect(t, c.MCPURL, harness.Modern)
	for tool, err := range raw.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		listed[tool.Name] = asObject(t, tool)
	}
	for _, name := range []string{"ledger_balance", "ledger_purge"} {
		if listed[name]["title"] == nil || listed[name]["annotations"] == nil {
			t.Fatalf("tools/list shows %s without its title or annotations: %v", name, listed[name])
		}
	}
	if listed["ledger_balance"]["outputSchema"] == nil {
		t.Fatalf("tools/list shows ledger_balance without its output schema: %v", listed["ledger_balance"])
	}

	for _, era := range []string{harness.Modern, harness.Legacy} {
		optimized := harness.Connect(t, strings.TrimSuffix(c.MCPURL, "/mcp")+"/mcp/optimized", era)
		for _, q := range []struct{ query, tool string }{
			{"read the balance of a ledger account", "ledger_balance"},
			{"purge every entry of a ledger account", "ledger_purge"},
		} {
			testkit.Eventually(t, "find_tool finds "+q.tool, 60*time.Second, func() error {
				res, err := optimized.CallTool(ctx, &mcp.CallToolParams{Name: "find_tool", Arguments: map[string]any{"tool_description": q.query}})
				if err != nil || res.IsError {
					return fmt.Errorf("find_tool: %v %v", res, err)
				}
				var found struct {
					Tools []map[string]any `json:"tools"`
				}
				b, _ := json.Marshal(res.StructuredContent)
				if err := json.Unmarshal(b, &found); err != nil {
					return err
				}
				for _, hit := range found.Tools {
					if hit["name"] != q.tool {
						continue
					}
					// Both read as go-sdk reads a listed tool, so that
					// its encoding (idempotentHint: false, written
					// whether set or not) is the same on both sides.
					hb, _ := json.Marshal(hit)
					var asListed mcp.Tool
					if err := json.Unmarshal(hb, &asListed); err != nil {
						t.Fatalf("era %q: the hit %s is not a tool: %v", era, hb, err)
					}
					if !reflect.DeepEqual(asObject(t, &asListed), listed[q.tool]) {
						t.Fatalf("era %q: the find_tool hit\n%v\nis not the listed tool\n%v", era, hit, listed[q.tool])
					}
					return nil
				}
				return fmt.Errorf("no hit for %s among %v", q.tool, found.Tools)
			})
		}
	}
}

// asObject is v as a JSON object.
func asObject(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFindToolRefusesABadSearchForGood: a search the indexer refuses as
// it stands (only spaces, past its length bound, too many keywords) is a
// tool error that says what is wrong, not one that asks the model to
// retry later: the same search would be refused again. The indexer's
// own failures still say to retry.
func TestFindToolRefusesABadSearchForGood(t *testing.T) {
	c := harness.Start(t, harness.Options{Backends: []harness.Backend{{Name: "tickets"}}})
	cs := harness.Connect(t, c.MCPURL+"/optimized", harness.Modern)
	find := func(args map[string]any) (*mcp.CallToolResult, error) {
		return cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "find_tool", Arguments: args})
	}
	testkit.Eventually(t, "find_tool answers", 60*time.Second, func() error {
		if res, err := find(map[string]any{"tool_description": "echo"}); err != nil || res.IsError {
			return fmt.Errorf("find_tool: %v %v", text(res), err)
		}
		return nil
	})
	for name, c := range map[string]struct {
		args map[string]any
		says string
	}{
		"only spaces":       {map[string]any{"tool_description": "   "}, "query is required"},
		"past 4096 bytes":   {map[string]any{"tool_description": strings.Repeat("echo ", 1000)}, "at most 4096 bytes"},
		"too many keywords": {map[string]any{"tool_description": "echo", "tool_keywords": make([]string, 40)}, "at most 32"},
	} {
		res, err := find(c.args)
		if err != nil || !res.IsError || !strings.Contains(text(res), c.says) || strings.Contains(text(res), "retry") {
			t.Errorf("%s: %q, %v; want a tool error saying %q, and no retry", name, text(res), err, c.says)
		}
	}

	c.Indexer.Stop()
	res, err := find(map[string]any{"tool_description": "echo"})
	if err != nil || !res.IsError || !strings.Contains(text(res), "retry find_tool later") {
		t.Errorf("find_tool with the indexer down: %q, %v; want a tool error asking for a retry", text(res), err)
	}
}
