package catalog

import (
	"strconv"
	"strings"
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

// TestDecisionCacheIsBounded: keys carry client input, so the cache holds
// no key over maxCachedKeyBytes and no more than maxCachedDecisionBytes of
// keys in all, and decisions stay right whatever was dropped.
func TestDecisionCacheIsBounded(t *testing.T) {
	s := Build(mustNaming(t, config.ConflictResolution{}), map[string]*backend.Lists{}, nil, quiet)
	calls := 0
	decide := func(v bool) func() bool { return func() bool { calls++; return v } }
	long := strings.Repeat("u", maxCachedKeyBytes+1)
	for range 3 {
		if !s.Decide(long, decide(true)) {
			t.Fatal("wrong decision for a long key")
		}
	}
	if calls != 3 {
		t.Fatalf("a key over %d bytes was cached (%d evaluations for 3 calls)", maxCachedKeyBytes, calls)
	}
	key := strings.Repeat("k", maxCachedKeyBytes-8)
	for i := range 2 * maxCachedDecisionBytes / maxCachedKeyBytes {
		s.Decide(key+strconv.Itoa(i), decide(i%2 == 0))
		if s.decisions.bytes > maxCachedDecisionBytes {
			t.Fatalf("cache holds %d bytes of keys, bound %d", s.decisions.bytes, maxCachedDecisionBytes)
		}
	}
	calls = 0
	if s.Decide("short", decide(false)) || s.Decide("short", decide(true)) || calls != 1 {
		t.Fatalf("a short key is not cached: %d evaluations", calls)
	}
}
