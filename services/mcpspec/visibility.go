package mcpspec

import "github.com/switchboard-mcp/switchboard/services/rawjson"

// ModelVisible reports whether the tool whose definition this is may be
// shown to the model and called on its word: its MCP App visibility
// (_meta.ui.visibility) is absent, is not a list, or names "model". The
// MCP Apps extension has a host keep a tool of the app alone (["app"])
// out of the model's tools; where no host stands between the model and
// the tools (the optimizer's find_tool and call_tool, code mode) the
// gateway does so itself.
func ModelVisible(definition []byte) bool {
	meta, ok := rawjson.Get(definition, "_meta")
	if !ok {
		return true
	}
	ui, ok := rawjson.Get(meta, "ui")
	if !ok {
		return true
	}
	visibility, ok := rawjson.Get(ui, "visibility")
	if !ok {
		return true
	}
	model := false
	if !rawjson.Elements(visibility, func(v []byte) bool {
		s, _ := rawjson.StringValue(v)
		model = s == "model"
		return !model
	}) {
		return true // not a list
	}
	return model
}
