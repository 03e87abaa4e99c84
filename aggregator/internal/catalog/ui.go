package catalog

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/rawjson"
)

// MCP Apps (extension io.modelcontextprotocol/ui, SEP-1865): a tool names
// the interactive UI that renders its results in _meta.ui.resourceUri (or
// the deprecated flat _meta["ui/resourceUri"]), a ui:// resource of its
// own server that hosts read with resources/read. Behind one endpoint,
// two backends may well both call their page ui://app/index.html, and an
// app's page belongs to the server whose tools it calls. So every ui://
// URI of a backend is advertised under a name of that backend's
// (UIURI), in its resources, its resource templates and its tools' _meta
// alike; a read of that name goes to that backend under its own URI
// (BackendURI).
//
// A UI is part of what its tool shows a caller, and no more visible than
// the resource it is: a tool whose UI the server's filters or the policy
// hide from the caller is listed without its resourceUri (view.go), and
// a UI page that its backend does not list as a resource (the extension
// allows that) is readable only by a caller who may call one of the
// tools that name it (Snapshot.UIOnlyTools), so a hidden tool does not
// leak its page. Everything else under _meta.ui (csp, permissions,
// domain, prefersBorder, visibility) passes as the backend wrote it.

const uiScheme = "ui://"

// isUI reports whether uri is of the ui: scheme (schemes are
// case-insensitive, RFC 3986 §3.1).
func isUI(uri string) bool {
	return len(uri) >= len(uiScheme) && strings.EqualFold(uri[:len(uiScheme)], uiScheme)
}

// UIURI is the URI under which backend's ui:// resource uri is advertised:
// ui://<backend>/<the rest of uri>, the backend's name escaped as a path
// segment so that no two backends' URIs meet. Any other URI is advertised
// as it is.
func UIURI(backend, uri string) string {
	if !isUI(uri) {
		return uri
	}
	return uiScheme + url.PathEscape(backend) + "/" + uri[len(uiScheme):]
}

// uiEntry is one advertised ui:// URI: its backend, whether the backend
// lists it as a resource, and the tools (advertised names) that name it.
type uiEntry struct {
	backend string
	listed  bool
	tools   []string
	// hidden marks the page of tools the snapshot does not show (the
	// server's filters, an override that removed their UI, a conflict
	// they lost): no read reaches it, not even through a template that
	// matches its URI.
	hidden bool
}

// Tool _meta members that name a UI.
const (
	metaUI           = "ui"
	metaUIResource   = "resourceUri"
	metaUIDeprecated = "ui/resourceUri"
)

// toolUI rewrites the ui:// URIs a tool definition's _meta names (of
// backend) to their advertised URIs; a definition it cannot read, or
// that names none, is returned as it is.
func toolUI(def []byte, backend string) []byte {
	changed := false
	out := mapUIRefs(def, func(v []byte) ([]byte, bool) {
		s, ok := rawjson.StringValue(v)
		if !ok || !isUI(s) {
			return v, true
		}
		changed = true
		return rawjson.AppendString(nil, UIURI(backend, s)), true
	})
	if !changed {
		return def
	}
	return out
}

// mapUIRefs is def with each member of its _meta that names a UI
// (_meta.ui.resourceUri, and the deprecated _meta["ui/resourceUri"])
// replaced by what f makes of its value, or removed where f does not keep
// it; def itself when its _meta is not an object it can read.
func mapUIRefs(def []byte, f func(v []byte) ([]byte, bool)) []byte {
	meta, ok := rawjson.Get(def, "_meta")
	if !ok || !rawjson.StartsObject(meta) {
		return def
	}
	newMeta, err := rawjson.MapMembers(meta, func(m rawjson.Member) ([]byte, bool) {
		switch string(m.Name) {
		case metaUI:
			v, err := rawjson.MapMembers(m.Value, func(u rawjson.Member) ([]byte, bool) {
				if string(u.Name) == metaUIResource {
					return f(u.Value)
				}
				return u.Value, true
			})
			if err != nil {
				return m.Value, true
			}
			return v, true
		case metaUIDeprecated:
			return f(m.Value)
		}
		return m.Value, true
	})
	if err != nil {
		return def
	}
	out, err := rawjson.WithMember(def, "_meta", newMeta)
	if err != nil {
		return def
	}
	return out
}

// ErrConflictingUI: a tool definition names one UI in _meta.ui.resourceUri
// and another in the deprecated _meta["ui/resourceUri"]. A host reads one
// or the other, and the catalog's checks of who may read the page follow
// one: the definition is refused, as one read two ways (CheckDefinition).
var ErrConflictingUI = errors.New("two different UIs named")

// checkUI reports whether a tool definition's two UI members disagree.
func checkUI(def []byte) error {
	meta, _ := rawjson.Get(def, "_meta")
	current, deprecated := uiMember(meta), deprecatedMember(meta)
	if current != nil && deprecated != nil && !bytes.Equal(current, deprecated) {
		return fmt.Errorf("%w: _meta.ui.%s and _meta[%q] differ", ErrConflictingUI, metaUIResource, metaUIDeprecated)
	}
	return nil
}

// uiOf is the UI a tool definition's _meta names: _meta.ui.resourceUri,
// else the deprecated member; "" for none, or for one not of ui:.
func uiOf(def []byte) string {
	meta, _ := rawjson.Get(def, "_meta")
	for _, v := range [][]byte{uiMember(meta), deprecatedMember(meta)} {
		if s, ok := rawjson.StringValue(v); ok && isUI(s) {
			return s
		}
	}
	return ""
}

func uiMember(meta []byte) []byte {
	ui, _ := rawjson.Get(meta, metaUI)
	v, _ := rawjson.Get(ui, metaUIResource)
	return v
}

func deprecatedMember(meta []byte) []byte {
	v, _ := rawjson.Get(meta, metaUIDeprecated)
	return v
}

// withoutUI is a tool definition with the members that name its UI
// removed (the rest of _meta.ui, such as visibility, stays): what a caller
// who may not read the UI is shown.
func withoutUI(def []byte) []byte {
	return mapUIRefs(def, func([]byte) ([]byte, bool) { return nil, false })
}

// noUIMsg is msg without its UI (withoutUI).
func noUIMsg(msg *aggregatorv1.Tool) *aggregatorv1.Tool {
	c := proto.CloneOf(msg)
	c.DefinitionJson = string(withoutUI([]byte(msg.GetDefinitionJson())))
	return c
}

// indexUI records every advertised ui:// URI of the snapshot: the listed
// ui:// resources and the UIs its tools name. A tool whose UI the server's
// filters leave out is stripped of it here, for every caller. named are
// the UIs every listed tool names, shown or not (namedUIs): those the
// snapshot does not advertise are hidden.
//
// Entries are keyed by the URI's canonical form, as requests are routed,
// and each page also under pageKey, for the spellings of it a backend
// serving pages by path through a template resolves to the same page.
func (s *Snapshot) indexUI(named map[string][]string) {
	s.ui = map[string]*uiEntry{}
	for i := range s.Resources {
		r := &s.Resources[i]
		if isUI(r.Original) {
			s.ui[CanonicalURI(r.Key)] = &uiEntry{backend: r.Backend, listed: true}
		}
	}
	for i := range s.Tools {
		t := &s.Tools[i]
		if t.UI == "" {
			continue
		}
		if !s.filters.keeps(KindResources, t.UI) {
			t.Msg, t.UI = t.noUI, ""
			t.digest = sha256.Sum256(append(t.digest[:], "no ui"...))
			continue
		}
		key := CanonicalURI(t.UI)
		e := s.ui[key]
		if e == nil {
			e = &uiEntry{backend: t.Backend}
			s.ui[key] = e
		}
		if !e.listed {
			e.tools = append(e.tools, t.Key)
		}
	}
	for b, uris := range named {
		for _, uri := range uris {
			if key := CanonicalURI(uri); s.ui[key] == nil {
				s.ui[key] = &uiEntry{backend: b, hidden: true}
			}
		}
	}
	// Under its page's key an entry merges every spelling of the page,
	// the most guarded of them deciding.
	s.uiPages = make(map[string]*uiEntry, len(s.ui))
	for uri, e := range s.ui {
		key := pageKey(uri)
		m := s.uiPages[key]
		if m == nil {
			c := *e
			c.tools = slices.Clone(e.tools)
			s.uiPages[key] = &c
			continue
		}
		m.hidden = m.hidden || e.hidden || m.backend != e.backend
		if m.listed && !e.listed {
			m.listed, m.tools = false, slices.Clone(e.tools)
		} else if !m.listed && !e.listed {
			m.tools = append(m.tools, e.tools...)
		}
	}
}

// uiEntryOf is the entry of the page uri (canonical) names: its own, or,
// for another spelling of an advertised page (a query or fragment added,
// a slash doubled), the page's.
func (s *Snapshot) uiEntryOf(uri string) *uiEntry {
	if e := s.ui[CanonicalURI(uri)]; e != nil || !isUI(uri) {
		return e
	}
	return s.uiPages[pageKey(uri)]
}

// pageKey is the page a ui:// URI names, as a server that serves pages by
// their path may find it: without query or fragment, its escapes decoded
// (an escaped slash or dot included), backslashes taken for slashes, and
// empty, "." and ".." segments resolved, never above the backend's name.
func pageKey(uri string) string {
	rest := uri[len(uiScheme):]
	for range 2 {
		// Once as written, once as a server that decodes first reads it.
		if end := strings.IndexAny(rest, "?#"); end >= 0 {
			rest = rest[:end]
		}
		if decoded, err := url.PathUnescape(rest); err == nil {
			rest = decoded
		}
	}
	var segs []string
	for seg := range strings.SplitSeq(strings.ReplaceAll(rest, "\\", "/"), "/") {
		switch seg {
		case "", ".":
		case "..":
			if len(segs) > 1 {
				segs = segs[:len(segs)-1]
			}
		default:
			segs = append(segs, seg)
		}
	}
	return uiScheme + strings.Join(segs, "/")
}

// namedUIs are the UIs (as advertised) that the tools of l name, before
// any filter or override.
func namedUIs(backend string, l *backend.Lists) []string {
	var out []string
	for _, def := range l.Definitions.Tools {
		if uri := uiOf(def); uri != "" {
			out = append(out, UIURI(backend, uri))
		}
	}
	return out
}

// BackendURI is the URI on its backend owner of the resource advertised
// as uri: UIURI's inverse.
func BackendURI(owner, uri string) string {
	if !isUI(uri) {
		return uri
	}
	rest, ok := strings.CutPrefix(uri[len(uiScheme):], url.PathEscape(owner)+"/")
	if !ok {
		return uri
	}
	return uiScheme + rest
}

// UIOnlyTools are the tools that name the UI page uri when its backend
// does not list it as a resource: a caller may read it only if it may
// call one of them. Nil for any other URI.
func (s *Snapshot) UIOnlyTools(uri string) []string {
	if e := s.uiEntryOf(uri); e != nil && !e.listed {
		return e.tools
	}
	return nil
}
