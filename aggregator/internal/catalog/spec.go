package catalog

import (
	"github.com/switchboard-mcp/switchboard/aggregator/internal/override"
	"github.com/switchboard-mcp/switchboard/services/config"
)

// Spec says what one catalog holds: the whole catalog (the zero Spec), or
// a virtual server's part of it (config.Server). Every catalog is built
// from the same backend listings, so servers share the backend
// connections.
type Spec struct {
	// Server is the virtual server's name; "" for the whole catalog.
	Server string
	// Backends are the backends whose items the catalog may hold; nil
	// holds every backend.
	Backends map[string]bool
	// Tools, Resources (resources and resource templates) and Prompts keep
	// the items whose advertised key they allow; the zero filter keeps
	// every item.
	Tools, Resources, Prompts config.ItemFilter
	// Overrides rewrite the catalog's tools (names before the naming rule,
	// definitions, call arguments, timeouts); nil rewrites nothing.
	Overrides *override.Set
}

// ServerSpec is the Spec of a configured virtual server, with its
// compiled overrides (the global ones and the server's on top).
func ServerSpec(s config.Server, overrides *override.Set) Spec {
	sp := Spec{Server: s.Name, Backends: map[string]bool{}, Tools: s.Tools, Resources: s.Resources, Prompts: s.Prompts, Overrides: overrides}
	for _, b := range s.Backends {
		sp.Backends[b] = true
	}
	return sp
}

// Keeps reports whether the snapshot's server shows the item of kind k
// named key (an advertised name, a URI or a URI template). Its lists hold
// only such items already; a URI read through a template is one no list
// holds, so the router asks here (the server's resources.exclude applies
// to it too).
func (s *Snapshot) Keeps(k Kind, key string) bool { return s.filters.keeps(k, key) }

// holds reports whether the catalog holds the backend's items.
func (sp *Spec) holds(backend string) bool { return sp.Backends == nil || sp.Backends[backend] }

// keeps reports whether the catalog keeps the item of kind k advertised
// under key. Filters apply to advertised keys, before names are claimed,
// so an item a server leaves out never wins or loses a name conflict
// there.
func (sp *Spec) keeps(k Kind, key string) bool {
	switch k {
	case KindTools:
		return sp.Tools.Allows(key)
	case KindPrompts:
		return sp.Prompts.Allows(key)
	default:
		return sp.Resources.Allows(key)
	}
}
