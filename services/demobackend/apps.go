package demobackend

import (
	_ "embed"
	"hash/fnv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

// MCP Apps (SEP-1865): a tool names an interactive page in
// _meta.ui.resourceUri (ToolSpec.UI), a ui:// resource of the backend's
// (ResourceSpec.App serves the forecast app below). A backend with such a
// tool advertises the extension.

// uiExtension names MCP Apps in capabilities.extensions.
const uiExtension = mcpspec.ExtensionUI

// appMIMEType is the MIME type of an MCP App's page.
const appMIMEType = "text/html;profile=mcp-app"

// forecastApp is the demo's app: it draws the result of a forecast tool
// and asks the host for another city's.
//
//go:embed app/forecast.html
var forecastApp string

// toolMeta is a tool's _meta: its app, if it has one.
func (t ToolSpec) toolMeta() mcp.Meta {
	if t.UI == "" {
		return nil
	}
	ui := map[string]any{"resourceUri": t.UI}
	if t.Visibility != nil {
		ui["visibility"] = t.Visibility
	}
	return mcp.Meta{"ui": ui}
}

// appResource is the resource of an app page: the forecast app, with the
// CSP of a page that loads and connects to nothing outside itself.
func appResource(r ResourceSpec) (*mcp.Resource, string) {
	meta := mcp.Meta{"ui": map[string]any{"csp": map[string]any{"connectDomains": []string{}, "resourceDomains": []string{}}, "prefersBorder": true}}
	return &mcp.Resource{URI: r.URI, Name: r.Name, Description: r.Description, MIMEType: appMIMEType, Meta: meta}, forecastApp
}

// forecast is the forecast behaviour's answer for city: five days of
// highs and lows, the same for the same city on every backend and run.
func forecast(answer map[string]any, city string) {
	h := fnv.New32a()
	h.Write([]byte(strings.ToLower(city)))
	seed := h.Sum32()
	days := make([]map[string]any, 5)
	for i, day := range []string{"Mon", "Tue", "Wed", "Thu", "Fri"} {
		high := 8 + int((seed>>(i*5))%20)
		days[i] = map[string]any{"day": day, "highC": high, "lowC": high - 4 - int((seed>>(i*3))%6)}
	}
	answer["city"], answer["days"] = city, days
}
