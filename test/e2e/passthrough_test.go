package e2e

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/test/harness"
	"github.com/switchboard-mcp/switchboard/test/mcpraw"
)

// vendorSpec lists one item of every kind; the demo backend adds the
// x-acme member, which go-sdk does not model, to each of them and to every
// tool result it returns.
const vendorSpec = `
tools:
  - {name: echo, description: Echo the arguments., behaviour: echo}
resources:
  - {uri: "{{name}}://readme", name: readme, mimeType: text/plain, text: "readme"}
resourceTemplates:
  - {uriTemplate: "{{name}}://items/{id}", name: item, text: "{uri}"}
prompts:
  - {name: greet, text: "Hello"}
extensions:
  x-acme: {tier: gold, n: [1, 2.5, null]}
`

// vendorMember is the member as the demo backend writes it.
const vendorMember = `"x-acme":{"n":[1,2.5,null],"tier":"gold"}`

// TestFieldsGoSDKDoesNotModelReachClients: through the real processes,
// members a backend adds to its listed tools, resources, templates and
// prompts and to its tool results reach Modern and Legacy clients intact,
// from a backend the aggregator speaks Modern to and from a Legacy-only
// one. The clients read the gateway's raw bytes: a go-sdk client would
// drop the members itself.
func TestFieldsGoSDKDoesNotModelReachClients(t *testing.T) {
	c := harness.Start(t, harness.Options{NoIndexer: true, Backends: []harness.Backend{
		{Name: "dual", Spec: strings.ReplaceAll(vendorSpec, "{{name}}", "dual")},
		{Name: "old", Spec: strings.ReplaceAll(vendorSpec, "{{name}}", "old"), Stateful: true},
	}})
	for _, era := range []string{"modern", "legacy"} {
		t.Run(era, func(t *testing.T) {
			cl := &mcpraw.Client{URL: c.MCPURL}
			if era == "legacy" {
				if err := cl.OpenSession(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			lists := []struct{ method, member, key string }{
				{"tools/list", "tools", "name"},
				{"resources/list", "resources", "uri"},
				{"resources/templates/list", "resourceTemplates", "uriTemplate"},
				{"prompts/list", "prompts", "name"},
			}
			for _, l := range lists {
				items := listAll(t, cl, l.method, l.member)
				if len(items) != 2 {
					t.Fatalf("%s: %d items, want one per backend: %s", l.method, len(items), items)
				}
				for _, item := range items {
					if !bytes.Contains(item, []byte(vendorMember)) {
						t.Errorf("%s: item lost the backend's x-acme member: %s", l.method, item)
					}
				}
			}
			for _, tool := range []string{"dual_echo", "old_echo"} {
				result := send(t, cl, "tools/call", tool, map[string]any{"name": tool, "arguments": map[string]any{"era": era}})
				if !bytes.Contains(result, []byte(vendorMember)) {
					t.Errorf("%s: result lost the backend's x-acme member: %s", tool, result)
				}
				if !bytes.Contains(result, []byte(`\"era\":\"`+era+`\"`)) && !bytes.Contains(result, []byte(`"era":"`+era+`"`)) {
					t.Errorf("%s: result does not echo the arguments: %s", tool, result)
				}
			}
		})
	}
}

// send sends one request and returns its result's bytes.
func send(t *testing.T, cl *mcpraw.Client, method, name string, params map[string]any) json.RawMessage {
	t.Helper()
	a, err := cl.Send(t.Context(), method, name, params)
	if err != nil || a.Error != nil {
		t.Fatalf("%s: %v %v", method, err, a.Error)
	}
	return a.Result
}

// listAll walks every page of a list and returns its items' bytes.
func listAll(t *testing.T, cl *mcpraw.Client, method, member string) []json.RawMessage {
	t.Helper()
	var all []json.RawMessage
	params := map[string]any{}
	for range 100 {
		var page map[string]json.RawMessage
		var items []json.RawMessage
		raw := send(t, cl, method, "", params)
		if err := json.Unmarshal(raw, &page); err != nil || json.Unmarshal(page[member], &items) != nil {
			t.Fatalf("%s: no %s: %s", method, member, raw)
		}
		all = append(all, items...)
		var cursor string
		if next, ok := page["nextCursor"]; ok {
			_ = json.Unmarshal(next, &cursor)
		}
		if cursor == "" {
			return all
		}
		params = map[string]any{"cursor": cursor}
	}
	t.Fatalf("%s never ends", method)
	return nil
}
