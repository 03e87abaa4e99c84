package catalog

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func tools(names ...string) []*mcp.Tool {
	out := make([]*mcp.Tool, len(names))
	for i, n := range names {
		out[i] = &mcp.Tool{Name: n, Description: "does " + n, InputSchema: map[string]any{"type": "object"}}
	}
	return out
}

// mustNaming is the naming of c as the aggregator loads it: with its
// defaults, validated.
func mustNaming(t testing.TB, c config.ConflictResolution) *Naming {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return NewNaming(c.WithDefaults())
}

func toolNames(s *Snapshot) []string {
	var out []string
	for _, t := range s.Tools {
		out = append(out, t.Backend+":"+t.Original+"=>"+t.Key)
	}
	return out
}

func TestPrefixNamesEveryTool(t *testing.T) {
	s := Build(mustNaming(t, config.ConflictResolution{}), map[string]*backend.Lists{
		"github": {Tools: tools("create_issue", "list_repos")},
		"jira":   {Tools: tools("create_issue")},
	}, nil, quiet)
	want := []string{"github:create_issue=>github_create_issue", "github:list_repos=>github_list_repos", "jira:create_issue=>jira_create_issue"}
	if got := toolNames(s); !slices.Equal(got, want) {
		t.Fatalf("tools %v, want %v", got, want)
	}
	if it, ok := s.Tool("jira_create_issue"); !ok || it.Backend != "jira" || it.Original != "create_issue" || it.Msg.GetDefinitionJson() == "" ||
		!strings.Contains(it.Msg.GetDefinitionJson(), `"name":"jira_create_issue"`) {
		t.Fatalf("lookup of jira_create_issue: %+v", it)
	}
}

func TestPrefixFormatIsConfigurable(t *testing.T) {
	n := mustNaming(t, config.ConflictResolution{Strategy: "prefix", PrefixFormat: "{backend}."})
	if got := n.ToolName("gh", "x"); got != "gh.x" {
		t.Fatalf("ToolName = %q", got)
	}
}

func TestPrefixAmbiguousCompositionDropsAllClaimants(t *testing.T) {
	s := Build(mustNaming(t, config.ConflictResolution{}), map[string]*backend.Lists{
		"b1":   {Tools: tools("x_y", "ok")},
		"b1_x": {Tools: tools("y")},
	}, nil, quiet)
	if got, want := toolNames(s), []string{"b1:ok=>b1_ok"}; !slices.Equal(got, want) {
		t.Fatalf("tools %v, want %v", got, want)
	}
	if len(s.Conflicts) != 1 || s.Conflicts[0].Name != "b1_x_y" || s.Conflicts[0].Winner != "" {
		t.Fatalf("conflicts %v", s.Conflicts)
	}
}

func TestPriorityWinsConflictsAndKeepsBareNames(t *testing.T) {
	n := mustNaming(t, config.ConflictResolution{Strategy: "priority", PriorityOrder: []string{"zeta", "alpha"}})
	s := Build(n, map[string]*backend.Lists{
		"alpha": {Tools: tools("create_issue", "only_alpha", "shared")},
		"zeta":  {Tools: tools("create_issue")},
		"mid":   {Tools: tools("shared", "solo")},
		"aaa":   {Tools: tools("solo")},
	}, nil, quiet)
	want := []string{
		"zeta:create_issue=>create_issue", // zeta ranks first
		"alpha:only_alpha=>only_alpha",
		"alpha:shared=>shared", // listed beats unlisted
		"aaa:solo=>solo",       // two unlisted: first in name order
	}
	if got := toolNames(s); !slices.Equal(got, want) {
		t.Fatalf("tools %v, want %v", got, want)
	}
}

func TestManualReportsEveryUnresolvedConflict(t *testing.T) {
	lists := map[string]*backend.Lists{
		"a": {Tools: tools("create", "delete", "mine")},
		"b": {Tools: tools("create", "delete")},
		"c": {Tools: tools("create")},
	}
	s := Build(mustNaming(t, config.ConflictResolution{Strategy: "manual"}), lists, nil, quiet)
	var unresolved []string
	for _, c := range s.Conflicts {
		if c.Winner == "" {
			unresolved = append(unresolved, c.String())
		}
	}
	want := []string{`tools "create" claimed by backends a, b, c (all dropped)`, `tools "delete" claimed by backends a, b (all dropped)`}
	if !slices.Equal(unresolved, want) {
		t.Fatalf("unresolved %v, want %v", unresolved, want)
	}
	if got := toolNames(s); !slices.Equal(got, []string{"a:mine=>mine"}) {
		t.Fatalf("tools %v", got)
	}

	resolved := Build(mustNaming(t, config.ConflictResolution{Strategy: "manual", Overrides: map[string]string{
		"a.create": "a_create", "b.create": "b_create", "c.create": "c_create", "b.delete": "b_delete",
	}}), lists, nil, quiet)
	if len(resolved.Conflicts) != 0 {
		t.Fatalf("conflicts left after overrides: %v", resolved.Conflicts)
	}
	want = []string{"a:create=>a_create", "b:create=>b_create", "b:delete=>b_delete", "c:create=>c_create", "a:delete=>delete", "a:mine=>mine"}
	if got := toolNames(resolved); !slices.Equal(got, want) {
		t.Fatalf("tools %v, want %v", got, want)
	}
}

func TestAdvertisedNameIsPureFunction(t *testing.T) {
	for _, c := range []config.ConflictResolution{{}, {Strategy: "priority", PriorityOrder: []string{"x"}}, {Strategy: "manual", Overrides: map[string]string{"a.t": "renamed"}}} {
		n := mustNaming(t, c)
		alone := Build(n, map[string]*backend.Lists{"a": {Tools: tools("t", "u")}}, nil, quiet)
		crowded := Build(n, map[string]*backend.Lists{"a": {Tools: tools("t", "u")}, "x": {Tools: tools("v")}, "y": {Tools: tools("w")}}, nil, quiet)
		for _, it := range alone.Tools {
			other, ok := crowded.Tool(it.Key)
			if !ok || other.Backend != "a" || other.Original != it.Original {
				t.Fatalf("%s: %s changed owner or name when other backends joined", n.Strategy(), it.Key)
			}
		}
	}
}

// fixture is a mixed corpus: conflicting tools, prompts, duplicate URIs.
func fixture() map[string]*backend.Lists {
	m := map[string]*backend.Lists{}
	for b := range 12 {
		name := fmt.Sprintf("backend-%02d", b)
		l := &backend.Lists{Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}}
		for i := range 40 {
			l.Tools = append(l.Tools, &mcp.Tool{Name: fmt.Sprintf("tool_%02d", (i*7+b)%50), InputSchema: map[string]any{"type": "object"}})
		}
		for i := range 5 {
			l.Resources = append(l.Resources, &mcp.Resource{URI: fmt.Sprintf("mem://r/%d", (i+b)%8), Name: name})
			l.Prompts = append(l.Prompts, &mcp.Prompt{Name: fmt.Sprintf("p%d", i)})
			l.ResourceTemplates = append(l.ResourceTemplates, &mcp.ResourceTemplate{URITemplate: fmt.Sprintf("mem://t/%d/{id}", (i+b)%6), Name: name})
		}
		m[name] = l
	}
	return m
}

func TestSnapshotIndependentOfFanOutOrder(t *testing.T) {
	base := fixture()
	names := sortedNames(base)
	for _, strategy := range []config.ConflictResolution{{}, {Strategy: "priority", PriorityOrder: []string{"backend-07", "backend-03"}}, {Strategy: "manual"}} {
		n := mustNaming(t, strategy)
		want := Build(n, base, map[string]bool{"backend-05": true}, quiet)
		for range 100 {
			order := slices.Clone(names)
			rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			// Lists arrive in a random order, as parallel fan-out delivers them.
			shuffled := map[string]*backend.Lists{}
			for _, b := range order {
				shuffled[b] = base[b]
			}
			got := Build(n, shuffled, map[string]bool{"backend-05": true}, quiet)
			if !got.SameContent(want) || !slices.Equal(toolNames(got), toolNames(want)) || fmt.Sprint(got.Conflicts) != fmt.Sprint(want.Conflicts) {
				t.Fatalf("%s: snapshot differs for order %v", n.Strategy(), order)
			}
		}
	}
}

func TestSnapshotSortedAndDigestTracksContent(t *testing.T) {
	n := mustNaming(t, config.ConflictResolution{})
	s := Build(n, fixture(), nil, quiet)
	for _, k := range Kinds {
		for i := 1; i < s.Len(k); i++ {
			a, _ := s.itemMeta(k, i-1)
			b, _ := s.itemMeta(k, i)
			if a >= b {
				t.Fatalf("%s not strictly sorted at %d: %q, %q", k, i, a, b)
			}
		}
	}
	changed := fixture()
	changed["backend-00"].Tools[0].Description = "new description"
	if Build(n, changed, nil, quiet).SameContent(s) {
		t.Fatal("a changed description kept the same digest")
	}
	if !Build(n, fixture(), nil, quiet).SameContent(s) {
		t.Fatal("identical content got a different digest")
	}
	if Build(n, fixture(), map[string]bool{"backend-00": true}, quiet).SameContent(s) {
		t.Fatal("a backend going down kept the same digest")
	}
}

func TestTemplateMatchingRFC6570(t *testing.T) {
	s := Build(mustNaming(t, config.ConflictResolution{}), map[string]*backend.Lists{
		"files": {ResourceTemplates: []*mcp.ResourceTemplate{{URITemplate: "file:///{dir}/{name}.txt"}}},
		"users": {ResourceTemplates: []*mcp.ResourceTemplate{{URITemplate: "users://{id}/profile"}}},
	}, nil, quiet)
	match := func(uri string) string {
		owner, _ := s.ResourceOwner(uri)
		return owner
	}
	for uri, want := range map[string]string{
		"users://42/profile":      "users",
		"file:///docs/readme.txt": "files",
		"users://42/settings":     "",
		"file:///docs/readme.md":  "",
	} {
		if got := match(uri); got != want {
			t.Errorf("%s matched %q, want %q", uri, got, want)
		}
	}
}

func TestBuilderReusesItemsOfUnchangedBackends(t *testing.T) {
	bd := NewBuilder(mustNaming(t, config.ConflictResolution{}), quiet)
	lists := fixture()
	first := bd.Build(lists, nil)
	again := bd.Build(lists, nil)
	if !again.SameContent(first) || again.Tools[0].Msg != first.Tools[0].Msg {
		t.Fatal("an unchanged build did not reuse its items")
	}

	changed := maps.Clone(lists)
	relisted := *lists["backend-03"]
	relisted.Tools = slices.Clone(relisted.Tools)
	tool := *relisted.Tools[0]
	tool.Description = "changed"
	relisted.Tools[0] = &tool
	changed["backend-03"] = &relisted
	next := bd.Build(changed, nil)
	if next.SameContent(first) {
		t.Fatal("a changed description kept the digest")
	}
	fresh := Build(mustNaming(t, config.ConflictResolution{}), changed, nil, quiet)
	if !next.SameContent(fresh) || !slices.Equal(toolNames(next), toolNames(fresh)) {
		t.Fatal("an incremental build differs from a build from scratch")
	}
	for i, it := range next.Tools {
		if it.Backend == "backend-05" && it.Msg != first.Tools[i].Msg {
			t.Fatalf("unchanged backend-05's %s was converted again", it.Key)
		}
		if it.Key == "backend-03_"+tool.Name && !strings.Contains(it.Msg.GetDefinitionJson(), "changed") {
			t.Fatalf("changed tool served stale: %s", it.Msg.GetDefinitionJson())
		}
	}
	// A backend that leaves takes its items with it.
	delete(changed, "backend-03")
	if gone := bd.Build(changed, nil); slices.ContainsFunc(gone.Tools, func(it Item[*aggregatorv1.Tool]) bool { return it.Backend == "backend-03" }) {
		t.Fatal("a removed backend's tools remain")
	}
}
