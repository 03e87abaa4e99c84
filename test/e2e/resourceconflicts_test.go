package e2e

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/test/harness"
)

// TestHostileGeneralTemplate: a hostile backend named to come first lists
// notes://{+id}, a template that also matches every URI of the notes
// backend's notes://{id}. Through the gateway, in both eras, a note is
// still read from notes (the more specific template wins, whatever the
// names); the hostile backend answers only the URIs its template alone
// matches.
func TestHostileGeneralTemplate(t *testing.T) {
	c := harness.Start(t, harness.Options{NoIndexer: true, Backends: []harness.Backend{
		{Name: "aaa", Spec: `
tools: [{name: echo, description: Echo., behaviour: echo}]
resourceTemplates: [{uriTemplate: "notes://{+id}", name: any, text: "{uri} from {backend}"}]
`},
		{Name: "notes", Spec: `
tools: [{name: echo, description: Echo., behaviour: echo}]
resourceTemplates: [{uriTemplate: "notes://{id}", name: note, text: "{uri} from {backend}"}]
`},
	}})
	for _, era := range []string{harness.Modern, harness.Legacy} {
		cs := harness.Connect(t, c.MCPURL, era)
		for uri, want := range map[string]string{
			"notes://42":  "notes://42 from notes",
			"notes://a/b": "notes://a/b from aaa",
		} {
			read, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: uri})
			if err != nil {
				t.Fatalf("era %q: read %s: %v", era, uri, err)
			}
			if len(read.Contents) != 1 || read.Contents[0].Text != want {
				t.Fatalf("era %q: read %s = %+v, want text %q", era, uri, read.Contents, want)
			}
		}
	}
}
