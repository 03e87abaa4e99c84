package catalog

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/services/config"
)

// TestDefinitionsAsListed: an item listed with its bytes is advertised
// byte for byte, members go-sdk does not model included, with only its
// name rewritten where the catalog renames; schemas are passed as listed.
func TestDefinitionsAsListed(t *testing.T) {
	rawTool := `{"name":"deploy", "x-vendor":{"k":[1,2.50]},"inputSchema":{"type":"object","properties":{"b":{},"a":{}}},"annotations":{"readOnlyHint":true,"x-hint":1}}`
	rawPrompt := `{"name":"greet","x-vendor":true}`
	rawResource := `{"uri":"file:///a","name":"a","x-vendor":"r"}`
	rawTemplate := `{"uriTemplate":"file:///{p}","name":"t","x-vendor":"t"}`
	lists := map[string]*backend.Lists{"ops": {
		Tools:             []*mcp.Tool{{Name: "deploy", InputSchema: map[string]any{"type": "object"}, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}},
		Prompts:           []*mcp.Prompt{{Name: "greet"}},
		Resources:         []*mcp.Resource{{URI: "file:///a", Name: "a"}},
		ResourceTemplates: []*mcp.ResourceTemplate{{URITemplate: "file:///{p}", Name: "t"}},
		Definitions: backend.Definitions{
			Tools: [][]byte{[]byte(rawTool)}, Prompts: [][]byte{[]byte(rawPrompt)},
			Resources: [][]byte{[]byte(rawResource)}, ResourceTemplates: [][]byte{[]byte(rawTemplate)},
		},
	}}
	s := Build(mustNaming(t, config.ConflictResolution{}), lists, nil, quiet)
	tool, ok := s.Tool("ops_deploy")
	if !ok {
		t.Fatal("ops_deploy missing")
	}
	if want := `{"name":"ops_deploy","x-vendor":{"k":[1,2.50]},"inputSchema":{"type":"object","properties":{"b":{},"a":{}}},"annotations":{"readOnlyHint":true,"x-hint":1}}`; tool.Msg.GetDefinitionJson() != want {
		t.Errorf("tool definition\n%s\nwant\n%s", tool.Msg.GetDefinitionJson(), want)
	}
	if got := tool.Msg.GetInputSchemaJson(); got != `{"type":"object","properties":{"b":{},"a":{}}}` {
		t.Errorf("input schema %s", got)
	}
	if got := tool.Msg.GetAnnotationsJson(); got != `{"readOnlyHint":true,"x-hint":1}` {
		t.Errorf("annotations %s", got)
	}
	if p, ok := s.Prompt("ops_greet"); !ok || p.Msg.GetDefinitionJson() != `{"name":"ops_greet","x-vendor":true}` {
		t.Errorf("prompt %+v", p)
	}
	if len(s.Resources) != 1 || s.Resources[0].Msg.GetDefinitionJson() != rawResource {
		t.Errorf("resources %+v", s.Resources)
	}
	if len(s.Templates) != 1 || s.Templates[0].Msg.GetDefinitionJson() != rawTemplate {
		t.Errorf("templates %+v", s.Templates)
	}
}
