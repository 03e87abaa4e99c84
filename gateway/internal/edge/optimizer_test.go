package edge

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"

	"github.com/switchboard-mcp/switchboard/gateway/internal/methods"
	"github.com/switchboard-mcp/switchboard/services/apierr"
	"github.com/switchboard-mcp/switchboard/services/backenderr"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

// TestOptimizerView drives the optimizer view with go-sdk clients of both
// eras: tools/list is exactly find_tool and call_tool, find_tool searches
// the caller's own tools, call_tool calls as the caller.
func TestOptimizerView(t *testing.T) {
	b := startBackends(t)
	cfg := testGatewayConfig(b)
	cfg.Optimizer.Enabled = true
	_, srv := startGateway(t, b, cfg)
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			// With the optimizer enabled /mcp is the optimizer view and
			// /mcp/raw keeps the aggregated tools.
			for path, want := range map[string][]string{
				"/mcp":           {"find_tool", "call_tool"},
				"/mcp/optimized": {"find_tool", "call_tool"},
				"/mcp/raw":       {"alpha_ask", "alpha_echo"},
			} {
				cs := connect(t, ctx, srv.URL+path, "alice-key", era.version, nil)
				res, err := cs.ListTools(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, tool := range res.Tools {
					names = append(names, tool.Name)
				}
				if !slices.Equal(names, want) {
					t.Fatalf("%s tools = %v, want %v", path, names, want)
				}
			}
			cs := connect(t, ctx, srv.URL+"/mcp/optimized", "alice-key", era.version, nil)

			// alice's search never sees admin_reset, bob's does.
			found, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "find_tool", Arguments: map[string]any{"tool_description": "tool of", "tool_keywords": []string{"reset"}}})
			if err != nil || found.IsError {
				t.Fatalf("find_tool: %+v %v", found, err)
			}
			var structured methods.FindResult
			raw, _ := json.Marshal(found.StructuredContent)
			if err := json.Unmarshal(raw, &structured); err != nil {
				t.Fatal(err)
			}
			var text methods.FindResult
			if err := json.Unmarshal([]byte(toolText(t, found)), &text); err != nil {
				t.Fatalf("text is not the result JSON: %v", err)
			}
			if len(structured.Tools) != 5 || len(text.Tools) != 5 || structured.BaselineTokens != 1000 ||
				structured.ReturnedTokens == 0 || structured.SavingsPercent <= 0 || structured.SavingsPercent >= 100 {
				t.Fatalf("find_tool result = %+v", structured)
			}
			for _, tool := range structured.Tools {
				if tool.Name == "admin_reset" || len(tool.InputSchema) == 0 {
					t.Fatalf("unexpected hit %+v", tool)
				}
			}

			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"tool_name": "beta_add", "parameters": map[string]any{"a": 20, "b": 22}}})
			if err != nil || res.IsError || toolText(t, res) != "42" {
				t.Fatalf("call_tool: %+v %v", res, err)
			}
			// tool_name inside parameters is accepted too.
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"parameters": map[string]any{"tool_name": "alpha_echo", "text": "hi"}}})
			if err != nil || res.IsError || toolText(t, res) != `alice:alpha_echo:{"text":"hi"}` {
				t.Fatalf("call_tool with nested name: %+v %v", res, err)
			}
			// A tool outside alice's view fails as a tool error, like a
			// missing one.
			for _, name := range []string{"admin_reset", "nope"} {
				res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"tool_name": name}})
				if err != nil || !res.IsError || !strings.Contains(toolText(t, res), "unknown tool") {
					t.Fatalf("call_tool %s: %+v %v", name, res, err)
				}
			}

			// With the index down find_tool reports it as a tool error and
			// everything else keeps working.
			b.down.Store(true)
			defer b.down.Store(false)
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "find_tool", Arguments: map[string]any{"tool_description": "add"}})
			if err != nil || !res.IsError || !strings.Contains(toolText(t, res), "tool search failed") {
				t.Fatalf("find_tool with index down: %+v %v", res, err)
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"tool_name": "beta_add", "parameters": map[string]any{"a": 1, "b": 1}}})
			if err != nil || res.IsError {
				t.Fatalf("call_tool with index down: %+v %v", res, err)
			}
			if _, err := cs.ListResources(ctx, nil); err != nil {
				t.Fatalf("resources with index down: %v", err)
			}
		})
	}
}

// TestOptimizerSearchIsPerPrincipal: bob (an admin) finds admin_reset.
func TestOptimizerSearchIsPerPrincipal(t *testing.T) {
	b := startBackends(t)
	_, srv := startGateway(t, b, testGatewayConfig(b))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs := connect(t, ctx, srv.URL+"/mcp/optimized", "bob-key", "", nil)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "find_tool", Arguments: map[string]any{"tool_description": "reset"}})
	if err != nil || res.IsError || !strings.Contains(toolText(t, res), `"name":"admin_reset"`) {
		t.Fatalf("bob's find_tool: %+v %v", res, err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "find_tool", Arguments: map[string]any{}})
	if err != nil || !res.IsError || !strings.Contains(toolText(t, res), "tool_description") {
		t.Fatalf("find_tool without description: %+v %v", res, err)
	}
}

// TestFindToolRetriesAServerTheIndexerCannotFind: only a search the
// indexer refuses as it stands (INVALID_ARGUMENT) is answered without
// asking for a retry. A server it cannot find (a reload that reached
// this gateway before the aggregator) is the indexer's state, not the
// search's, and the same search later may be served.
func TestFindToolRetriesAServerTheIndexerCannotFind(t *testing.T) {
	b := startBackends(t)
	b.idx.SearchFunc = func(context.Context, *indexerv1.SearchRequest) (*indexerv1.SearchResponse, error) {
		return nil, apierr.New(codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND, "no such server")
	}
	_, srv := startGateway(t, b, testGatewayConfig(b))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs := connect(t, ctx, srv.URL+"/mcp/optimized", "alice-key", "", nil)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "find_tool", Arguments: map[string]any{"tool_description": "add"}})
	if err != nil || !res.IsError || !strings.Contains(toolText(t, res), "retry find_tool later") {
		t.Fatalf("find_tool of a server the indexer cannot find: %+v %v, want a tool error asking for a retry", res, err)
	}
}

// TestCallToolAnswersABackendsNotFoundAlikeInBothEras: a backend's own
// "resource not found" (-32002) to the tool call_tool called is a failed
// call for the model to read in both eras. A Modern client got one (the
// error reaches it as -32602) while a Legacy client got the protocol
// error -32002.
func TestCallToolAnswersABackendsNotFoundAlikeInBothEras(t *testing.T) {
	b := newBackends()
	b.agg.CallToolFunc = func(context.Context, *aggregatorv1.CallToolRequest) (*aggregatorv1.CallToolResponse, error) {
		return nil, backenderr.New("alpha", &aggregatorv1.BackendError{Code: -32002, Message: "Resource not found", DataJson: `{"uri":"file:///zz"}`})
	}
	b.serve(t)
	_, srv := startGateway(t, b, testGatewayConfig(b))
	url := srv.URL + "/mcp/optimized"
	args := `"name":"call_tool","arguments":{"tool_name":"alpha_echo","parameters":{}}`
	answers := map[string]wireResponse{
		"Modern": send(t, http.MethodPost, url, modernHeaders("tools/call", "Mcp-Name", "call_tool"), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+modernMeta+`,`+args+`}}`),
		"Legacy": send(t, http.MethodPost, url, legacyHeaders("alice-key", initializeOn(t, url, "alice-key")), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+args+`}}`),
	}
	for era, a := range answers {
		_, result, rerr := a.rpc(t)
		if rerr != nil || string(result["isError"]) != "true" || !strings.Contains(string(result["content"]), "Resource not found") {
			t.Errorf("%s: HTTP %d %s, want a failed call saying the resource was not found", era, a.status, a.body)
		}
	}
}
