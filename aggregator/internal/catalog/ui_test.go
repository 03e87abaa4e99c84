package catalog

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/services/config"
)

// appLists is a backend with an MCP App: a tool naming its page in
// _meta.ui (with members that must pass unchanged), a tool naming it the
// deprecated way, and the page listed as a resource with its CSP.
func appLists(page string) *backend.Lists {
	return listsFromJSON(`{
	  "tools": [
	    {"name":"show","inputSchema":{"type":"object"},
	     "_meta":{"ui":{"resourceUri":"` + page + `","visibility":["model","app"]},"other":1}},
	    {"name":"old","inputSchema":{"type":"object"},"_meta":{"ui/resourceUri":"` + page + `"}},
	    {"name":"plain","inputSchema":{"type":"object"}}
	  ],
	  "resources": [
	    {"uri":"` + page + `","name":"app","mimeType":"text/html;profile=mcp-app",
	     "_meta":{"ui":{"csp":{"connectDomains":["https://api.example.com"]},"prefersBorder":true}}},
	    {"uri":"notes://1","name":"note"}
	  ]
	}`)
}

func TestUIResourcesAreUniquePerBackend(t *testing.T) {
	s := Build(mustNaming(t, config.ConflictResolution{}), map[string]*backend.Lists{
		"a":     appLists("ui://app/index.html"),
		"b/c":   appLists("ui://app/index.html"),
		"other": appLists("UI://app/index.html"),
	}, nil, quiet)
	for backendName, page := range map[string]string{"a": "ui://a/app/index.html", "b/c": "ui://b%2Fc/app/index.html", "other": "ui://other/app/index.html"} {
		r, ok := s.Resource(page)
		if !ok || r.Backend != backendName || r.Msg.GetUri() != page || !strings.Contains(r.Msg.GetDefinitionJson(), `"uri":"`+page+`"`) {
			t.Fatalf("resource %s: %+v", page, r)
		}
		// CSP and the other metadata pass as listed.
		if !strings.Contains(r.Msg.GetDefinitionJson(), `"csp":{"connectDomains":["https://api.example.com"]},"prefersBorder":true`) {
			t.Errorf("resource metadata changed: %s", r.Msg.GetDefinitionJson())
		}
		if owner, _ := s.ResourceOwner(page); owner != backendName {
			t.Errorf("ResourceOwner(%s) = %q, want %q", page, owner, backendName)
		}
		if orig := BackendURI(backendName, page); !strings.EqualFold(orig, "ui://app/index.html") {
			t.Errorf("BackendURI(%s) = %q", page, orig)
		}
		prefix := strings.ReplaceAll(backendName, "/", "_") + "_"
		if backendName == "b/c" {
			prefix = "b/c_"
		}
		show, ok := s.Tool(prefix + "show")
		if !ok || show.UI != page {
			t.Fatalf("tool %sshow: %+v", prefix, show)
		}
		def := show.Msg.GetDefinitionJson()
		if !strings.Contains(def, `"ui":{"resourceUri":"`+page+`","visibility":["model","app"]},"other":1`) {
			t.Errorf("tool definition: %s", def)
		}
		if old, _ := s.Tool(prefix + "old"); old.UI != page || !strings.Contains(old.Msg.GetDefinitionJson(), `"ui/resourceUri":"`+page+`"`) {
			t.Errorf("deprecated member not rewritten: %s", old.Msg.GetDefinitionJson())
		}
		if plain, _ := s.Tool(prefix + "plain"); plain.UI != "" {
			t.Errorf("plain tool has UI %q", plain.UI)
		}
	}
	// Other URIs keep theirs, and one two backends list goes to neither.
	if _, ok := s.Resource("notes://1"); ok {
		t.Error("notes://1, listed by three backends, went to one")
	}
	if got := BackendURI("a", "notes://1"); got != "notes://1" {
		t.Errorf("BackendURI(notes://1) = %q", got)
	}
	// A backend's own URI is not readable as such.
	if owner, _ := s.ResourceOwner("ui://app/index.html"); owner != "" {
		t.Errorf("the backend's own URI routes to %q", owner)
	}
}

// A page the backend does not list belongs to the tools that name it; a
// server filter that hides the page strips it from its tools.
func TestUIOfUnlistedPagesAndFilters(t *testing.T) {
	l := listsFromJSON(`{"tools":[
	  {"name":"show","inputSchema":{"type":"object"},"_meta":{"ui":{"resourceUri":"ui://app/page"}}},
	  {"name":"also","inputSchema":{"type":"object"},"_meta":{"ui":{"resourceUri":"ui://app/page"}}}]}`)
	lists := map[string]*backend.Lists{"a": l}
	s := Build(mustNaming(t, config.ConflictResolution{}), lists, nil, quiet)
	if got := s.UIOnlyTools("ui://a/app/page"); len(got) != 2 || got[0] != "a_also" || got[1] != "a_show" {
		t.Fatalf("UIOnlyTools = %v", got)
	}
	if owner, _ := s.ResourceOwner("ui://a/app/page"); owner != "a" {
		t.Fatalf("unlisted page routes to %q", owner)
	}

	hidden := NewSpecBuilder(mustNaming(t, config.ConflictResolution{}), Spec{Server: "s",
		Resources: config.ItemFilter{Exclude: []string{"ui://*"}}}, quiet).Build(lists, nil)
	show, _ := hidden.Tool("a_show")
	if show.UI != "" || strings.Contains(show.Msg.GetDefinitionJson(), "resourceUri") {
		t.Fatalf("filtered page still named: %s", show.Msg.GetDefinitionJson())
	}
	if owner, _ := hidden.ResourceOwner("ui://a/app/page"); owner != "" {
		t.Fatalf("filtered page routes to %q", owner)
	}
	if hidden.UIOnlyTools("ui://a/app/page") != nil {
		t.Fatal("filtered page still has tools")
	}
}

// A principal who may not read a tool's page sees the tool without it,
// and a view digest of its own.
func TestViewStripsUnreadableUI(t *testing.T) {
	s := Build(mustNaming(t, config.ConflictResolution{}), map[string]*backend.Lists{"a": appLists("ui://app/index.html")}, nil, quiet)
	all := s.View("all", func(Kind, string, string) bool { return true })
	noPages := s.View("user:x", func(k Kind, key, _ string) bool { return k != KindResources || !strings.HasPrefix(key, "ui://") })
	if all.Digest(KindTools) == noPages.Digest(KindTools) {
		t.Error("views with and without pages share a digest")
	}
	for i, pos := range noPages.Items(KindTools) {
		full, stripped := all.Tool(all.Items(KindTools)[i]).GetDefinitionJson(), noPages.Tool(pos).GetDefinitionJson()
		if strings.Contains(stripped, "ui://") {
			t.Errorf("unreadable page still named: %s", stripped)
		}
		if strings.Contains(full, "visibility") && !strings.Contains(stripped, `"visibility":["model","app"]`) {
			t.Errorf("stripping took more than the page: %s", stripped)
		}
	}
}

// listsFromJSON is a backend's lists as it would list them: each item
// typed and kept as written.
func listsFromJSON(text string) *backend.Lists {
	var in struct {
		Tools, Resources []json.RawMessage
	}
	if err := json.Unmarshal([]byte(text), &in); err != nil {
		panic(err)
	}
	l := &backend.Lists{}
	for _, raw := range in.Tools {
		var t mcp.Tool
		if err := json.Unmarshal(raw, &t); err != nil {
			panic(err)
		}
		l.Tools = append(l.Tools, &t)
		l.Definitions.Tools = append(l.Definitions.Tools, raw)
	}
	for _, raw := range in.Resources {
		var r mcp.Resource
		if err := json.Unmarshal(raw, &r); err != nil {
			panic(err)
		}
		l.Resources = append(l.Resources, &r)
		l.Definitions.Resources = append(l.Definitions.Resources, raw)
	}
	return l
}
