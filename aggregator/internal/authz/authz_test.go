package authz

import (
	"os"
	"path/filepath"
	"testing"
)

const policies = `
// eng may use everything of backend "eng-tools".
permit (principal in Group::"eng", action, resource in Backend::"eng-tools");
// sales may call one tool of "crm", and read its resources.
permit (principal in Group::"sales", action == Action::"call_tool", resource == Tool::"crm_lookup");
permit (principal in Group::"sales", action == Action::"read_resource", resource in Backend::"crm");
// nobody may call the dangerous tool, whatever else allows it.
forbid (principal, action == Action::"call_tool", resource == Tool::"eng-tools_drop_db");
`

func TestDecisions(t *testing.T) {
	a, err := Parse("test.cedar", []byte(policies))
	if err != nil {
		t.Fatal(err)
	}
	alice := Principal{Subject: "alice", Groups: []string{"eng"}}
	bob := Principal{Subject: "bob", Groups: []string{"sales"}}
	cases := []struct {
		who                    Principal
		action, typ, id, owner string
		want                   bool
	}{
		{alice, ActionCallTool, TypeTool, "eng-tools_build", "eng-tools", true},
		{alice, ActionGetPrompt, TypePrompt, "eng-tools_review", "eng-tools", true},
		{alice, ActionCallTool, TypeTool, "eng-tools_drop_db", "eng-tools", false},
		{alice, ActionCallTool, TypeTool, "crm_lookup", "crm", false},
		{bob, ActionCallTool, TypeTool, "crm_lookup", "crm", true},
		{bob, ActionCallTool, TypeTool, "crm_update", "crm", false},
		{bob, ActionReadResource, TypeResource, "crm://accounts/1", "crm", true},
		{bob, ActionCallTool, TypeTool, "eng-tools_build", "eng-tools", false},
		{Principal{}, ActionCallTool, TypeTool, "crm_lookup", "crm", false},
	}
	for _, c := range cases {
		if got := a.Allowed(c.who, c.action, c.typ, c.id, c.owner, ""); got != c.want {
			t.Errorf("%s %s %s::%q in %s = %v, want %v", c.who.Subject, c.action, c.typ, c.id, c.owner, got, c.want)
		}
	}
}

// A virtual server is the parent of its backends: a policy can say who
// may use a server, and that holds only through the server.
func TestServerEntity(t *testing.T) {
	a, err := Parse("servers.cedar", []byte(`
permit (principal in Group::"support", action, resource in Server::"support");
permit (principal in Group::"eng", action, resource in Backend::"tickets");
forbid (principal, action == Action::"call_tool", resource in Server::"support") when { resource == Tool::"tickets_delete" };
`))
	if err != nil {
		t.Fatal(err)
	}
	sue := Principal{Subject: "sue", Groups: []string{"support"}}
	eve := Principal{Subject: "eve", Groups: []string{"eng"}}
	cases := []struct {
		who        Principal
		id, server string
		want       bool
	}{
		{sue, "tickets_get", "support", true},
		{sue, "tickets_get", "", false},      // not through the plain /mcp
		{sue, "tickets_get", "other", false}, // nor through another server
		{sue, "tickets_delete", "support", false},
		{eve, "tickets_get", "support", true}, // a backend policy holds in every server
		{eve, "tickets_delete", "support", false},
		{eve, "tickets_delete", "", true},
	}
	for _, c := range cases {
		if got := a.Allowed(c.who, ActionCallTool, TypeTool, c.id, "tickets", c.server); got != c.want {
			t.Errorf("%s call %q through server %q = %v, want %v", c.who.Subject, c.id, c.server, got, c.want)
		}
	}
}

func TestNoPolicyAllowsAll(t *testing.T) {
	a, err := Load("")
	if err != nil || a != nil {
		t.Fatalf("Load(\"\") = %v, %v", a, err)
	}
	if !a.Allowed(Principal{}, ActionCallTool, TypeTool, "x", "y", "") {
		t.Fatal("no policy denied a call")
	}
}

func TestUnparsablePolicyIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.cedar")
	if err := os.WriteFile(path, []byte(`permit (principal ==, action, resource);`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil {
		t.Fatal("an unparsable policy file was accepted")
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.cedar")); err == nil {
		t.Fatal("a missing policy file was accepted")
	}
}

// Two authorizers parsed from the same source are the same policy, so a
// reload that reads an unchanged file again republishes nothing.
func TestSame(t *testing.T) {
	src := []byte(`permit (principal, action, resource);`)
	a, err := Parse("a", src)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Parse("b", src)
	c, _ := Parse("c", []byte(`forbid (principal, action, resource);`))
	if !Same(a, b) || Same(a, c) || Same(a, nil) || !Same(nil, nil) {
		t.Fatal("Same does not compare sources")
	}
}
