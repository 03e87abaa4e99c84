// Package override applies the configuration's tool overrides
// (aggregator.toolOverrides, and a virtual server's servers[].toolOverrides
// on top of them): a tool's advertised name, title, description and
// annotations, arguments hidden with a fixed value or defaulted, and a
// per-tool timeout.
//
// It is pure: Compile turns the configuration into a Set once (every value
// already JSON text), the catalog rewrites each listed definition with
// Definition, and the call path shapes each call's arguments with
// Arguments, which splices into the client's bytes instead of decoding
// them.
package override

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/rawjson"
)

// ErrHiddenArgument: a call set an argument an override hides. The error
// Arguments returns is a *HiddenArgumentError, which matches it.
var ErrHiddenArgument = errors.New("the call sets an argument the configuration fixes")

// HiddenArgumentError names the hidden argument a call set. Its text is
// client-safe: it names the argument (which the client sent) and never its
// configured value.
type HiddenArgumentError struct {
	Argument string
}

func (e *HiddenArgumentError) Error() string {
	return fmt.Sprintf("argument %q is fixed by the server's configuration; a call may not set it", e.Argument)
}

// Unwrap makes errors.Is(err, ErrHiddenArgument) hold.
func (e *HiddenArgumentError) Unwrap() error { return ErrHiddenArgument }

// ErrArgumentsNotObject: a call's arguments are neither absent nor one JSON
// object. The text is the call path's own for the same refusal.
var ErrArgumentsNotObject = errors.New("arguments_json must be a JSON object")

// ErrDefinitionNotObject: a listed tool definition is not one JSON object.
var ErrDefinitionNotObject = errors.New("tool definition is not a JSON object")

// maxArguments bounds the arguments of one merged override: a global and a
// server override may each fix config.MaxArgumentsPerOverride.
const maxArguments = 2 * config.MaxArgumentsPerOverride

// Set is the compiled overrides of one view: the global ones, or a
// server's over the global ones. A nil *Set overrides nothing.
type Set struct {
	tools map[key]*Tool
}

type key struct{ backend, tool string }

// Tool returns the override of the tool the backend lists as tool, or nil.
func (s *Set) Tool(backend, tool string) *Tool {
	if s == nil {
		return nil
	}
	return s.tools[key{backend, tool}]
}

// Each calls fn with the backend and the listed name of every overridden
// tool.
func (s *Set) Each(fn func(backend, tool string)) {
	if s == nil {
		return
	}
	for k := range s.tools {
		fn(k.backend, k.tool)
	}
}

// Len is the number of overridden tools.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.tools)
}

// LongestTimeout is the longest timeout the set gives a tool of backend
// (0 for none): how long a call routed to it may run.
func (s *Set) LongestTimeout(backend string) time.Duration {
	if s == nil {
		return 0
	}
	var longest time.Duration
	for k, t := range s.tools {
		if k.backend == backend {
			longest = max(longest, t.timeout)
		}
	}
	return longest
}

// HiddenStrings are the strings the set's hidden arguments inject into
// the calls of backend's tools: every string inside each value, at any
// depth (object member names aside). They may be secrets, which the
// backend's client cuts out of what the backend sends back.
func (s *Set) HiddenStrings(backend string) []string {
	if s == nil {
		return nil
	}
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			out = append(out, v)
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	for k, t := range s.tools {
		if k.backend != backend {
			continue
		}
		for _, a := range t.hidden {
			var v any
			if json.Unmarshal(a.value, &v) == nil {
				walk(v)
			}
		}
	}
	return out
}

// Tool is the compiled override of one tool. It is never modified after
// Compile, so any number of calls may use it at once. A nil *Tool
// overrides nothing: every method then returns its input.
type Tool struct {
	name string
	// title and description are JSON strings, nil when not overridden.
	title, description []byte
	// annotations are name-sorted members, values as JSON text.
	annotations []member
	// hidden and defaults are name-sorted.
	hidden, defaults []argument
	// index finds an argument by name when there are many: >0 is
	// defaults[i-1], <0 is hidden[-i-1]. nil for few (linear scan).
	index   map[string]int
	timeout time.Duration
	// taskSupport is config.TaskSupportOptional or Required, or "" (the
	// tool never runs as a task).
	taskSupport string
	// taskAfterInput: questions asked at once are answered inline, and
	// the call becomes a task in a round that does not ask.
	taskAfterInput bool
	// ui changes the tool's MCP App; nil leaves it.
	ui *config.UIOverride
}

type member struct {
	name  string
	value []byte
}

// argument is a hidden or defaulted argument.
type argument struct {
	name  string
	value []byte // JSON text
	// member is `"name":value`, ready to splice into an arguments object.
	member []byte
}

// indexFrom is the argument count above which a lookup goes through a map.
const indexFrom = 8

// Compile merges a server's overrides over the global ones and compiles
// them. A tool both lists override is overridden field by field: a string or
// timeout the server sets wins; annotations merge by annotation and
// arguments by argument name (the server's override of an argument
// replaces the global one whole: hidden, value and default together).
// Either list may be nil. config.ValidateServers has checked the fields;
// Compile still refuses what it cannot compile.
func Compile(global, server []config.ToolOverride) (*Set, error) {
	merged := map[key]config.ToolOverride{}
	var order []key
	for _, list := range [][]config.ToolOverride{global, server} {
		seen := map[key]bool{}
		for _, o := range list {
			k := key{o.Backend, o.Tool}
			if o.Backend == "" || o.Tool == "" {
				return nil, errors.New("a tool override needs a backend and a tool")
			}
			if seen[k] {
				return nil, fmt.Errorf("%s.%s is overridden twice", o.Backend, o.Tool)
			}
			seen[k] = true
			base, ok := merged[k]
			if !ok {
				order = append(order, k)
				merged[k] = o
				continue
			}
			merged[k] = merge(base, o)
		}
	}
	s := &Set{tools: make(map[key]*Tool, len(merged))}
	for _, k := range order {
		t, err := compile(merged[k])
		if err != nil {
			return nil, fmt.Errorf("tool override of %s.%s: %w", k.backend, k.tool, err)
		}
		s.tools[k] = t
	}
	return s, nil
}

// merge lays top over base field by field.
func merge(base, top config.ToolOverride) config.ToolOverride {
	out := base
	if top.Name != "" {
		out.Name = top.Name
	}
	if top.Title != "" {
		out.Title = top.Title
	}
	if top.Description != "" {
		out.Description = top.Description
	}
	if top.Timeout != 0 {
		out.Timeout = top.Timeout
	}
	if top.TaskSupport != "" {
		out.TaskSupport = top.TaskSupport
	}
	if top.UI != nil {
		out.UI = top.UI
	}
	out.TaskAfterInput = out.TaskAfterInput || top.TaskAfterInput
	if len(top.Annotations) > 0 {
		out.Annotations = maps.Clone(base.Annotations)
		if out.Annotations == nil {
			out.Annotations = map[string]any{}
		}
		maps.Copy(out.Annotations, top.Annotations)
	}
	if len(top.Arguments) > 0 {
		out.Arguments = maps.Clone(base.Arguments)
		if out.Arguments == nil {
			out.Arguments = map[string]config.ArgumentOverride{}
		}
		maps.Copy(out.Arguments, top.Arguments)
	}
	return out
}

func compile(o config.ToolOverride) (*Tool, error) {
	if o.Timeout < 0 {
		return nil, errors.New("timeout must be positive")
	}
	t := &Tool{name: o.Name, timeout: time.Duration(o.Timeout), ui: o.UI}
	switch o.TaskSupport {
	case "", config.TaskSupportForbidden:
	case config.TaskSupportOptional, config.TaskSupportRequired:
		t.taskSupport, t.taskAfterInput = o.TaskSupport, o.TaskAfterInput
	default:
		return nil, fmt.Errorf("taskSupport %q is not one of forbidden, optional, required", o.TaskSupport)
	}
	if o.Title != "" {
		t.title = rawjson.AppendString(nil, o.Title)
	}
	if o.Description != "" {
		t.description = rawjson.AppendString(nil, o.Description)
	}
	for _, name := range slices.Sorted(maps.Keys(o.Annotations)) {
		v, err := json.Marshal(o.Annotations[name])
		if err != nil {
			return nil, fmt.Errorf("annotation %q: %w", name, err)
		}
		t.annotations = append(t.annotations, member{name, v})
	}
	if len(o.Arguments) > maxArguments {
		return nil, fmt.Errorf("%d arguments, at most %d", len(o.Arguments), maxArguments)
	}
	for _, name := range slices.Sorted(maps.Keys(o.Arguments)) {
		a := o.Arguments[name]
		if name == "" {
			return nil, errors.New("an argument needs a name")
		}
		v := a.Default
		if a.Hidden {
			v = a.Value
		}
		if v == nil || (a.Hidden && a.Default != nil) || (!a.Hidden && a.Value != nil) {
			return nil, fmt.Errorf("argument %q: hidden with a value, or visible with a default", name)
		}
		text, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("argument %q: %w", name, err)
		}
		m := rawjson.AppendString(nil, name)
		m = append(append(m, ':'), text...)
		arg := argument{name: name, value: text, member: m}
		if a.Hidden {
			t.hidden = append(t.hidden, arg)
		} else {
			t.defaults = append(t.defaults, arg)
		}
	}
	if len(o.Arguments) > indexFrom {
		t.index = make(map[string]int, len(o.Arguments))
		for i, a := range t.defaults {
			t.index[a.name] = i + 1
		}
		for i, a := range t.hidden {
			t.index[a.name] = -i - 1
		}
	}
	return t, nil
}

// Name is the tool's name before the naming rule: the override's, or
// original. The naming rule (conflictResolution) applies to it as to any
// backend name; calls still reach the backend under original.
func (t *Tool) Name(original string) string {
	if t == nil || t.name == "" {
		return original
	}
	return t.name
}

// Timeout bounds a call of the tool; 0 leaves the backend's timeout.
func (t *Tool) Timeout() time.Duration {
	if t == nil {
		return 0
	}
	return t.timeout
}

// TaskSupport is config.TaskSupportOptional or config.TaskSupportRequired
// when a call of the tool may become a task, else "".
func (t *Tool) TaskSupport() string {
	if t == nil {
		return ""
	}
	return t.taskSupport
}

// TaskAfterInput reports whether a call of the tool answers the questions
// it asks at once inline, becoming a task only in a round that does not.
func (t *Tool) TaskAfterInput() bool { return t != nil && t.taskAfterInput }

// lookup finds the argument named name: a defaulted one (i >= 0, hidden
// false), a hidden one, or none (i < 0).
func (t *Tool) lookup(name []byte) (i int, hidden bool) {
	if t.index != nil {
		v, ok := t.index[string(name)]
		switch {
		case !ok:
			return -1, false
		case v > 0:
			return v - 1, false
		default:
			return -v - 1, true
		}
	}
	for i := range t.hidden {
		if string(name) == t.hidden[i].name {
			return i, true
		}
	}
	for i := range t.defaults {
		if string(name) == t.defaults[i].name {
			return i, false
		}
	}
	return -1, false
}
