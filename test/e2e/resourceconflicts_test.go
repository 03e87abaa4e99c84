package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/config"
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

// TestDecodedPathDecisionIsItsBackends: a policy keeps the vault
// backend's resources from everyone. Reading files://x/pub/..%2Fsecret
// through the files backend's template also checks the path a decoding
// backend finds, files://x/secret, as the files backend's; that decision
// must not then open vault's own files://x/secret, which stays refused
// after it in both eras.
func TestDecodedPathDecisionIsItsBackends(t *testing.T) {
	policy := filepath.Join(t.TempDir(), "policy.cedar")
	if err := os.WriteFile(policy, []byte(`
permit (principal, action, resource);
forbid (principal, action == Action::"read_resource", resource in Backend::"vault");
`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := harness.Start(t, harness.Options{NoIndexer: true, Backends: []harness.Backend{
		{Name: "files", Spec: `
tools: [{name: echo, description: Echo., behaviour: echo}]
resourceTemplates: [{uriTemplate: "files://{+path}", name: any, text: "{uri} from {backend}"}]
`},
		{Name: "vault", Spec: `
tools: [{name: echo, description: Echo., behaviour: echo}]
resources: [{uri: "files://x/secret", name: secret, text: "secret of {backend}"}]
`},
	}, Configure: func(cfg *config.Config) { cfg.Aggregator.Authz.PolicyFile = policy }})
	for _, era := range []string{harness.Modern, harness.Legacy} {
		cs := harness.Connect(t, c.MCPURL, era)
		through := "files://x/pub/..%2Fsecret"
		read, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: through})
		if err != nil || len(read.Contents) != 1 || read.Contents[0].Text != through+" from files" {
			t.Fatalf("era %q: read %s = %+v, %v; want the files backend's text", era, through, read, err)
		}
		if read, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "files://x/secret"}); err == nil {
			t.Fatalf("era %q: read files://x/secret = %q; want it refused as vault's", era, read.Contents[0].Text)
		}
	}
}
