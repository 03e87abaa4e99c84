package catalog

import (
	"fmt"
	"maps"
	"sort"
	"strings"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// Conflict-resolution strategies.
const (
	StrategyPrefix   = config.StrategyPrefix
	StrategyPriority = config.StrategyPriority
	StrategyManual   = config.StrategyManual
)

// Naming decides advertised names. An advertised name depends only on the
// configuration, the backend's name and the original name, never on which
// other backends exist, so Cedar policies written against advertised names
// keep meaning the same thing as backends come and go.
type Naming struct {
	strategy     string
	prefixFormat string
	// rank orders backends under the priority strategy; unlisted backends
	// rank after every listed one.
	rank      map[string]int
	overrides map[string]string
}

// NewNaming makes the naming of a conflict-resolution section with its
// defaults (config.ConflictResolution.WithDefaults), validated
// (config.ValidateAggregator).
func NewNaming(c config.ConflictResolution) *Naming {
	n := &Naming{strategy: c.Strategy, prefixFormat: c.PrefixFormat, rank: map[string]int{}, overrides: map[string]string{}}
	switch n.strategy {
	case StrategyPriority:
		for i, b := range c.PriorityOrder {
			n.rank[b] = i
		}
	case StrategyManual:
		maps.Copy(n.overrides, c.Overrides)
	}
	return n
}

// Strategy is the configured strategy.
func (n *Naming) Strategy() string { return n.strategy }

// ToolName is the advertised name of a backend's tool.
func (n *Naming) ToolName(backend, original string) string {
	switch n.strategy {
	case StrategyPrefix:
		return n.prefix(backend) + original
	case StrategyManual:
		if v, ok := n.overrides[backend+"."+original]; ok {
			return v
		}
	}
	return original
}

// PromptName is the advertised name of a backend's prompt. Prompts are
// prefixed like tools under the prefix strategy; manual overrides name
// tools only.
func (n *Naming) PromptName(backend, original string) string {
	if n.strategy == StrategyPrefix {
		return n.prefix(backend) + original
	}
	return original
}

func (n *Naming) prefix(backend string) string {
	return strings.ReplaceAll(n.prefixFormat, "{backend}", backend)
}

// Conflict is an advertised name, a URI or a URI template claimed by more
// than one backend.
type Conflict struct {
	Kind     Kind
	Name     string
	Backends []string
	// Winner is the backend that got the name; empty when every claimant was
	// dropped.
	Winner string
	// Overlaps is, for a URI or template that others could match
	// (uris.go), the template of Backends[1] that overlaps Name, the
	// resource or template of Backends[0]; "" for one key claimed as such.
	Overlaps string
}

// Cut is c with its name and overlapping template cut to at most
// maxLoggedKey bytes each, as String quotes them.
func (c Conflict) Cut() Conflict {
	c.Name, c.Overlaps = cutKey(c.Name), cutKey(c.Overlaps)
	return c
}

// String describes the conflict for a log line: backends' names and at
// most maxLoggedKey bytes of each key, never a URI a client asked for.
func (c Conflict) String() string {
	if c.Overlaps != "" {
		s := fmt.Sprintf("%s %q of backend %s overlaps %q of backend %s: ", c.Kind, cutKey(c.Name), c.Backends[0], cutKey(c.Overlaps), c.Backends[1])
		if c.Winner == "" {
			return s + "neither wins where both match"
		}
		return s + c.Winner + " wins where both match"
	}
	s := fmt.Sprintf("%s %q claimed by backends %s", c.Kind, cutKey(c.Name), strings.Join(c.Backends, ", "))
	if c.Winner == "" {
		return s + " (all dropped)"
	}
	return s + " (" + c.Winner + " wins)"
}

// claim is one backend's bid for an advertised name.
type claim struct {
	backend string
	index   int // position in that backend's list
}

// resolve picks, for each advertised name claimed by several backends, the
// owner (or none). byName maps a name to claims in backend-name order.
//
//   - priority: the best-ranked backend wins; between tools or prompts of
//     equally ranked backends, the first in name order.
//   - Resources and templates (locators, never renamed) are ranked the same
//     way under every strategy (under prefix and manual every backend
//     ranks alike), but names never decide: a tie for the best rank drops
//     every claimant, so no backend is handed a URI the configuration did
//     not give it.
//   - Prompts under manual: the first backend in name order wins.
//   - prefix and manual tools: a name composed identically for two backends
//     (b1 + "x_y" and b1_x + "y") or renamed onto each other is ambiguous and
//     every claimant is dropped. Under manual it is also reported as
//     unresolved, which is a startup error.
func (n *Naming) resolve(kind Kind, name string, claims []claim) (winner int, conflict *Conflict) {
	if len(claims) == 1 {
		return 0, nil
	}
	c := &Conflict{Kind: kind, Name: name}
	for _, cl := range claims {
		c.Backends = append(c.Backends, cl.backend)
	}
	winner = -1
	locator := kind == KindResources || kind == KindResourceTemplates
	switch {
	case kind == KindPrompts && n.strategy == StrategyManual:
		winner = 0
	case n.strategy == StrategyPriority || locator:
		winner = 0
		tied := false
		for i, cl := range claims[1:] {
			switch r, best := n.rankOf(cl.backend), n.rankOf(claims[winner].backend); {
			case r < best:
				winner, tied = i+1, false
			case r == best:
				tied = true
			}
		}
		if tied && locator {
			winner = -1
		}
	}
	if winner >= 0 {
		c.Winner = claims[winner].backend
	}
	return winner, c
}

func (n *Naming) rankOf(backend string) int {
	if r, ok := n.rank[backend]; ok {
		return r
	}
	return len(n.rank)
}

// sortedNames returns a map's keys in byte order.
func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
