package catalog

import (
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/services/config"
)

func templates(uriTemplates ...string) []*mcp.ResourceTemplate {
	out := make([]*mcp.ResourceTemplate, len(uriTemplates))
	for i, u := range uriTemplates {
		out[i] = &mcp.ResourceTemplate{URITemplate: u, Name: u}
	}
	return out
}

func resources(uris ...string) []*mcp.Resource {
	out := make([]*mcp.Resource, len(uris))
	for i, u := range uris {
		out[i] = &mcp.Resource{URI: u, Name: u}
	}
	return out
}

// readOwner is the backend a read of uri goes to and the conflict the read
// reports ("" and nil for none).
func readOwner(s *Snapshot, uri string) (string, *Conflict) { return s.ResourceOwner(uri) }

// conflictOf is the conflict whose text names every one of keys, or nil.
func conflictOf(cs []Conflict, keys ...string) *Conflict {
	for i, c := range cs {
		if !slices.ContainsFunc(keys, func(k string) bool { return !strings.Contains(c.String(), `"`+k+`"`) }) {
			return &cs[i]
		}
	}
	return nil
}

var priorityZed = config.ConflictResolution{Strategy: "priority", PriorityOrder: []string{"zed"}}

// TestPriorityOwnsDuplicateURIs: a URI or a URI template two backends
// list goes to the backend priorityOrder ranks first, whatever the names;
// two unlisted backends tie, and a tie is not broken by names: neither
// gets it, and the conflict says so.
func TestPriorityOwnsDuplicateURIs(t *testing.T) {
	s := Build(mustNaming(t, priorityZed), map[string]*backend.Lists{
		"alpha": {Resources: resources("file:///shared", "x://tie"), ResourceTemplates: templates("t://{id}", "u://{id}")},
		"zed":   {Resources: resources("file:///shared"), ResourceTemplates: templates("t://{id}")},
		"beta":  {Resources: resources("x://tie"), ResourceTemplates: templates("u://{id}")},
	}, nil, quiet)
	if r, ok := s.Resource("file:///shared"); !ok || r.Backend != "zed" {
		t.Fatalf("file:///shared owned by %q, want zed", r.Owner())
	}
	if tm, ok := s.Template("t://{id}"); !ok || tm.Backend != "zed" {
		t.Fatalf("t://{id} owned by %q, want zed", tm.Owner())
	}
	if owner, _ := readOwner(s, "t://1"); owner != "zed" {
		t.Fatalf("t://1 read from %q, want zed", owner)
	}
	for _, key := range []string{"x://tie", "u://{id}"} {
		if _, ok := s.Resource(key); ok {
			t.Errorf("%s: a tie between unlisted backends was given to one", key)
		}
		if _, ok := s.Template(key); ok {
			t.Errorf("%s: a tie between unlisted backends was given to one", key)
		}
		if c := conflictOf(s.Conflicts, key); c == nil || c.Winner != "" || !slices.Equal(c.Backends, []string{"alpha", "beta"}) {
			t.Errorf("%s: conflict %+v, want alpha and beta, no winner", key, c)
		}
	}
	if owner, _ := readOwner(s, "u://1"); owner != "" {
		t.Fatalf("u://1 read from %q, want no backend", owner)
	}
	if c := conflictOf(s.Conflicts, "file:///shared"); c == nil || c.Winner != "zed" {
		t.Fatalf("file:///shared conflict %+v, want zed winning", c)
	}
}

// TestPrefixGivesDuplicateURIsToNoBackend: the prefix strategy cannot
// rename a URI, so a URI (or URI template) two backends list has no
// configured owner: neither lists or serves it, and the conflict is
// reported. A backend listing one URI twice keeps its first entry.
func TestPrefixGivesDuplicateURIsToNoBackend(t *testing.T) {
	for _, c := range []config.ConflictResolution{{}, {Strategy: "manual"}} {
		s := Build(mustNaming(t, c), map[string]*backend.Lists{
			"zed":   {Resources: []*mcp.Resource{{URI: "file:///shared", Name: "from-zed"}}, ResourceTemplates: templates("t://{id}")},
			"alpha": {Resources: []*mcp.Resource{{URI: "file:///shared", Name: "from-alpha"}, {URI: "file:///own", Name: "own"}, {URI: "file:///own", Name: "own-again"}}, ResourceTemplates: templates("t://{id}")},
		}, nil, quiet)
		if r, ok := s.Resource("file:///own"); len(s.Resources) != 1 || !ok || r.Msg.GetName() != "own" {
			t.Fatalf("%s: resources %+v", c.Strategy, s.Resources)
		}
		if len(s.Templates) != 0 {
			t.Fatalf("%s: templates %+v", c.Strategy, s.Templates)
		}
		for _, uri := range []string{"file:///shared", "t://1"} {
			if owner, _ := readOwner(s, uri); owner != "" {
				t.Errorf("%s: %s read from %q", c.Strategy, uri, owner)
			}
		}
		for _, key := range []string{"file:///shared", "t://{id}"} {
			if c := conflictOf(s.Conflicts, key); c == nil || c.Winner != "" {
				t.Errorf("%s: conflict %+v, want no winner", key, c)
			}
		}
	}
}

// TestMoreSpecificTemplateWins: of two backends' templates that both
// match a URI, the more specific one gets the read, whatever the backends'
// names: a simple expansion before a reserved one ({+id} also matches
// "/"), a longer literal prefix before a shorter one. A URI only the
// general template matches still goes to its backend. The overlap is
// reported, once per snapshot.
func TestMoreSpecificTemplateWins(t *testing.T) {
	lists := map[string]*backend.Lists{
		"aaa":   {ResourceTemplates: templates("notes://{+id}", "docs://{+path}")},
		"notes": {ResourceTemplates: templates("notes://{id}")},
		"docs":  {ResourceTemplates: templates("docs://manual/{page}")},
	}
	n := mustNaming(t, config.ConflictResolution{})
	s := Build(n, lists, nil, quiet)
	for uri, want := range map[string]string{
		"notes://42":          "notes",
		"notes://a/b":         "aaa",
		"docs://manual/intro": "docs",
		"docs://other/intro":  "aaa",
	} {
		if got, _ := readOwner(s, uri); got != want {
			t.Errorf("%s read from %q, want %q", uri, got, want)
		}
	}
	s = Build(n, lists, nil, quiet)
	_, c := readOwner(s, "notes://7")
	if c == nil || c.Winner != "notes" || !slices.Equal(c.Backends, []string{"notes", "aaa"}) ||
		c.String() != `resourceTemplates "notes://{id}" of backend notes overlaps "notes://{+id}" of backend aaa: notes wins where both match` {
		t.Fatalf("conflict %+v", c)
	}
	if _, again := readOwner(s, "notes://8"); again != nil {
		t.Fatalf("the same overlap reported twice: %v", again)
	}
	if _, c := readOwner(s, "docs://manual/x"); c == nil || c.Winner != "docs" {
		t.Fatalf("docs conflict %+v", c)
	}
}

// TestEquallySpecificTemplatesTie: two backends' templates equally
// specific, both matching a URI: with no priority to tell them apart the
// read goes to neither, and the conflict is reported; priorityOrder
// decides it. Overlaps within one backend are no conflict.
func TestEquallySpecificTemplatesTie(t *testing.T) {
	lists := map[string]*backend.Lists{
		"alpha": {ResourceTemplates: templates("x://{id}", "x://{id}/raw")},
		"zed":   {ResourceTemplates: templates("x://{name}", "y://{a}.{b}", "y://{c}")},
	}
	s := Build(mustNaming(t, config.ConflictResolution{}), lists, nil, quiet)
	owner, c := readOwner(s, "x://1")
	if owner != "" || c == nil || c.Winner != "" || !strings.HasSuffix(c.String(), ": neither wins where both match") {
		t.Fatalf("x://1 read from %q, conflict %+v", owner, c)
	}
	for uri, want := range map[string]string{"x://1/raw": "alpha", "y://p.q": "zed"} {
		if got, c := readOwner(s, uri); got != want || c != nil {
			t.Errorf("%s read from %q (conflict %v), want %q", uri, got, c, want)
		}
	}

	s = Build(mustNaming(t, priorityZed), lists, nil, quiet)
	if owner, _ := readOwner(s, "x://1"); owner != "zed" {
		t.Fatalf("under priority x://1 read from %q, want zed", owner)
	}
}

// TestPriorityBeatsSpecificity: priorityOrder decides between backends
// before specificity does, so a backend it ranks lower cannot take a
// better-ranked backend's URIs with a narrower template or a listed
// resource; such a resource is not listed, and reported.
func TestPriorityBeatsSpecificity(t *testing.T) {
	s := Build(mustNaming(t, config.ConflictResolution{Strategy: "priority", PriorityOrder: []string{"notes"}}), map[string]*backend.Lists{
		"notes": {ResourceTemplates: templates("notes://{+id}")},
		"aaa":   {Resources: resources("notes://42", "aaa://own"), ResourceTemplates: templates("notes://{id}")},
	}, nil, quiet)
	for uri, want := range map[string]string{"notes://42": "notes", "notes://7": "notes", "aaa://own": "aaa"} {
		if got, _ := readOwner(s, uri); got != want {
			t.Errorf("%s read from %q, want %q", uri, got, want)
		}
	}
	if _, ok := s.Resource("notes://42"); ok {
		t.Fatal("a resource a better-ranked backend's template claims is listed")
	}
	if c := conflictOf(s.Conflicts, "notes://42", "notes://{+id}"); c == nil || c.Winner != "notes" {
		t.Fatalf("conflicts %v", s.Conflicts)
	}
}

// TestListedResourceBeatsEqualTemplate: with no priority between them, a
// URI one backend lists is more specific than another's template matching
// it: the listing backend gets the read, and the overlap is reported.
func TestListedResourceBeatsEqualTemplate(t *testing.T) {
	s := Build(mustNaming(t, config.ConflictResolution{}), map[string]*backend.Lists{
		"aaa":   {Resources: resources("notes://42")},
		"notes": {ResourceTemplates: templates("notes://{id}")},
	}, nil, quiet)
	owner, c := readOwner(s, "notes://42")
	if owner != "aaa" || c == nil || c.Winner != "aaa" || !strings.Contains(c.String(), `"notes://{id}" of backend notes`) {
		t.Fatalf("notes://42 read from %q, conflict %v", owner, c)
	}
	if owner, c := readOwner(s, "notes://7"); owner != "notes" || c != nil {
		t.Fatalf("notes://7 read from %q, conflict %v", owner, c)
	}
}

// TestConflictTextBounded: a conflict's text quotes at most maxLoggedKey
// bytes of each key.
func TestConflictTextBounded(t *testing.T) {
	long := "x://" + strings.Repeat("a", 10000)
	s := Build(mustNaming(t, config.ConflictResolution{}), map[string]*backend.Lists{
		"a": {Resources: resources(long)}, "b": {Resources: resources(long)},
	}, nil, quiet)
	if len(s.Conflicts) != 1 || len(s.Conflicts[0].String()) > 2*maxLoggedKey {
		t.Fatalf("conflicts %d, text of %d bytes", len(s.Conflicts), len(s.Conflicts[0].String()))
	}
}
