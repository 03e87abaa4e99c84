package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// TestAppOnlyToolsAreNotTheModels: a tool of its MCP App alone
// (_meta.ui.visibility ["app"]) is one a host keeps out of the model's
// tools. In the optimizer view no host stands between: find_tool does not
// find it, call_tool and code mode do not call it (the words of a tool
// that does not exist), while the app's own tools/call of it works. The
// optimizer once showed it and called it on the model's word.
func TestAppOnlyToolsAreNotTheModels(t *testing.T) {
	const spec = `
tools:
  - {name: forecast_chart, description: "Five days of highs and lows for a city, drawn as a chart.", behaviour: forecast, ui: "ui://forecast/app.html"}
  - {name: refresh_chart_cache, description: "Refresh the forecast chart cache for a city.", behaviour: echo, ui: "ui://forecast/app.html", visibility: [app]}
resources:
  - {uri: "ui://forecast/app.html", name: forecast_app, app: true}
`
	c := harness.Start(t, harness.Options{Backends: []harness.Backend{{Name: "weather", Spec: spec}},
		Configure: func(cfg *config.Config) { cfg.Aggregator.CodeMode = config.CodeMode{Enabled: true} }})
	ctx := t.Context()
	optimized := harness.Connect(t, c.MCPURL+"/optimized", harness.Modern)
	var names []string
	testkit.Eventually(t, "find_tool answers", 60*time.Second, func() error {
		res, err := optimized.CallTool(ctx, &mcp.CallToolParams{Name: "find_tool", Arguments: map[string]any{"tool_description": "refresh the forecast chart cache"}})
		if err != nil || res.IsError {
			return fmt.Errorf("find_tool: %v %v", res, err)
		}
		found, _ := res.StructuredContent.(map[string]any)
		hits, _ := found["tools"].([]any)
		names = names[:0]
		for _, h := range hits {
			names = append(names, fmt.Sprint(h.(map[string]any)["name"]))
		}
		if len(names) == 0 {
			return fmt.Errorf("no hits yet")
		}
		return nil
	})
	if strings.Contains(strings.Join(names, ","), "weather_refresh_chart_cache") {
		t.Errorf("find_tool shows the model an app-only tool: %v", names)
	}
	res, err := optimized.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"tool_name": "weather_refresh_chart_cache", "parameters": map[string]any{"city": "Oslo"}}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "use find_tool") {
		t.Errorf("call_tool of an app-only tool: %v %v", res, err)
	}
	if _, isError, text := runCode(t, optimized, "result = weather_refresh_chart_cache(city=\"Oslo\")\n"); !isError || !strings.Contains(text, "undefined") {
		t.Errorf("code mode called an app-only tool: %v %s", isError, text)
	}
	// The app's own call, through the full view, is served.
	full := harness.Connect(t, c.MCPURL, harness.Modern)
	if res, err := full.CallTool(ctx, &mcp.CallToolParams{Name: "weather_refresh_chart_cache", Arguments: map[string]any{"city": "Oslo"}}); err != nil || res.IsError {
		t.Errorf("the app's tools/call of its tool: %v %v", res, err)
	}
}
