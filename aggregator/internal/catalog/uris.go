package catalog

import (
	"cmp"
	"log/slog"
	pathpkg "path"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/yosida95/uritemplate/v3"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
)

// A URI is claimed by the resource listed under it and by every resource
// template whose RFC 6570 expansion can produce it, possibly of several
// backends. A read (and a subscription) goes to one claimant's backend:
//
//  1. the best-ranked backend (Naming.rankOf: priorityOrder under the
//     priority strategy; under prefix and manual every backend ranks
//     alike);
//  2. then the most specific claim: a listed resource before any template;
//     between templates, the longer literal prefix (before the first
//     expression), then more literal characters, then fewer broad
//     expressions (reserved {+x} and fragment {#x} expansions, which
//     match "/", and exploded {x*} ones);
//  3. claims that tie on both, of different backends, are a conflict no
//     backend wins: the read is refused as for an unknown URI.
//
// Backend names never decide. A key two backends list as such (the same
// URI, the same URI template) is settled first, by the same ranking, in
// Naming.resolve. A resource that a better-ranked backend's template
// matches is not listed (Build); every other overlap between backends is
// found by the reads that meet it, and reported once per snapshot
// (ResourceOwner).

// matcher is one template that matches URIs.
type matcher struct {
	index   int // in Snapshot.Templates
	backend string
	prefix  string // the literal prefix: a URI it matches starts with it
	re      *regexp.Regexp
	rank    int
	spec    specificity
}

func (m *matcher) matches(uri string) bool {
	return strings.HasPrefix(uri, m.prefix) && m.re.MatchString(uri)
}

// specificity measures how narrow a URI template is (rule 2 above).
type specificity struct{ prefix, literals, broad int }

// compare is positive when a is more specific than b, 0 when neither is.
func (a specificity) compare(b specificity) int {
	if c := cmp.Compare(a.prefix, b.prefix); c != 0 {
		return c
	}
	if c := cmp.Compare(a.literals, b.literals); c != 0 {
		return c
	}
	return cmp.Compare(b.broad, a.broad)
}

// specificityOf measures the template t (an RFC 6570 template) and returns
// its literal prefix.
func specificityOf(t string) (specificity, string) {
	var s specificity
	in, started := false, false
	for i := 0; i < len(t); i++ {
		switch c := t[i]; {
		case c == '{':
			in, started = true, true
			if i+1 < len(t) && (t[i+1] == '+' || t[i+1] == '#') {
				s.broad++
			}
		case c == '}':
			in = false
		case in:
			if c == '*' {
				s.broad++
			}
		default:
			s.literals++
			if !started {
				s.prefix++
			}
		}
	}
	return s, t[:s.prefix]
}

// matchURIs makes the snapshot's matchers, in the order reads try them:
// best rank first, then most specific, then by key. A template that is
// not RFC 6570 is listed but matches nothing. It then leaves out, and
// reports, every resource that a better-ranked backend's template
// matches.
func (s *Snapshot) matchURIs(log *slog.Logger) {
	for i, t := range s.Templates {
		tmpl, err := uritemplate.New(t.Key)
		if err != nil {
			log.Warn("resource template is not RFC 6570; it is listed but matches no URI", "backend", t.Backend, "template", cutKey(t.Key))
			continue
		}
		spec, prefix := specificityOf(t.Key)
		s.matchers = append(s.matchers, matcher{index: i, backend: t.Backend, prefix: prefix, re: tmpl.Regexp(), rank: s.naming.rankOf(t.Backend), spec: spec})
	}
	// Stable: templates are in key order already.
	slices.SortStableFunc(s.matchers, func(a, b matcher) int {
		if c := cmp.Compare(a.rank, b.rank); c != 0 {
			return c
		}
		return b.spec.compare(a.spec)
	})
	s.Resources = slices.DeleteFunc(s.Resources, func(r Item[*aggregatorv1.Resource]) bool {
		if s.ui[CanonicalURI(r.Key)] != nil {
			return false // its URI names its backend (ui.go)
		}
		rank := s.naming.rankOf(r.Backend)
		for i := range s.matchers {
			m := &s.matchers[i]
			if m.rank >= rank {
				return false
			}
			if m.matches(r.Key) {
				s.Conflicts = append(s.Conflicts, Conflict{Kind: KindResources, Name: r.Key, Overlaps: s.Templates[m.index].Key,
					Backends: []string{r.Backend, m.backend}, Winner: m.backend})
				return true
			}
		}
		return false
	})
}

// ResourceOwner is the backend a read of uri goes to, "" for none. found
// is a conflict between backends that this read met, the first time the
// snapshot meets it (nil otherwise, and once maxReported conflicts were
// found), for the caller to report; it never quotes uri.
func (s *Snapshot) ResourceOwner(uri string) (owner string, found *Conflict) {
	if e := s.uiEntryOf(uri); e != nil {
		if e.hidden {
			// The page of tools the snapshot does not show: no template
			// that matches it serves it either, to callers who may not
			// call those tools.
			return "", nil
		}
		return e.backend, nil // its URI names its backend (ui.go)
	}
	if i, ok := s.resIdx[uri]; ok {
		// No better-ranked template matches it (matchURIs); an equally
		// ranked one is less specific.
		r := &s.Resources[i]
		rank := s.naming.rankOf(r.Backend)
		for j := range s.matchers {
			m := &s.matchers[j]
			if m.rank > rank {
				break
			}
			if m.rank == rank && m.backend != r.Backend && m.matches(uri) {
				return r.Backend, s.reported.first(-1-i, m.index, Conflict{Kind: KindResources, Name: r.Key,
					Overlaps: s.Templates[m.index].Key, Backends: []string{r.Backend, m.backend}, Winner: r.Backend})
			}
		}
		return r.Backend, nil
	}
	var w *matcher
	for j := range s.matchers {
		m := &s.matchers[j]
		if w != nil && m.rank != w.rank {
			break
		}
		if !m.matches(uri) {
			continue
		}
		if w == nil {
			w = m
			continue
		}
		if m.backend == w.backend {
			continue
		}
		c := Conflict{Kind: KindResourceTemplates, Name: s.Templates[w.index].Key, Overlaps: s.Templates[m.index].Key,
			Backends: []string{w.backend, m.backend}}
		if m.spec == w.spec {
			return "", s.reported.first(w.index, m.index, c)
		}
		c.Winner = w.backend
		return w.backend, s.reported.first(w.index, m.index, c)
	}
	if w == nil {
		return "", nil
	}
	return w.backend, nil
}

// TemplatesServing returns the keys of backend's templates that match uri:
// those a read of uri routed to backend may be served through, when the
// snapshot lists no such resource.
func (s *Snapshot) TemplatesServing(uri, backend string) []string {
	var keys []string
	for j := range s.matchers {
		if m := &s.matchers[j]; m.backend == backend && m.matches(uri) {
			keys = append(keys, s.Templates[m.index].Key)
		}
	}
	return keys
}

// maxReported bounds the overlaps one snapshot reports.
const maxReported = 1024

// reportSet holds the overlaps a snapshot's reads have reported, by the
// positions of the two items (a resource's as -1-i).
type reportSet struct {
	mu sync.Mutex
	m  map[[2]int]bool
	// found are the conflicts reported, in the order reads met them.
	found []Conflict
}

// first returns &c the first time the pair a, b is reported, nil after.
func (r *reportSet) first(a, b int, c Conflict) *Conflict {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := [2]int{a, b}
	if r.m[k] || len(r.m) >= maxReported {
		return nil
	}
	if r.m == nil {
		r.m = map[[2]int]bool{}
	}
	r.m[k] = true
	r.found = append(r.found, c)
	return &c
}

// AllConflicts is every conflict of the snapshot: those found when it was
// built, then the overlaps its reads have met so far (at most
// maxReported), for operators (ListBackends).
func (s *Snapshot) AllConflicts() []Conflict {
	s.reported.mu.Lock()
	defer s.reported.mu.Unlock()
	return append(slices.Clip(s.Conflicts), s.reported.found...)
}

// CanonicalURI is uri in the one form its equivalent spellings share (RFC
// 3986, section 6.2.2): the scheme in lower case, percent-encoded
// unreserved characters decoded, the hex digits of other escapes in upper
// case, and the dot segments of a path that starts with "/" removed. A
// request that names a resource is routed, filtered and authorized under
// this form, so that "docs://%73ecret" or "docs://pub/../secret" cannot
// pass a filter or a policy written for "docs://secret" through a template
// that matches both. The authority keeps its case: MCP servers use it as a
// name (a backend's in its app pages' URIs, an owner's, a collection's)
// and match it as written, as filters and policies compare it.
func CanonicalURI(uri string) string {
	scheme := ""
	if colon := strings.IndexByte(uri, ':'); colon > 0 && isScheme(uri[:colon]) {
		scheme = uri[:colon]
	}
	if !strings.ContainsAny(uri, "%.") && scheme == strings.ToLower(scheme) {
		return uri
	}
	var b strings.Builder
	b.Grow(len(uri))
	b.WriteString(strings.ToLower(scheme))
	for i := len(scheme); i < len(uri); i++ {
		c := uri[i]
		if c != '%' || i+2 >= len(uri) {
			b.WriteByte(c)
			continue
		}
		hi, lo := unhex(uri[i+1]), unhex(uri[i+2])
		if hi < 0 || lo < 0 {
			b.WriteByte(c) // not an escape: left as written
			continue
		}
		if d := byte(hi<<4 | lo); unreserved(d) {
			b.WriteByte(d)
		} else {
			b.WriteByte('%')
			b.WriteString(strings.ToUpper(uri[i+1 : i+3]))
		}
		i += 2
	}
	return normalizeHierarchy(b.String(), len(scheme))
}

// escapedSlashes decodes the escapes of a slash and a backslash as a slash.
var escapedSlashes = strings.NewReplacer("%2F", "/", "%5C", "/")

// DecodedPathURI is canonical (a CanonicalURI) as a server that serves
// it by its path, decoded before it is taken apart, reads it: escaped
// slashes and backslashes ("%2F", "%5C") in the path become "/", and the
// path is cleaned as path.Clean, Node's path.normalize and Python's
// normpath clean it (cleanPath); a query or fragment, which such a server
// ignores, is dropped. "docs://files/pub/..%2Fsecret/key",
// "docs://files//secret/key" and "docs://files/secret/key?v=1" are
// "docs://files/secret/key" there. An escaped slash in the authority
// means the server reads the authority as part of a name (a template
// "notes://{name}"), so the dot segments are resolved across it:
// "notes://pub%2F..%2Fsecret" is "notes://secret", as such a server finds
// it, not "notes://pub/secret".
func DecodedPathURI(canonical string) string {
	colon := strings.IndexByte(canonical, ':')
	end := strings.IndexAny(canonical, "?#")
	if end < 0 {
		end = len(canonical)
	}
	if colon <= 0 || colon > end {
		return canonical
	}
	path := canonical[colon+1 : end]
	decoded := escapedSlashes.Replace(path)
	kept := "" // the authority, when the server reads it as one
	if authority, ok := strings.CutPrefix(path, "//"); ok {
		if slash := strings.IndexByte(authority, '/'); slash >= 0 {
			authority = authority[:slash]
		}
		if strings.Contains(authority, "%2F") || strings.Contains(authority, "%5C") {
			// The authority is the name's first segment: ".." may
			// remove it, as it would any other.
			return canonical[:colon+1] + "/" + cleanPath(decoded[1:])
		}
		kept = "//" + authority
	}
	return canonical[:colon+1] + kept + cleanPath(decoded[len(kept):])
}

// cleanPath is a path that starts with "/" as path cleaning reads it
// (path.Clean: each run of slashes made one, so "pub//.." is the root,
// not "pub/"; the dot segments resolved; a trailing slash dropped). Other
// paths are returned as they are.
func cleanPath(p string) string {
	if !strings.HasPrefix(p, "/") {
		return p
	}
	return pathpkg.Clean(p)
}

// normalizeHierarchy is uri (its escapes normalized, its scheme ending at
// index colon) with the dot segments of its path removed; the authority,
// the query and the fragment are kept as they are.
func normalizeHierarchy(uri string, colon int) string {
	if colon == 0 {
		return uri // no scheme: a name, not a URI to take apart
	}
	rest := uri[colon+1:]
	end := strings.IndexAny(rest, "?#")
	if end < 0 {
		end = len(rest)
	}
	hier, tail := rest[:end], rest[end:]
	authority := ""
	if strings.HasPrefix(hier, "//") {
		slash := strings.IndexByte(hier[2:], '/')
		if slash < 0 {
			slash = len(hier) - 2
		}
		authority, hier = hier[:2+slash], hier[2+slash:]
	}
	return uri[:colon+1] + authority + removeDotSegments(hier) + tail
}

// removeDotSegments is RFC 3986's remove_dot_segments (section 5.2.4) for
// a path that starts with "/": "." and ".." segments resolved, a ".." at
// the root dropped. Other paths are returned as they are.
func removeDotSegments(path string) string {
	if !strings.HasPrefix(path, "/") || !strings.Contains(path, ".") {
		return path
	}
	segments := strings.Split(path[1:], "/")
	out := make([]string, 0, len(segments))
	for i, seg := range segments {
		last := i == len(segments)-1
		switch seg {
		case ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, seg)
			continue
		}
		if last {
			// "/a/b/." and "/a/b/.." end in a directory.
			out = append(out, "")
		}
	}
	return "/" + strings.Join(out, "/")
}

// isScheme reports RFC 3986's scheme: a letter, then letters, digits,
// "+", "-" and ".".
func isScheme(s string) bool {
	for i := range len(s) {
		c := s[i]
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !letter && (i == 0 || !('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return s != ""
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// unreserved reports RFC 3986's unreserved characters, whose escapes mean
// the characters themselves.
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}
