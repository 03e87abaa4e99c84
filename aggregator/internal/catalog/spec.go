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
	// uris is Resources with the literal parts of its patterns in
	// canonical form (CanonicalURI), as resources' URIs and templates are
	// matched.
	uris config.ItemFilter
	// Global are the whole catalog's overrides (aggregator.toolOverrides),
	// which name a tool in the whole catalog: the name the policy and the
	// rate limits know it by in every server (Snapshot.PolicyName). Unset
	// for the whole catalog itself, whose Overrides they are.
	Global *override.Set
}

// ServerSpec is the Spec of a configured virtual server, with its
// compiled overrides (the global ones and the server's on top) and the
// global ones alone.
func ServerSpec(s config.Server, overrides, global *override.Set) Spec {
	sp := Spec{Server: s.Name, Backends: map[string]bool{}, Tools: s.Tools, Resources: s.Resources, Prompts: s.Prompts, Overrides: overrides, Global: global}
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
// there. A resource's URI (and a template) is matched in its canonical
// form, against patterns in that form too: every spelling of a URI, the
// one listed and those read through a template, is kept or left out
// alike.
func (sp *Spec) keeps(k Kind, key string) bool {
	switch k {
	case KindTools:
		return sp.Tools.Allows(key)
	case KindPrompts:
		return sp.Prompts.Allows(key)
	default:
		// A resource or a template, each in canonical form: a template
		// matched as written was listed, and completed, under a pattern
		// that kept out every URI it reads. Most catalogs filter no
		// resource: their builds and reads need no canonical form.
		if len(sp.uris.Include) == 0 && len(sp.uris.Exclude) == 0 {
			return true
		}
		return sp.uris.Allows(CanonicalURI(key))
	}
}

// canonicalPatterns is f with each pattern in canonical form: CanonicalURI
// leaves the wildcards as they are.
func canonicalPatterns(f config.ItemFilter) config.ItemFilter {
	out := config.ItemFilter{}
	for _, p := range f.Include {
		out.Include = append(out.Include, CanonicalURI(p))
	}
	for _, p := range f.Exclude {
		out.Exclude = append(out.Exclude, CanonicalURI(p))
	}
	return out
}

// PolicyName is the name the authorization policy (Cedar's Tool::"...")
// and the rate limits (per and match tools) know the item of kind k
// listed under key by. For a tool it is its name in the whole catalog
// (/mcp): the naming rule over its backend and its name there after
// aggregator.toolOverrides, whatever a server's own overrides rename it
// to, so that a forbid or a limit written against that name holds
// through every server, and a server's rename is only what its clients
// see. Every other kind is known by its key (prompts are not renamed per
// server, URIs never are). An unknown key is its own name.
func (s *Snapshot) PolicyName(k Kind, key string) string {
	if k != KindTools || s.Server == "" {
		return key
	}
	it, ok := s.Tool(key)
	if !ok {
		return key
	}
	return s.naming.ToolName(it.Backend, s.global.Tool(it.Backend, it.Original).Name(it.Original))
}
