// Package catalog builds the aggregator's catalogs: an immutable, versioned
// snapshot of every backend's tools, resources, resource templates and
// prompts under their advertised names (names.go; tool overrides applied
// to the definitions), sorted byte-wise per kind, of the whole catalog or
// of a virtual server's part of it (Spec); the per-principal views of a
// snapshot; and keyset pages over a view.
package catalog

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"slices"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/override"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/paramheader"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
)

// Kind is one kind of catalog item.
type Kind int

// The four kinds, in the order their lists appear everywhere.
const (
	KindTools Kind = iota
	KindResources
	KindResourceTemplates
	KindPrompts
	numKinds
)

// Kinds lists every kind.
var Kinds = [numKinds]Kind{KindTools, KindResources, KindResourceTemplates, KindPrompts}

func (k Kind) String() string {
	return [...]string{"tools", "resources", "resourceTemplates", "prompts"}[k]
}

// API is the kind as the API's RPC and message names spell it.
func (k Kind) API() string {
	return [...]string{"Tools", "Resources", "ResourceTemplates", "Prompts"}[k]
}

// Item is one catalog entry of any kind.
type Item[M any] struct {
	// Key is the sort and lookup key: the advertised name of a tool or
	// prompt, the URI of a resource, the URI template of a template.
	Key     string
	Backend string
	// Original is the name on the backend (tools and prompts).
	Original string
	// Msg is the prebuilt API message; it is shared and must not be
	// modified.
	Msg M
	// ParamHeaders are a tool's x-mcp-header bindings, extracted from its
	// inputSchema once when the item is built, so checking and computing a
	// call's Mcp-Param-* headers is a walk over these only (tools only).
	// With an override they come from the backend's own schema: a hidden
	// argument's header is still the backend's to receive.
	ParamHeaders []paramheader.Binding
	// Override is the tool's override in this catalog (its call's
	// arguments and timeout); nil for none (tools only).
	Override *override.Tool
	// UI is the advertised ui:// URI of the tool's MCP App, "" for none;
	// noUI is Msg without it, for callers who may not read it (ui.go;
	// tools only).
	UI     string
	noUI   *aggregatorv1.Tool
	digest [sha256.Size]byte
}

// Snapshot is one immutable catalog. It holds the items of every backend
// that was ever listed successfully; items of backends that are down are
// kept for routing (so a call fails as unavailable rather than not found)
// but are left out of every view.
type Snapshot struct {
	// Server is the virtual server this catalog is ("" for the whole
	// catalog): part of its content, so two servers never share a version
	// or a view digest.
	Server string
	// Version names the snapshot's content: the first 8 bytes of its
	// digest, big-endian, never 0. Every replica that builds the same
	// catalog computes the same version, and a restart does not change
	// it; versions are compared for equality only, never ordered.
	Version   uint64
	Tools     []Item[*aggregatorv1.Tool]
	Resources []Item[*aggregatorv1.Resource]
	Templates []Item[*aggregatorv1.ResourceTemplate]
	Prompts   []Item[*aggregatorv1.Prompt]
	// Down holds the backends whose items are hidden (unhealthy).
	Down map[string]bool
	// Capabilities per backend, from its last listing.
	Capabilities map[string]*mcp.ServerCapabilities
	// Conflicts found while naming.
	Conflicts []Conflict
	// filters are the server's filters (Spec), for the items a listing
	// never held: see Keeps.
	filters Spec

	// naming ranks backends; matchers are the templates in the order a
	// read tries them, and reported the overlaps reads found (uris.go).
	naming *Naming
	// global are the whole catalog's tool overrides, for PolicyName.
	global   *override.Set
	matchers []matcher
	reported reportSet
	// ui holds the advertised ui:// URIs (ui.go).
	ui        map[string]*uiEntry
	uiPages   map[string]*uiEntry // by pageKey (ui.go)
	toolIdx   map[string]int
	resIdx    map[string]int
	tmplIdx   map[string]int
	promptIdx map[string]int
	digest    [sha256.Size]byte
	views     viewCache
	decisions decisionCache
}

// Digest identifies the snapshot's content.
func (s *Snapshot) Digest() string { return hex.EncodeToString(s.digest[:]) }

// Owner is the name of the item's backend; "" for no item, so that a
// lookup's result can be handed to an access check as it is.
func (it *Item[M]) Owner() string {
	if it == nil {
		return ""
	}
	return it.Backend
}

// SameContent reports whether two snapshots hold the same catalog.
func (s *Snapshot) SameContent(o *Snapshot) bool { return o != nil && s.digest == o.digest }

// Tool finds a tool by advertised name.
func (s *Snapshot) Tool(name string) (*Item[*aggregatorv1.Tool], bool) {
	i, ok := s.toolIdx[name]
	if !ok {
		return nil, false
	}
	return &s.Tools[i], true
}

// Prompt finds a prompt by advertised name.
func (s *Snapshot) Prompt(name string) (*Item[*aggregatorv1.Prompt], bool) {
	i, ok := s.promptIdx[name]
	if !ok {
		return nil, false
	}
	return &s.Prompts[i], true
}

// Resource finds a listed resource by the canonical form of its URI
// (CanonicalURI), which every spelling of it shares.
func (s *Snapshot) Resource(uri string) (*Item[*aggregatorv1.Resource], bool) {
	i, ok := s.resIdx[uri]
	if !ok {
		return nil, false
	}
	return &s.Resources[i], true
}

// Template finds a template by its exact URI template.
func (s *Snapshot) Template(uriTemplate string) (*Item[*aggregatorv1.ResourceTemplate], bool) {
	i, ok := s.tmplIdx[uriTemplate]
	if !ok {
		return nil, false
	}
	return &s.Templates[i], true
}

// Build makes a snapshot from each backend's lists. The result depends only
// on naming, the lists and down, never on the order lists were gathered in.
func Build(naming *Naming, lists map[string]*backend.Lists, down map[string]bool, log *slog.Logger) *Snapshot {
	return NewBuilder(naming, log).Build(lists, down)
}

// Builder builds snapshots one after another, reusing the API messages and
// digests of the items of every backend whose lists are the same (the same
// *backend.Lists) as in the previous build, so a change of one backend
// costs the conversion of that backend's items only. A Builder is not safe
// for concurrent use.
type Builder struct {
	naming *Naming
	spec   Spec
	log    *slog.Logger
	// seen is the lists each backend's cached items were made from.
	seen map[string]*backend.Lists
	// namedUI holds the UIs each backend's tools name (namedUIs), for
	// the lists in seen.
	namedUI   map[string][]string
	tools     itemCache[*aggregatorv1.Tool]
	prompts   itemCache[*aggregatorv1.Prompt]
	resources itemCache[*aggregatorv1.Resource]
	templates itemCache[*aggregatorv1.ResourceTemplate]
	// unmatched are the overrides the last build found no tool for.
	unmatched map[[2]string]bool
}

// itemCache holds built items by backend and advertised key.
type itemCache[M any] map[string]map[string]Item[M]

// NewBuilder returns a Builder of the whole catalog with an empty cache.
func NewBuilder(naming *Naming, log *slog.Logger) *Builder {
	return NewSpecBuilder(naming, Spec{}, log)
}

// NewSpecBuilder returns a Builder of the catalog spec says, with an empty
// cache.
func NewSpecBuilder(naming *Naming, spec Spec, log *slog.Logger) *Builder {
	spec.uris = canonicalPatterns(spec.Resources)
	return &Builder{naming: naming, spec: spec, log: log, seen: map[string]*backend.Lists{}, namedUI: map[string][]string{},
		tools: itemCache[*aggregatorv1.Tool]{}, prompts: itemCache[*aggregatorv1.Prompt]{},
		resources: itemCache[*aggregatorv1.Resource]{}, templates: itemCache[*aggregatorv1.ResourceTemplate]{}}
}

// forget drops the cached items of backends whose lists changed or that
// are gone.
func (bd *Builder) forget(lists map[string]*backend.Lists) {
	for b, l := range bd.seen {
		if lists[b] != l {
			delete(bd.seen, b)
			delete(bd.namedUI, b)
			delete(bd.tools, b)
			delete(bd.prompts, b)
			delete(bd.resources, b)
			delete(bd.templates, b)
		}
	}
	for b, l := range lists {
		if _, ok := bd.seen[b]; !ok {
			bd.namedUI[b] = namedUIs(b, l)
		}
		bd.seen[b] = l
	}
}

// Build makes a snapshot; see the package function Build.
func (bd *Builder) Build(lists map[string]*backend.Lists, down map[string]bool) *Snapshot {
	naming, log, spec := bd.naming, bd.log, &bd.spec
	if spec.Backends != nil {
		held := make(map[string]*backend.Lists, len(spec.Backends))
		for b, l := range lists {
			if spec.holds(b) {
				held[b] = l
			}
		}
		lists = held
	}
	bd.forget(lists)
	s := &Snapshot{Server: spec.Server, naming: naming, global: spec.Global, Down: map[string]bool{}, Capabilities: map[string]*mcp.ServerCapabilities{},
		filters: Spec{Tools: spec.Tools, Resources: spec.Resources, Prompts: spec.Prompts, uris: spec.uris}}
	names := sortedNames(lists)
	for _, b := range names {
		if down[b] {
			s.Down[b] = true
		}
		s.Capabilities[b] = lists[b].Capabilities
	}

	ovs := spec.Overrides
	s.Tools = build(naming, KindTools, names, func(b string) ([]*mcp.Tool, [][]byte) { return lists[b].Tools, lists[b].Definitions.Tools },
		func(t *mcp.Tool) string { return t.Name },
		func(b, original string) string { return naming.ToolName(b, ovs.Tool(b, original).Name(original)) },
		func(t *mcp.Tool, raw []byte, name, b string) (*aggregatorv1.Tool, []byte) {
			return overriddenToolItem(ovs.Tool(b, t.Name), t, raw, name, b, log)
		}, bd.tools, spec, &s.Conflicts)
	if ovs.Len() > 0 {
		attachOverrides(s.Tools, ovs, lists)
		bd.warnUnmatched(lists, down)
	}
	s.Prompts = build(naming, KindPrompts, names, func(b string) ([]*mcp.Prompt, [][]byte) { return lists[b].Prompts, lists[b].Definitions.Prompts },
		func(p *mcp.Prompt) string { return p.Name }, naming.PromptName, promptItem, bd.prompts, spec, &s.Conflicts)
	s.Resources = build(naming, KindResources, names, func(b string) ([]*mcp.Resource, [][]byte) {
		return lists[b].Resources, lists[b].Definitions.Resources
	},
		func(r *mcp.Resource) string { return r.URI }, UIURI, resourceItem, bd.resources, spec, &s.Conflicts)
	s.Templates = build(naming, KindResourceTemplates, names, func(b string) ([]*mcp.ResourceTemplate, [][]byte) {
		return lists[b].ResourceTemplates, lists[b].Definitions.ResourceTemplates
	},
		func(t *mcp.ResourceTemplate) string { return t.URITemplate }, UIURI, templateItem, bd.templates, spec, &s.Conflicts)

	s.indexUI(bd.namedUI)
	s.matchURIs(log)
	slices.SortStableFunc(s.Conflicts, func(a, b Conflict) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name), strings.Compare(a.Overlaps, b.Overlaps))
	})
	s.toolIdx, s.promptIdx = index(s.Tools), index(s.Prompts)
	// Resources under their canonical URIs, as requests name them.
	s.resIdx, s.tmplIdx = make(map[string]int, len(s.Resources)), index(s.Templates)
	for i := range s.Resources {
		s.resIdx[CanonicalURI(s.Resources[i].Key)] = i
	}

	h := sha256.New()
	if s.Server != "" {
		h.Write([]byte(s.Server))
		h.Write([]byte{0})
	}
	for _, k := range Kinds {
		s.eachDigest(k, func(_ int, d []byte) { h.Write(d) })
		h.Write([]byte{0xff})
	}
	for _, b := range sortedNames(s.Down) {
		h.Write([]byte(b))
		h.Write([]byte{0})
	}
	h.Write([]byte{0xff})
	// Capabilities are served too (Discover's resources_subscribe and
	// completions), so they are part of the content. encoding/json writes
	// struct fields in declaration order and map keys sorted: canonical.
	for _, b := range sortedNames(s.Capabilities) {
		caps, _ := json.Marshal(s.Capabilities[b])
		h.Write([]byte(b))
		h.Write([]byte{0})
		h.Write(caps)
		h.Write([]byte{0})
	}
	copy(s.digest[:], h.Sum(nil))
	s.Version = versionOf(s.digest)
	return s
}

// versionOf is the version named by a snapshot digest: its first 8 bytes,
// big-endian, with 0 (which the API reserves for "no version") mapped
// to 1.
func versionOf(digest [sha256.Size]byte) uint64 {
	if v := binary.BigEndian.Uint64(digest[:8]); v != 0 {
		return v
	}
	return 1
}

// build names one kind's items, resolves conflicts and sorts by key.
func build[T any, M any](naming *Naming, kind Kind, backends []string, items func(string) ([]*T, [][]byte), key func(*T) string,
	name func(backend, original string) string, toMsg func(t *T, raw []byte, name, backend string) (M, []byte), cache itemCache[M], spec *Spec, conflicts *[]Conflict,
) []Item[M] {
	type candidate struct {
		backend string
		adv     string // its advertised key
		item    *T
		raw     []byte // as listed; nil when the lists were made in code
	}
	claims := map[string][]claim{}
	var cands []candidate
	for _, b := range backends {
		// seen is the key that claimed each name of the backend's.
		seen := map[string]string{}
		var clashes []string
		typed, raws := items(b)
		for i, it := range typed {
			if it == nil {
				continue
			}
			var raw []byte
			if i < len(raws) {
				raw = raws[i]
			}
			adv := name(b, key(it))
			if adv == "" || !spec.keeps(kind, adv) {
				continue
			}
			// A resource is claimed by its canonical URI: two spellings
			// of one URI name one resource, which two backends cannot
			// both serve.
			claimed := adv
			if kind == KindResources {
				claimed = CanonicalURI(adv)
			}
			if first, dup := seen[claimed]; dup {
				// A backend that lists one key twice keeps its first
				// entry; two of its tools under one name (an override
				// renamed one onto the other) keep neither, as a conflict
				// would, rather than whichever it listed first.
				if kind == KindTools && first != key(it) && !slices.Contains(clashes, claimed) {
					clashes = append(clashes, claimed)
					*conflicts = append(*conflicts, Conflict{Kind: kind, Name: claimed, Backends: []string{b, b}})
				}
				continue
			}
			seen[claimed] = key(it)
			claims[claimed] = append(claims[claimed], claim{backend: b, index: len(cands)})
			cands = append(cands, candidate{backend: b, adv: adv, item: it, raw: raw})
		}
		for _, claimed := range clashes {
			if claims[claimed] = slices.DeleteFunc(claims[claimed], func(c claim) bool { return c.backend == b }); len(claims[claimed]) == 0 {
				delete(claims, claimed)
			}
		}
	}
	out := make([]Item[M], 0, len(claims))
	for claimed, cl := range claims {
		w, c := naming.resolve(kind, claimed, cl)
		if c != nil {
			*conflicts = append(*conflicts, *c)
		}
		if w < 0 {
			continue
		}
		cand := cands[cl[w].index]
		it, ok := cache[cand.backend][cand.adv]
		if !ok {
			it = newItem(cand.item, cand.raw, cand.adv, cand.backend, key, toMsg)
			if cache[cand.backend] == nil {
				cache[cand.backend] = map[string]Item[M]{}
			}
			cache[cand.backend][cand.adv] = it
		}
		out = append(out, it)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// newItem converts one backend item to its API message and digest.
func newItem[T any, M any](t *T, raw []byte, adv, backend string, key func(*T) string, toMsg func(*T, []byte, string, string) (M, []byte)) Item[M] {
	msg, def := toMsg(t, raw, adv, backend)
	it := Item[M]{Key: adv, Backend: backend, Original: key(t), Msg: msg}
	if tool, ok := any(msg).(*aggregatorv1.Tool); ok {
		it.ParamHeaders = paramheader.Extract([]byte(tool.GetInputSchemaJson()))
		if it.UI = uiOf([]byte(tool.GetDefinitionJson())); it.UI != "" {
			it.noUI = noUIMsg(tool)
		}
	}
	h := sha256.New()
	for _, part := range []string{adv, backend, it.Original} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	h.Write(def)
	copy(it.digest[:], h.Sum(nil))
	return it
}

func index[M any](items []Item[M]) map[string]int {
	m := make(map[string]int, len(items))
	for i, it := range items {
		m[it.Key] = i
	}
	return m
}

// eachDigest calls f with the content digest of every item of kind k.
func (s *Snapshot) eachDigest(k Kind, f func(int, []byte)) {
	switch k {
	case KindTools:
		for i := range s.Tools {
			f(i, s.Tools[i].digest[:])
		}
	case KindResources:
		for i := range s.Resources {
			f(i, s.Resources[i].digest[:])
		}
	case KindResourceTemplates:
		for i := range s.Templates {
			f(i, s.Templates[i].digest[:])
		}
	case KindPrompts:
		for i := range s.Prompts {
			f(i, s.Prompts[i].digest[:])
		}
	}
}

// itemMeta returns the key and backend of item i of kind k.
func (s *Snapshot) itemMeta(k Kind, i int) (key, backend string) {
	switch k {
	case KindTools:
		return s.Tools[i].Key, s.Tools[i].Backend
	case KindResources:
		return s.Resources[i].Key, s.Resources[i].Backend
	case KindResourceTemplates:
		return s.Templates[i].Key, s.Templates[i].Backend
	default:
		return s.Prompts[i].Key, s.Prompts[i].Backend
	}
}

// Len is the number of items of kind k.
func (s *Snapshot) Len(k Kind) int {
	return [...]int{len(s.Tools), len(s.Resources), len(s.Templates), len(s.Prompts)}[k]
}
