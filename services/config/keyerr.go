package config

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Errors about the file name keys, never values. A value may have been
// expanded from a secret (${VAR}), and these errors reach the log (a
// rejected reload, a start that fails), the audit trail (config_reload
// events) and standard error. An error about one key is a KeyError: the
// key's YAML path, the file's line and the environment variables the
// value was expanded from when known, and what is wrong with the value,
// which may say what is wanted (the allowed modes, a bound) but never
// quotes the value itself, nor an error that would (time.ParseDuration,
// strconv, url.Parse, net.SplitHostPort and yaml all quote their input).

// KeyError is an error about the value of one key.
type KeyError struct {
	// Key is the key's YAML path: aggregator.backends[2].auth.mode.
	Key string
	// Line is the key's line in the file; 0 when not known.
	Line int
	// Vars are the environment variables the value was expanded from
	// (without ${}), set by Config.Annotate.
	Vars []string
	// Err says what is wrong, without the value.
	Err error
}

// Error reads "aggregator.backends[2].auth.mode (line 14, from ${MODE}):
// want static, tokenExchange or clientCredentials".
func (e *KeyError) Error() string {
	var notes []string
	if e.Line > 0 {
		notes = append(notes, "line "+strconv.Itoa(e.Line))
	}
	if len(e.Vars) > 0 {
		notes = append(notes, "from ${"+strings.Join(e.Vars, "}, ${")+"}")
	}
	s := e.Key
	if s == "" {
		s = "the file's top level"
	}
	if len(notes) > 0 {
		s += " (" + strings.Join(notes, ", ") + ")"
	}
	return s + ": " + e.Err.Error()
}

func (e *KeyError) Unwrap() error { return e.Err }

// keyErr is the error about the value at key: format and args say what
// is wrong, and must not hold the value.
func keyErr(key, format string, args ...any) *KeyError {
	return &KeyError{Key: key, Err: fmt.Errorf(format, args...)}
}

// addrProblem is what net.SplitHostPort found wrong with an address,
// without the address it quotes ("missing port in address").
func addrProblem(err error) string {
	var ae *net.AddrError
	if errors.As(err, &ae) {
		return ae.Err
	}
	return "not host:port"
}

// valueSource is where a scalar value of the file came from.
type valueSource struct {
	line int
	vars []string
}

// sources maps the YAML path of every scalar value of a parsed file to
// where it came from.
type sources map[string]valueSource

// Annotate completes the KeyErrors in err with what c's file says of
// their keys: the line of the value, or of the first value under it, and the
// environment variables its value, or the values under it, were expanded
// from. Other errors are left as they are. It returns err.
func (c *Config) Annotate(err error) error {
	if c == nil || c.sources == nil || err == nil {
		return err
	}
	visitKeyErrors(err, func(e *KeyError) {
		if e.Line == 0 {
			e.Line = c.sources.lineOf(e.Key)
		}
		if len(e.Vars) == 0 {
			e.Vars = c.sources.varsUnder(e.Key)
		}
	})
	return err
}

// lineOf is the line of the value at key, or of the first value under it
// (a list's, a map's: command, env); 0 for none.
func (s sources) lineOf(key string) int {
	if src, ok := s[key]; ok {
		return src.line
	}
	line := 0
	for k, src := range s {
		if strings.HasPrefix(k, key) && len(k) > len(key) && (k[len(key)] == '.' || k[len(key)] == '[') && (line == 0 || src.line < line) {
			line = src.line
		}
	}
	return line
}

// varsUnder lists the variables the value at key, or a value under it,
// was expanded from.
func (s sources) varsUnder(key string) []string {
	var vars []string
	for k, src := range s {
		if k == key || strings.HasPrefix(k, key) && (k[len(key)] == '.' || k[len(key)] == '[') {
			vars = append(vars, src.vars...)
		}
	}
	return uniqueSorted(vars)
}

// visitKeyErrors calls f with every KeyError in err's tree.
func visitKeyErrors(err error, f func(*KeyError)) {
	switch x := err.(type) {
	case nil:
		return
	case *KeyError:
		f(x)
	case interface{ Unwrap() []error }:
		for _, e := range x.Unwrap() {
			visitKeyErrors(e, f)
		}
		return
	}
	visitKeyErrors(errors.Unwrap(err), f)
}

func uniqueSorted(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	slices.Sort(s)
	return slices.Compact(s)
}

// references lists the variables s refers to (${NAME}, ${NAME:-default}),
// as Expand reads them.
func references(s string) []string {
	var names []string
	for _, m := range refPattern.FindAllStringSubmatch(strings.ReplaceAll(s, "$$", "\x00"), -1) {
		names = append(names, m[1])
	}
	return uniqueSorted(names)
}

// node is one node of the file as written: its key path, and where its
// value came from.
type node struct {
	path string
	src  valueSource
	key  bool // a mapping key, not a value
}

// walkPaths calls f with every node under n and its path ("" for the
// document's root), keys before their values. Aliases are not followed.
func walkPaths(n *yaml.Node, path string, f func(n *yaml.Node, path string, key bool)) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			walkPaths(c, path, f)
		}
		return
	case yaml.MappingNode:
		f(n, path, false)
		for i := 0; i+1 < len(n.Content); i += 2 {
			child := n.Content[i].Value
			if path != "" {
				child = path + "." + child
			}
			f(n.Content[i], child, true)
			walkPaths(n.Content[i+1], child, f)
		}
	case yaml.SequenceNode:
		f(n, path, false)
		for i, c := range n.Content {
			walkPaths(c, path+"["+strconv.Itoa(i)+"]", f)
		}
	default:
		f(n, path, false)
	}
}

// sameShape reports whether a and b have the same kind and number of
// children, as a document has before and after it is re-encoded.
func sameShape(a, b *yaml.Node) bool { return a.Kind == b.Kind && len(a.Content) == len(b.Content) }

// lineIndex maps each line of the re-encoded document to the nodes of
// the file as written that start on it: written holds the nodes of the
// file (as walkPaths saw them), encoded the same document parsed from its
// re-encoding, whose lines the decoder's errors give.
func lineIndex(written, encoded *yaml.Node, seen map[*yaml.Node]node) map[int][]lineNode {
	index := map[int][]lineNode{}
	var walk func(w, e *yaml.Node)
	walk = func(w, e *yaml.Node) {
		if !sameShape(w, e) {
			return
		}
		if info, ok := seen[w]; ok {
			index[e.Line] = append(index[e.Line], lineNode{node: info, kind: e.Kind, value: e.Value})
		}
		if w.Kind == yaml.AliasNode {
			return
		}
		for i := range w.Content {
			walk(w.Content[i], e.Content[i])
		}
	}
	walk(written, encoded)
	return index
}

// lineNode is a node of the re-encoded document, as lineIndex found it.
type lineNode struct {
	node
	kind  yaml.Kind
	value string
}

var (
	decodeLine    = regexp.MustCompile(`(?s)^line (\d+): (.*)$`)
	unknownField  = regexp.MustCompile(`^field (\S+) (?:not found|already set) in type`)
	fieldProblem  = regexp.MustCompile(`^field .+ (?:not found|already set) in type [\w.]+$`)
	mappingKeyDup = regexp.MustCompile(`(?s)^mapping key .* already defined at line \d+$`)
	yamlShortTag  = regexp.MustCompile(`^!![a-z]+$`)
	goTypeName    = regexp.MustCompile(`^[\w.\[\]*{} ]+$`)
	// valueFreeFailures are the messages of yaml's decoder, outside its
	// type errors, that hold no value: anchors are names of the file as
	// written (references are expanded in values only).
	valueFreeFailures = regexp.MustCompile(`^yaml: (?:` + strings.Join([]string{
		`document contains excessive aliasing`,
		`unknown anchor '[^'\s]*' referenced`,
		`anchor '[^'\s]*' value contains itself`,
		`!!binary value contains invalid base64 data`,
		`invalid array: want \d+ elements but got \d+`,
		`map merge requires map or sequence of maps as the value`,
	}, "|") + `)$`)
)

// pick is the node of the file that a decoding error on a line of the
// re-encoded document is about.
func pick(on []lineNode, msg string) (lineNode, bool) {
	first := func(ok func(lineNode) bool) (lineNode, bool) {
		for _, n := range on {
			if ok(n) {
				return n, true
			}
		}
		return lineNode{}, false
	}
	if m := unknownField.FindStringSubmatch(msg); m != nil {
		if n, ok := first(func(n lineNode) bool { return n.key && n.value == m[1] }); ok {
			return n, true
		}
		return first(func(n lineNode) bool { return n.key })
	}
	// A mapping or a list can start on the line of the one it is in
	// ("- name: a", an anchored mapping): the innermost is the one whose
	// type was wrong.
	for _, c := range []struct {
		tag  string
		kind yaml.Kind
	}{{"!!map", yaml.MappingNode}, {"!!seq", yaml.SequenceNode}} {
		if strings.Contains(msg, c.tag) {
			for i := len(on) - 1; i >= 0; i-- {
				if !on[i].key && on[i].kind == c.kind {
					return on[i], true
				}
			}
		}
	}
	if n, ok := first(func(n lineNode) bool { return !n.key && n.kind == yaml.ScalarNode }); ok {
		return n, true
	}
	if n, ok := first(func(n lineNode) bool { return !n.key }); ok {
		return n, true
	}
	return first(func(lineNode) bool { return true })
}

// decodeErrors turns the errors of decoding the re-encoded document into
// KeyErrors naming the keys, lines and variables of the file as written,
// and no value (yaml quotes the values it cannot decode).
func decodeErrors(err error, written *yaml.Node, encodedRaw []byte, seen map[*yaml.Node]node, src sources) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return errors.New(decodeFailure(err.Error()))
	}
	var encoded yaml.Node
	index := map[int][]lineNode{}
	if yaml.Unmarshal(encodedRaw, &encoded) == nil {
		index = lineIndex(written, &encoded, seen)
	}
	var errs []error
	for _, msg := range te.Errors {
		m := decodeLine.FindStringSubmatch(msg)
		if m == nil {
			errs = append(errs, errors.New(decodeProblem(msg)))
			continue
		}
		line, _ := strconv.Atoi(m[1])
		text := decodeProblem(m[2])
		n, ok := pick(index[line], text)
		if !ok {
			errs = append(errs, errors.New(text))
			continue
		}
		errs = append(errs, &KeyError{Key: n.path, Line: n.src.line, Vars: src.varsUnder(n.path), Err: errors.New(text)})
	}
	return errors.Join(errs...)
}

// cannotDecode is what is left of a message yaml's decoder cannot be
// trusted not to quote a value in.
const cannotDecode = "cannot be decoded (the decoder's message is left out: it may quote the value)"

// decodeProblem is what one type error of yaml's decoder says is wrong,
// rebuilt from the parts of the forms it is known to take, never by
// cutting the value out of it (a value may hold the quotes that would
// end the cut early):
//
//   - "cannot unmarshal !!str `abcdefg...` into int" (yaml quotes the
//     value, or its first seven bytes) is "cannot unmarshal !!str into
//     int": the tag, then the Go type after the last " into ", which
//     follows the value;
//   - "mapping key "k" already defined at line 3" is "a key given twice";
//   - "field k not found in type config.Gateway" names a key, and stays;
//   - the Duration's own message stays.
//
// Any other form is cannotDecode.
func decodeProblem(msg string) string {
	const unmarshal = "cannot unmarshal "
	switch {
	case strings.HasPrefix(msg, unmarshal):
		rest := msg[len(unmarshal):]
		i := strings.LastIndex(rest, " into ")
		if i < 0 {
			return cannotDecode
		}
		tag, _, _ := strings.Cut(rest, " ")
		goType := rest[i+len(" into "):]
		if !yamlShortTag.MatchString(tag) {
			tag = "a value"
		}
		if !goTypeName.MatchString(goType) {
			return unmarshal + tag
		}
		return unmarshal + tag + " into " + goType
	case mappingKeyDup.MatchString(msg):
		return "a key given twice"
	case fieldProblem.MatchString(msg), msg == notADuration, msg == negativeDuration:
		return msg
	}
	return cannotDecode
}

// decodeFailure is what an error of yaml's decoder that is not a list of
// type errors says, rebuilt like decodeProblem's: "yaml: cannot decode
// !!str `value` as a !!int" (a value that does not fit its explicit tag;
// Parse names the key of one from ${VAR} before decoding) keeps its two
// tags, a known message without a value stays, anything else is
// cannotDecode.
func decodeFailure(msg string) string {
	const tagMismatch, as = "yaml: cannot decode ", " as a "
	switch {
	case strings.HasPrefix(msg, tagMismatch):
		rest := msg[len(tagMismatch):]
		got, _, _ := strings.Cut(rest, " ")
		i := strings.LastIndex(rest, as)
		if i < 0 || !yamlShortTag.MatchString(got) || !yamlShortTag.MatchString(rest[i+len(as):]) {
			return "yaml: a value does not fit its explicit tag"
		}
		return tagMismatch + "a " + got + " value" + as + rest[i+len(as):]
	case strings.HasPrefix(msg, "yaml: invalid map key: "):
		return "yaml: invalid map key: a list or a mapping cannot be a key"
	case valueFreeFailures.MatchString(msg):
		return msg
	}
	return "yaml: the expanded file " + cannotDecode
}
