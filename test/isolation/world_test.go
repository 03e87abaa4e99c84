// Package isolation is a property test of identity isolation: random Cedar
// policies, principals and backends run through the real stack, and every
// listed page, find_tool hit and call is checked against an oracle that
// evaluates the same policy with cedar-go directly.
package isolation

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cedar-policy/cedar-go"

	"github.com/switchboard-mcp/switchboard/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

// Words that tool names and descriptions are made of, so find_tool
// queries have something to match.
var (
	verbs        = []string{"search", "create", "delete", "update", "list", "export", "archive", "send"}
	objects      = []string{"invoice", "ticket", "report", "customer", "document", "payment", "alert", "contract"}
	backendNames = []string{"alpha", "bravo", "charlie", "delta"}
	groupNames   = []string{"eng", "sales", "ops", "admins"}
)

// tool is one tool of the generated world, by advertised name (the
// cluster uses the prefix strategy "{backend}_").
type tool struct {
	backend, name, description string
}

func (t tool) advertised() string { return t.backend + "_" + t.name }

// principal is one API key's identity.
type principal struct {
	subject string
	groups  []string
}

func (p principal) key() string { return "key-" + p.subject }

// testCase is one policy and the principals it is checked for.
type testCase struct {
	policy     string
	principals []principal
}

// world is everything one seed generates.
type world struct {
	backends map[string][]tool // by backend name
	tools    []tool            // every tool, sorted by advertised name
	cases    []testCase
}

// probe is a principal every case permits everything, so a test can tell
// when a restarted aggregator serves its whole catalog.
var probe = principal{subject: "probe"}

const probePolicy = `permit (principal == User::"probe", action, resource);`

func generate(rng *rand.Rand, cases int) world {
	w := world{backends: map[string][]tool{}}
	names := slices.Clone(backendNames)
	rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	for _, b := range names[:3] {
		seen := map[string]bool{}
		for n := 2 + rng.IntN(5); len(w.backends[b]) < n; {
			verb, obj := verbs[rng.IntN(len(verbs))], objects[rng.IntN(len(objects))]
			name := verb + "_" + obj
			if seen[name] {
				continue
			}
			seen[name] = true
			t := tool{backend: b, name: name, description: fmt.Sprintf("%s %s records in the %s system", strings.ToUpper(verb[:1])+verb[1:], obj, b)}
			w.backends[b] = append(w.backends[b], t)
			w.tools = append(w.tools, t)
		}
	}
	slices.SortFunc(w.tools, func(a, b tool) int { return strings.Compare(a.advertised(), b.advertised()) })
	for i := range cases {
		var tc testCase
		for j := range 3 {
			p := principal{subject: fmt.Sprintf("case%d-user%d", i, j)}
			for _, g := range groupNames {
				if rng.IntN(3) == 0 {
					p.groups = append(p.groups, g)
				}
			}
			tc.principals = append(tc.principals, p)
		}
		var stmts []string
		for range 2 + rng.IntN(4) {
			stmts = append(stmts, w.statement(rng, tc.principals))
		}
		tc.policy = strings.Join(append(stmts, probePolicy), "\n") + "\n"
		tc.principals = append(tc.principals, probe)
		w.cases = append(w.cases, tc)
	}
	return w
}

// statement is one random permit or forbid.
func (w world) statement(rng *rand.Rand, ps []principal) string {
	effect := "permit"
	if rng.IntN(10) < 3 {
		effect = "forbid"
	}
	var scope []string
	switch rng.IntN(4) {
	case 0:
		scope = append(scope, "principal")
	case 1, 2:
		scope = append(scope, fmt.Sprintf("principal in Group::%q", groupNames[rng.IntN(len(groupNames))]))
	default:
		scope = append(scope, fmt.Sprintf("principal == User::%q", ps[rng.IntN(len(ps))].subject))
	}
	switch rng.IntN(5) {
	case 0:
		scope = append(scope, `action == Action::"read_resource"`) // never a tool: must change nothing
	case 1, 2:
		scope = append(scope, `action == Action::"call_tool"`)
	default:
		scope = append(scope, "action")
	}
	switch rng.IntN(6) {
	case 0:
		scope = append(scope, "resource")
	case 1, 2:
		scope = append(scope, fmt.Sprintf("resource in Backend::%q", backendNames[rng.IntN(len(backendNames))]))
	default:
		t := w.tools[rng.IntN(len(w.tools))]
		scope = append(scope, fmt.Sprintf("resource == Tool::%q", t.advertised()))
	}
	return fmt.Sprintf("%s (%s);", effect, strings.Join(scope, ", "))
}

// oracle decides with cedar-go directly, from the entity model of
// architecture.md: User in Group, Tool child of Backend, call_tool.
type oracle struct{ policies *cedar.PolicySet }

func newOracle(t *testing.T, policy string) oracle {
	ps, err := cedar.NewPolicySetFromBytes("case.cedar", []byte(policy))
	if err != nil {
		t.Fatalf("generated policy does not parse: %v\n%s", err, policy)
	}
	return oracle{ps}
}

func (o oracle) allowed(p principal, t tool) bool {
	user := cedar.NewEntityUID("User", cedar.String(p.subject))
	var groups []cedar.EntityUID
	for _, g := range p.groups {
		groups = append(groups, cedar.NewEntityUID("Group", cedar.String(g)))
	}
	res := cedar.NewEntityUID("Tool", cedar.String(t.advertised()))
	backend := cedar.NewEntityUID("Backend", cedar.String(t.backend))
	entities := cedar.EntityMap{
		user: {UID: user, Parents: cedar.NewEntityUIDSet(groups...)},
		res:  {UID: res, Parents: cedar.NewEntityUIDSet(backend)},
	}
	for _, g := range groups {
		entities[g] = cedar.Entity{UID: g}
	}
	entities[backend] = cedar.Entity{UID: backend}
	decision, _ := cedar.Authorize(o.policies, entities, cedar.Request{
		Principal: user,
		Action:    cedar.NewEntityUID("Action", cedar.String("call_tool")),
		Resource:  res,
		Context:   cedar.NewRecord(nil),
	})
	return decision == cedar.Allow
}

// view is the sorted advertised names p may call.
func (o oracle) view(w world, p principal) []string {
	var names []string
	for _, t := range w.tools {
		if o.allowed(p, t) {
			names = append(names, t.advertised())
		}
	}
	return names
}

// spec is a demo backend definition serving tools.
func spec(tools []tool) string {
	var b strings.Builder
	b.WriteString("tools:\n")
	for _, t := range tools {
		fmt.Fprintf(&b, "  - {name: %s, description: %q, behaviour: echo}\n", t.name, t.description)
	}
	return b.String()
}
