package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path"
	"strings"
)

// Redacted replaces the value of an argument member whose name matches a
// redaction pattern.
const Redacted = "[redacted]"

// maxArgumentsBytes bounds the arguments an event carries with
// audit.arguments: values; larger ones keep their digest only.
const maxArgumentsBytes = 16 << 10

// Canonical is the canonical JSON of raw: objects with their members
// sorted by name, no insignificant whitespace, strings re-escaped by one
// rule (no HTML escaping), numbers as written. Two texts that decode to
// the same JSON value get the same canonical form, whatever their member
// order or spacing. ok is false when raw is not one JSON value.
func Canonical(raw []byte) (canon []byte, ok bool) {
	v, ok := decode(raw)
	if !ok {
		return nil, false
	}
	return encode(v), true
}

// Digest is the hex SHA-256 of the canonical JSON of raw, or of raw's
// bytes when it is not JSON; "" for no arguments.
func Digest(raw []byte) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return ""
	}
	canon, ok := Canonical(raw)
	if !ok {
		canon = raw
	}
	return digestOf(canon)
}

func digestOf(canon []byte) string {
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
}

// Redactor replaces the values of the argument members whose names match
// its patterns. It is used by one goroutine at a time (the writer's).
type Redactor struct {
	patterns []matcher
	// decided caches the decision per member name (names repeat from
	// call to call), up to maxDecided names.
	decided map[string]bool
}

// maxDecided bounds the redactor's cache of decisions.
const maxDecided = 4096

// matcher is one pattern; the usual forms (*word*, word*, *word, word)
// are matched without path.Match.
type matcher struct {
	pattern, literal string
	kind             byte // 'c'ontains, 'p'refix, 's'uffix, 'e'xact, 'g'lob
}

func newMatcher(p string) matcher {
	p = strings.ToLower(p)
	inner := strings.Trim(p, "*")
	switch {
	case strings.ContainsAny(inner, `*?[\`):
		return matcher{pattern: p, kind: 'g'}
	case len(p) >= 2 && p[0] == '*' && p[len(p)-1] == '*':
		return matcher{literal: inner, kind: 'c'}
	case strings.HasSuffix(p, "*"):
		return matcher{literal: inner, kind: 'p'}
	case strings.HasPrefix(p, "*"):
		return matcher{literal: inner, kind: 's'}
	default:
		return matcher{literal: p, kind: 'e'}
	}
}

func (m matcher) match(name string) bool {
	switch m.kind {
	case 'c':
		return strings.Contains(name, m.literal)
	case 'p':
		return strings.HasPrefix(name, m.literal)
	case 's':
		return strings.HasSuffix(name, m.literal)
	case 'e':
		return name == m.literal
	}
	ok, _ := path.Match(m.pattern, name)
	return ok
}

// NewRedactor matches patterns (path.Match, against lower-cased names).
func NewRedactor(patterns []string) *Redactor {
	r := &Redactor{decided: map[string]bool{}}
	for _, p := range patterns {
		r.patterns = append(r.patterns, newMatcher(p))
	}
	return r
}

// Matches reports whether the member name is redacted.
func (r *Redactor) Matches(name string) bool {
	if d, ok := r.decided[name]; ok {
		return d
	}
	// A name is matched as written (lower-cased) and run together, so
	// that a pattern need not spell every separator: api-key, api_key,
	// api.key and "API Key" are all apikey.
	lower := strings.ToLower(name)
	compact := strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || r == ' ' {
			return -1
		}
		return r
	}, lower)
	d := false
	for _, m := range r.patterns {
		if m.match(lower) || m.match(compact) {
			d = true
			break
		}
	}
	if len(r.decided) < maxDecided {
		r.decided[name] = d
	}
	return d
}

// Redact is the canonical JSON of raw with every matching member's value,
// at any depth, replaced by Redacted; nil when raw is not JSON or the
// result is larger than maxArgumentsBytes.
func (r *Redactor) Redact(raw []byte) json.RawMessage {
	v, ok := decode(raw)
	if !ok {
		return nil
	}
	return r.redactValue(v)
}

// redactValue redacts a decoded value in place and encodes it.
func (r *Redactor) redactValue(v any) json.RawMessage {
	out := encode(r.redact(v))
	if len(out) > maxArgumentsBytes {
		return nil
	}
	return out
}

func (r *Redactor) redact(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, m := range t {
			if r.Matches(k) {
				t[k] = Redacted
			} else {
				t[k] = r.redact(m)
			}
		}
	case []any:
		for i, m := range t {
			t[i] = r.redact(m)
		}
	}
	return v
}

func decode(raw []byte) (any, bool) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, false
	}
	// One value, nothing after it.
	if d.More() {
		return nil, false
	}
	if _, err := d.Token(); err == nil {
		return nil, false
	}
	return v, true
}

// encode writes v canonically: encoding/json sorts map keys, and keeps a
// json.Number's text.
func encode(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // decoded JSON always encodes
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
