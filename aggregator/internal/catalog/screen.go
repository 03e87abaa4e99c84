package catalog

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/services/rawjson"
	"github.com/switchboard-mcp/switchboard/services/textcut"
	"github.com/switchboard-mcp/switchboard/services/tooldigest"
)

// MaxDefinitionDepth bounds how deeply a listed definition may nest
// arrays and objects: the gateway's bound for what clients send
// (go-sdk refuses more than 1000 levels); no schema a model can use
// comes near it. It is the pinning digest's bound (tooldigest), so that
// the catalog and the digest refuse the same definitions. The size of a
// definition is bounded by the listing's message
// (backend.maxMessageBytes), and checking it takes time linear in it.
const MaxDefinitionDepth = tooldigest.MaxDefinitionDepth

// CheckDefinition reports why a listed item's definition (its JSON object
// as the backend listed it, schemas, annotations and _meta included)
// cannot be catalogued, or nil: an object in it, at any depth, names a
// member twice (an error matching rawjson.ErrDuplicateMember, saying
// which), it nests deeper than MaxDefinitionDepth (rawjson.ErrTooDeep),
// or it is not one JSON value (rawjson.ErrMalformed).
//
// JSON leaves a repeated name's meaning to each reader: go-sdk's and
// encoding/json's decoding keep the last member, the catalog's reading
// and its rewriting (rawjson) the first. A definition with one could
// show a model one description or schema and a reviewer (the pinning
// digest) another, so none is listed.
//
// A definition whose object itself, or whose annotations, names two
// members that differ only in case ("description" and "Description") is
// refused the same way: Go's encoding/json, which many clients decode
// into structs with, matches member names without regard to case and
// keeps the last, while go-sdk, the catalog and the pinning digest read
// the exact name; a backend could show such clients a description no
// reviewer saw. Inside schemas and _meta, names are data (properties
// "id" and "ID" are two), so only these two objects are read so.
func CheckDefinition(def []byte) error {
	if err := rawjson.Unique(def, MaxDefinitionDepth); err != nil {
		return err
	}
	annotations, _ := rawjson.Get(def, "annotations")
	for _, obj := range [][]byte{def, annotations} {
		if err := caseVariants(obj); err != nil {
			return err
		}
	}
	return nil
}

// caseVariants reports two members of the object obj whose names differ
// only in case, or nil.
func caseVariants(obj []byte) error {
	var err error
	folded := map[string]string{}
	rawjson.Each(obj, func(m rawjson.Member) bool {
		name := string(m.Name)
		key := strings.ToLower(strings.ToUpper(name))
		if other, ok := folded[key]; ok {
			err = fmt.Errorf("%w: %q and %q differ only in case", rawjson.ErrDuplicateMember, cutKey(other), cutKey(name))
			return false
		}
		folded[key] = name
		return true
	})
	return err
}

// MaxNameChars bounds a listed tool's or prompt's name: MCP 2026-07-28
// says 1 to 128 characters.
const MaxNameChars = 128

// ErrInvalidName: a listed item's name (a tool's or prompt's) or URI (a
// resource's or template's) is empty, not UTF-8, holds a control
// character (U+0000 to U+001F, U+007F to U+009F) or a bidirectional
// control (isBidiControl), or is a name longer than MaxNameChars. It
// would reach clients, logs, rate-limit keys and headers as it is, so
// the item is refused. A name of other printable
// characters than MCP's recommended [A-Za-z0-9_.-] is listed: that rule
// is a SHOULD, and many servers' names break it harmlessly.
var ErrInvalidName = errors.New("invalid name")

// isBidiControl reports the characters that reorder how text around
// them is shown (U+202E shows "delete_\u202eselif" as "delete_files"):
// a name holding one would show a person reviewing tools, calls or the
// audit trail another name than the one it is.
func isBidiControl(r rune) bool { return unicode.Is(unicode.Bidi_Control, r) }

// CheckName reports why the key of a listed item of kind k is refused, or
// nil.
func CheckName(k Kind, key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty", ErrInvalidName)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: not UTF-8", ErrInvalidName)
	case strings.ContainsFunc(key, unicode.IsControl):
		return fmt.Errorf("%w: a control character", ErrInvalidName)
	case strings.ContainsFunc(key, isBidiControl):
		return fmt.Errorf("%w: a bidirectional control character", ErrInvalidName)
	case (k == KindTools || k == KindPrompts) && utf8.RuneCountInString(key) > MaxNameChars:
		return fmt.Errorf("%w: over %d characters", ErrInvalidName, MaxNameChars)
	}
	return nil
}

// ErrInvalidSchema: a listed tool's inputSchema is missing or is not an
// object schema (a JSON object whose type is "object"), or its
// outputSchema is present and is not one. MCP requires both to be object
// schemas, and clients that check a listing against MCP's schema (the
// TypeScript SDK's does) refuse the whole tools/list for one such tool:
// every backend's tools would vanish from them.
var ErrInvalidSchema = errors.New("invalid schema")

// checkSchemas reports why a tool definition's schemas are refused, or
// nil.
func checkSchemas(def []byte) error {
	for _, member := range []string{"inputSchema", "outputSchema"} {
		schema, ok := rawjson.Get(def, member)
		if !ok && member == "outputSchema" {
			continue
		}
		if typ, _ := rawjson.Get(schema, "type"); string(typ) != `"object"` {
			return fmt.Errorf("%w: %s is not an object schema", ErrInvalidSchema, member)
		}
	}
	return nil
}

// RefusalReason names why CheckDefinition, CheckName, checkSchemas or
// checkUI refused an item, or why it did not decode, as the refusal
// metric labels it: invalid_name, invalid_schema, duplicate_member,
// conflicting_ui, too_deep or malformed.
func RefusalReason(err error) string {
	switch {
	case errors.Is(err, ErrInvalidName):
		return "invalid_name"
	case errors.Is(err, ErrInvalidSchema):
		return "invalid_schema"
	case errors.Is(err, ErrConflictingUI):
		return "conflicting_ui"
	case errors.Is(err, rawjson.ErrDuplicateMember):
		return "duplicate_member"
	case errors.Is(err, rawjson.ErrTooDeep):
		return "too_deep"
	default:
		return "malformed"
	}
}

// maxLoggedKey bounds the item name or URI a refusal's log line quotes.
const maxLoggedKey = 256

// Screen removes from backend lists the items whose definitions
// CheckDefinition refuses, once, before every catalog (the whole one and
// each virtual server's) is built from them and before pinning digests
// them: a refused item is missing everywhere, not listed, not found and
// not callable, like an item the backend does not have, while the
// backend's other items are unaffected. Tools, resources, resource
// templates and prompts alike.
//
// Each refused definition is logged (warn: backend, name, what repeats)
// and reported to the refused callback once, when first seen; a backend
// whose lists did not change (the same *backend.Lists) is not read
// again, and keeps its screened lists' pointer, so the builders and the
// pinning guard, which cache by pointer, see nothing new. A Screen is not
// safe for concurrent use.
type Screen struct {
	log     *slog.Logger
	refused func(backend string, k Kind, reason string)
	seen    map[string]screened
}

// screened is one backend's lists and what the screen made of them.
type screened struct {
	in, out *backend.Lists
	// refusals are the definitions refused in in.
	refusals map[refusal]bool
}

// refusal is one refused definition: a relisting that still lists it is
// not logged or counted again.
type refusal struct {
	kind Kind
	key  string
	sum  [sha256.Size]byte
}

// NewScreen returns a Screen that logs to log and reports each refused
// definition to refused (which may be nil).
func NewScreen(log *slog.Logger, refused func(backend string, k Kind, reason string)) *Screen {
	return &Screen{log: log, refused: refused, seen: map[string]screened{}}
}

// Lists returns lists without the items whose definitions are refused:
// the same *backend.Lists for a backend that loses nothing, a copy (the
// same one while its input is the same) for one that does.
func (sc *Screen) Lists(lists map[string]*backend.Lists) map[string]*backend.Lists {
	out := make(map[string]*backend.Lists, len(lists))
	next := make(map[string]screened, len(lists))
	for _, b := range slices.Sorted(maps.Keys(lists)) {
		l := lists[b]
		s, ok := sc.seen[b]
		if !ok || s.in != l {
			s = sc.screen(b, l, s.refusals)
		}
		next[b] = s
		out[b] = s.out
	}
	sc.seen = next
	return out
}

// screen reads every definition of one backend's lists; prev are the
// refusals of its previous lists, which are not logged again.
func (sc *Screen) screen(b string, l *backend.Lists, prev map[refusal]bool) screened {
	s := screened{in: l, out: l}
	if l == nil {
		return s
	}
	c := *l
	changed := false
	check := func(k Kind, key string, def []byte) bool {
		err := CheckName(k, key)
		if err == nil {
			err = CheckDefinition(def)
		}
		if err == nil && k == KindTools {
			err = checkSchemas(def)
		}
		if err == nil && k == KindTools {
			err = checkUI(def)
		}
		if err == nil {
			return true
		}
		s.refuse(sc, b, refusal{kind: k, key: key, sum: sha256.Sum256(def)}, prev, err)
		changed = true
		return false
	}
	// Items the backend layer could not decode are not in the lists;
	// they are refused here all the same, named as well as they can be.
	for _, u := range l.Undecodable {
		for _, k := range Kinds {
			if k.String() == u.Member {
				s.refuse(sc, b, refusal{kind: k, key: undecodedKey(k, u.Raw), sum: sha256.Sum256(u.Raw)}, prev, u.Err)
			}
		}
	}
	c.Tools, c.Definitions.Tools = screenKind(KindTools, l.Tools, l.Definitions.Tools, func(t *mcp.Tool) string { return t.Name }, check)
	c.Resources, c.Definitions.Resources = screenKind(KindResources, l.Resources, l.Definitions.Resources,
		func(r *mcp.Resource) string { return r.URI }, check)
	c.ResourceTemplates, c.Definitions.ResourceTemplates = screenKind(KindResourceTemplates, l.ResourceTemplates, l.Definitions.ResourceTemplates,
		func(t *mcp.ResourceTemplate) string { return t.URITemplate }, check)
	c.Prompts, c.Definitions.Prompts = screenKind(KindPrompts, l.Prompts, l.Definitions.Prompts, func(p *mcp.Prompt) string { return p.Name }, check)
	if changed {
		s.out = &c
	}
	return s
}

// refuse records one refused definition, reporting it unless the
// backend's previous lists held it too.
func (s *screened) refuse(sc *Screen, b string, r refusal, prev map[refusal]bool, err error) {
	if s.refusals == nil {
		s.refusals = map[refusal]bool{}
	}
	s.refusals[r] = true
	if !prev[r] {
		sc.report(b, r.kind, r.key, err)
	}
}

// undecodedKey is the name (or URI) an item that did not decode has, if
// it is a string; "" otherwise.
func undecodedKey(k Kind, def []byte) string {
	member := [...]string{"name", "uri", "uriTemplate", "name"}[k]
	v, _ := rawjson.Get(def, member)
	key, _ := rawjson.StringValue(v)
	return key
}

// screenKind returns items and defs (index for index) without the items
// whose definition check refuses; the same slices when it refuses none.
// Items without a definition (lists made in code) are encoded by the
// catalog and cannot repeat a name.
func screenKind[T any](k Kind, items []*T, defs [][]byte, key func(*T) string, check func(Kind, string, []byte) bool) ([]*T, [][]byte) {
	var refused []int
	for i, it := range items {
		if it == nil || i >= len(defs) || defs[i] == nil {
			continue
		}
		if !check(k, key(it), defs[i]) {
			refused = append(refused, i)
		}
	}
	if len(refused) == 0 {
		return items, defs
	}
	keptItems := make([]*T, 0, len(items)-len(refused))
	keptDefs := make([][]byte, 0, len(defs)-len(refused))
	next := 0
	for i, it := range items {
		if next < len(refused) && refused[next] == i {
			next++
			continue
		}
		keptItems = append(keptItems, it)
		if i < len(defs) {
			keptDefs = append(keptDefs, defs[i])
		}
	}
	return keptItems, keptDefs
}

// report logs and counts one refused definition.
func (sc *Screen) report(b string, k Kind, key string, err error) {
	reason := RefusalReason(err)
	sc.log.Warn("listed definition refused: it is not listed, found or callable (docs/operations.md, One reading of a definition)",
		"backend", b, k.itemAttr(), cutKey(key), "reason", reason, "err", err.Error())
	if sc.refused != nil {
		sc.refused(b, k, reason)
	}
}

// itemAttr is the log attribute that names an item of kind k.
func (k Kind) itemAttr() string {
	return [...]string{"tool", "resource", "resource_template", "prompt"}[k]
}

// cutKey bounds a name or URI for a log line, on a rune boundary.
func cutKey(key string) string {
	if len(key) <= maxLoggedKey {
		return key
	}
	return textcut.Prefix(key, maxLoggedKey) + "…"
}
