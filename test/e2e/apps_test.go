package e2e

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/browser"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

const uiExtension = "io.modelcontextprotocol/ui"

// appBackend is a demo backend with an MCP App: the forecast tool and its
// page, under a URI that every such backend uses alike.
const appBackend = `
tools:
  - {name: forecast_chart, description: "Five days of highs and lows for a city, drawn as a chart.", behaviour: forecast, ui: "ui://forecast/app.html"}
  - {name: echo, description: Echo., behaviour: echo}
resources:
  - {uri: "ui://forecast/app.html", name: forecast_app, app: true}
`

// toolUI is the page a listed tool names in _meta.ui.resourceUri, "" for
// none.
func toolUI(meta mcp.Meta) string {
	ui, _ := meta["ui"].(map[string]any)
	uri, _ := ui["resourceUri"].(string)
	return uri
}

// TestAppsThroughTheGateway: two backends, one of each era, whose apps
// use the same page URI. Through the gateway, in both eras, each tool
// names its own backend's page, each page reads from its backend with its
// CSP, the extension is announced; a server that filters pages out lists
// the tools without them and refuses the reads; find_tool hits carry the
// rewritten _meta.
func TestAppsThroughTheGateway(t *testing.T) {
	c := harness.Start(t, harness.Options{
		Backends: []harness.Backend{{Name: "weather", Spec: appBackend}, {Name: "maps", Spec: appBackend, Stateful: true}},
		Configure: func(cfg *config.Config) {
			cfg.Servers = []config.Server{{Name: "nopages", Backends: []string{"weather"},
				Resources: config.ItemFilter{Exclude: []string{"ui://*"}}}}
		},
	})
	ctx := t.Context()
	pages := map[string]string{"weather_forecast_chart": "ui://weather/forecast/app.html", "maps_forecast_chart": "ui://maps/forecast/app.html"}
	for _, era := range []string{harness.Modern, harness.Legacy} {
		cs := harness.Connect(t, c.MCPURL, era)
		if _, ok := cs.InitializeResult().Capabilities.Extensions[uiExtension]; !ok {
			t.Errorf("era %q: capabilities %+v lack %s", era, cs.InitializeResult().Capabilities, uiExtension)
		}
		for tool, err := range cs.Tools(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			if want, ok := pages[tool.Name]; ok && toolUI(tool.Meta) != want {
				t.Errorf("era %q: %s names page %q, want %q", era, tool.Name, toolUI(tool.Meta), want)
			}
		}
		for tool, page := range pages {
			read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: page})
			if err != nil {
				t.Fatalf("era %q: read %s: %v", era, page, err)
			}
			got := read.Contents[0]
			csp, _ := got.Meta["ui"].(map[string]any)["csp"].(map[string]any)
			if got.URI != page || got.MIMEType != "text/html;profile=mcp-app" || !strings.Contains(got.Text, "<title>Forecast</title>") || csp == nil {
				t.Errorf("era %q: read %s = uri %q, type %q, csp %v", era, page, got.URI, got.MIMEType, csp)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"city": "Lisbon"}})
			if err != nil || res.IsError {
				t.Fatalf("era %q: call %s: %v %v", era, tool, res, err)
			}
			if sc, _ := res.StructuredContent.(map[string]any); sc["city"] != "Lisbon" || len(sc["days"].([]any)) != 5 {
				t.Errorf("era %q: %s answered %v", era, tool, res.StructuredContent)
			}
		}
		if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "ui://forecast/app.html"}); err == nil {
			t.Errorf("era %q: the backends' own page URI was readable", era)
		}

		raw := harness.Connect(t, strings.TrimSuffix(c.MCPURL, "/mcp")+"/mcp/raw", era)
		for tool, err := range raw.Tools(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			if want, ok := pages[tool.Name]; ok && toolUI(tool.Meta) != want {
				t.Errorf("era %q: /mcp/raw: %s names page %q, want %q", era, tool.Name, toolUI(tool.Meta), want)
			}
		}

		// A server whose filter leaves pages out: the tool is listed
		// without its page, and the page is not read.
		filtered := harness.Connect(t, strings.TrimSuffix(c.MCPURL, "/mcp")+"/mcp/nopages", era)
		for tool, err := range filtered.Tools(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			if tool.Name == "weather_forecast_chart" && toolUI(tool.Meta) != "" {
				t.Errorf("era %q: /mcp/nopages lists the page %q", era, toolUI(tool.Meta))
			}
		}
		if _, err := filtered.ReadResource(ctx, &mcp.ReadResourceParams{URI: pages["weather_forecast_chart"]}); err == nil {
			t.Errorf("era %q: /mcp/nopages read a filtered page", era)
		}
	}

	// find_tool: the hit names the page as tools/list does.
	optimized := harness.Connect(t, strings.TrimSuffix(c.MCPURL, "/mcp")+"/mcp/optimized", harness.Modern)
	testkit.Eventually(t, "find_tool finds the chart with its page", 60*time.Second, func() error {
		res, err := optimized.CallTool(ctx, &mcp.CallToolParams{Name: "find_tool", Arguments: map[string]any{"tool_description": "chart of highs and lows for a city"}})
		if err != nil || res.IsError {
			return fmt.Errorf("find_tool: %v %v", res, err)
		}
		found, _ := res.StructuredContent.(map[string]any)
		hits, _ := found["tools"].([]any)
		for _, h := range hits {
			hit := h.(map[string]any)
			meta, _ := hit["_meta"].(map[string]any)
			if want, ok := pages[hit["name"].(string)]; ok && toolUI(meta) == want {
				return nil
			}
		}
		return fmt.Errorf("no hit names its page: %v", hits)
	})

	// The app, rendered from that hit, calls its tool by name through its
	// host, at the server it came from: the optimizer view serves it as
	// the raw view does (it lists only its meta-tools), and a name no
	// view has answers as there.
	for _, era := range []string{harness.Modern, harness.Legacy} {
		app := harness.Connect(t, strings.TrimSuffix(c.MCPURL, "/mcp")+"/mcp/optimized", era)
		res, err := app.CallTool(ctx, &mcp.CallToolParams{Name: "weather_forecast_chart", Arguments: map[string]any{"city": "Oslo"}})
		if err != nil || res.IsError || !strings.Contains(text(res), `"tool":"forecast_chart"`) {
			t.Errorf("era %q: the app's call of its tool at /mcp/optimized: %v, %v", era, text(res), err)
		}
		_, rawErr := harness.Connect(t, c.MCPURL, era).CallTool(ctx, &mcp.CallToolParams{Name: "weather_nope"})
		_, optErr := app.CallTool(ctx, &mcp.CallToolParams{Name: "weather_nope"})
		if rawErr == nil || optErr == nil || rawErr.Error() != optErr.Error() {
			t.Errorf("era %q: an unknown tool answers %v in the raw view and %v in the optimizer's; want one error", era, rawErr, optErr)
		}
	}
}

// hostPage is a minimal MCP Apps host (SEP-1865) for the test: it renders
// the app's page in a sandboxed iframe under the CSP the page's metadata
// declares, answers ui/initialize with the tool that opened it, hands it
// that call's result, relays its tools/call to /call (which calls the
// gateway) and shows its log messages in #log.
var hostPage = template.Must(template.New("host").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Test host</title></head>
<body>
<h1>Test host</h1>
<iframe id="app" title="MCP App" sandbox="allow-scripts" style="width:460px;height:320px;border:1px solid #888"></iframe>
<pre id="log"></pre>
<script>
"use strict";
const tool = {{.Tool}}, result = {{.Result}}, args = {{.Arguments}};
const frame = document.getElementById("app");
const log = (line) => { document.getElementById("log").textContent += line + "\n"; };
const send = (m) => frame.contentWindow.postMessage(Object.assign({jsonrpc: "2.0"}, m), "*");
window.addEventListener("message", async (event) => {
  if (event.source !== frame.contentWindow) return;
  const m = event.data;
  switch (m.method) {
  case "ui/initialize":
    send({id: m.id, result: {protocolVersion: "2026-01-26", hostInfo: {name: "test-host", version: "1"},
      hostCapabilities: {serverTools: {}, logging: {}}, hostContext: {toolInfo: {tool}}}});
    break;
  case "ui/notifications/initialized":
    send({method: "ui/notifications/tool-input", params: {arguments: args}});
    send({method: "ui/notifications/tool-result", params: result});
    break;
  case "tools/call": {
    log("app calls " + m.params.name);
    const resp = await fetch("/call", {method: "POST", body: JSON.stringify(m.params)});
    const body = await resp.json();
    send(resp.ok ? {id: m.id, result: body} : {id: m.id, error: {code: -32603, message: body.error}});
    break;
  }
  case "notifications/message":
    log(String(m.params.data));
    break;
  }
});
frame.srcdoc = {{.Page}};
</script>
</body></html>`))

// cspOf is the Content-Security-Policy a host builds from a page's
// _meta.ui.csp: the extension's restrictive default, widened only by the
// domains the page declares.
func cspOf(meta mcp.Meta) string {
	csp, _ := meta["ui"].(map[string]any)["csp"].(map[string]any)
	connect := "'none'"
	if d, _ := csp["connectDomains"].([]any); len(d) > 0 {
		parts := make([]string, len(d))
		for i, v := range d {
			parts[i] = fmt.Sprint(v)
		}
		connect = strings.Join(parts, " ")
	}
	return "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; media-src data:; connect-src " + connect + "; frame-src 'none'; object-src 'none'; base-uri 'self'"
}

// TestAppRendersInChromium: the demo's app, read through the gateway, is
// rendered by a minimal host in headless Chromium. It draws the result of
// the call that opened it, and a city typed into it becomes a tools/call
// that the host relays to the gateway like any call; its answer is drawn
// too. Screenshots are kept as the run's artefacts.
func TestAppRendersInChromium(t *testing.T) {
	c := harness.Start(t, harness.Options{NoIndexer: true, Backends: []harness.Backend{{Name: "weather", Spec: appBackend}}})
	ctx := t.Context()
	cs := harness.Connect(t, c.MCPURL, harness.Modern)
	var chart *mcp.Tool
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if tool.Name == "weather_forecast_chart" {
			chart = tool
		}
	}
	if chart == nil || toolUI(chart.Meta) == "" {
		t.Fatalf("no forecast chart with a page: %+v", chart)
	}
	read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: toolUI(chart.Meta)})
	if err != nil {
		t.Fatal(err)
	}
	page := read.Contents[0]
	args := map[string]any{"city": "Lisbon"}
	first, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: chart.Name, Arguments: args})
	if err != nil || first.IsError {
		t.Fatalf("first call: %v %v", first, err)
	}

	csp := `<meta http-equiv="Content-Security-Policy" content="` + template.HTMLEscapeString(cspOf(page.Meta)) + `">`
	data := map[string]any{"Tool": chart, "Result": first, "Arguments": args,
		"Page": strings.Replace(page.Text, "<head>", "<head>"+csp, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		if err := hostPage.Execute(w, data); err != nil {
			t.Error(err)
		}
	})
	mux.HandleFunc("POST /call", func(w http.ResponseWriter, r *http.Request) {
		var p mcp.CallToolParams
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&p); err != nil {
			http.Error(w, `{"error":"bad call"}`, http.StatusBadRequest)
			return
		}
		res, err := cs.CallTool(r.Context(), &p)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		_ = json.NewEncoder(w).Encode(res)
	})
	host := httptest.NewServer(mux)
	t.Cleanup(host.Close)

	b := browser.New(t)
	b.Navigate(host.URL + "/")
	b.WaitText("#log", "rendered 5 days for Lisbon")
	b.Screenshot("app-lisbon")

	// Into the app's city field, as a keyboard user gets there; typing
	// waits until the focus is inside the app's frame (keys sent while it
	// moves across frames are lost).
	b.Press("\t")
	b.WaitFor("the focus inside the app", `document.activeElement === document.getElementById("app")`)
	b.Type("Oslo\r")
	b.WaitText("#log", "app calls weather_forecast_chart")
	b.WaitText("#log", "rendered 5 days for Oslo")
	b.Screenshot("app-oslo")
	if n := c.Calls(t, "weather")["tools/call forecast_chart"]; n != 2 {
		t.Errorf("the backend answered %d forecast calls, want 2 (the host's and the app's)", n)
	}
}
