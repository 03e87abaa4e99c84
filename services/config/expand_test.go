package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// The type of a value expanded from ${VAR} is decided by the field it
// lands in, never by what the variable's text looks like to YAML: a text
// field (a string, or an any-typed value such as a hidden argument's)
// gets the text exactly, quoted or not; a number, bool or duration field
// reads the text as YAML reads a bare value of the file.

// trickyTexts are values YAML would read as something else than their
// text when written bare.
var trickyTexts = []string{"null", "~", "Null", "0123", "0o17", "0x1F", "1e3", "1_000", ".inf", "-.5", "true", "no", "on",
	"[a, b]", "{a: b}", "- x", "a: b", "#x", "&a", "*a", "!!int 5", "<<", "'quoted'", "\"dq\"", " padded "}

func TestExpandedTextStaysText(t *testing.T) {
	const file = `serviceAuth:
  credentials:
  - name: g
    token: ${V}
    groups:
    - ${V}
    - "${V}"
gateway:
  aggregator: {address: "127.0.0.1:1", token: "${V}"}
  console: {operatorKeys: ['${V}']}
aggregator:
  backends:
  - name: a
    url: http://x
    headers:
      X-Key: ${V}
      X-Quoted: "${V}"
      X-Block: |-
        ${V}
  toolOverrides:
  - backend: a
    tool: t
    annotations:
      title: ${V}
    arguments:
      plain:
        hidden: true
        value: ${V}
      quoted: {hidden: true, value: "${V}"}
      nested:
        default:
          k:
          - ${V}
`
	for _, v := range trickyTexts {
		c, err := Parse([]byte(file), env(map[string]string{"V": v}))
		if err != nil {
			t.Errorf("%q: %v", v, err)
			continue
		}
		o := c.Aggregator.ToolOverrides[0]
		at := func(list []string, i int) any {
			if i < len(list) {
				return list[i]
			}
			return "<missing>"
		}
		nested := any("<missing>")
		if m, ok := o.Arguments["nested"].Default.(map[string]any); ok {
			if l, ok := m["k"].([]any); ok && len(l) == 1 {
				nested = l[0]
			}
		}
		got := map[string]any{
			"token":             c.ServiceAuth.Credentials[0].Token,
			"groups[0]":         at(c.ServiceAuth.Credentials[0].Groups, 0),
			"groups[1]":         at(c.ServiceAuth.Credentials[0].Groups, 1),
			"quoted token":      c.Gateway.Aggregator.Token,
			"operatorKeys[0]":   at(c.Gateway.Console.OperatorKeys, 0),
			"header":            c.Aggregator.Backends[0].Headers["X-Key"],
			"quoted header":     c.Aggregator.Backends[0].Headers["X-Quoted"],
			"block header":      c.Aggregator.Backends[0].Headers["X-Block"],
			"annotation":        o.Annotations["title"],
			"hidden value":      o.Arguments["plain"].Value,
			"quoted value":      o.Arguments["quoted"].Value,
			"nested default[0]": nested,
		}
		for where, g := range got {
			if g != v {
				t.Errorf("%q in %s became %#v", v, where, g)
			}
		}
	}
}

// An unquoted reference that expands to nothing is an empty value, as
// if nothing were written there: no entry in a list, no value in an
// any-typed field, an empty string. Quoted, it is the empty text.
func TestExpandedEmpty(t *testing.T) {
	c, err := Parse([]byte(`ops:
  hosts:
  - ${E}
  - a.example
  - "${E}"
gateway:
  aggregator:
    address: "127.0.0.1:1"
    token: ${E}
aggregator:
  toolOverrides:
  - backend: a
    tool: t
    arguments:
      plain:
        value: ${E}
      quoted: {value: "${E}"}
`), env(map[string]string{"E": ""}))
	if err != nil {
		t.Fatal(err)
	}
	if h := c.Ops.Hosts; len(h) != 2 || h[0] != "a.example" || h[1] != "" {
		t.Errorf("hosts %q, want [a.example \"\"]", h)
	}
	if c.Gateway.Aggregator.Token != "" {
		t.Errorf("token %q", c.Gateway.Aggregator.Token)
	}
	args := c.Aggregator.ToolOverrides[0].Arguments
	if args["plain"].Value != nil || args["quoted"].Value != "" {
		t.Errorf("values %#v, %#v: want nil and \"\"", args["plain"].Value, args["quoted"].Value)
	}
}

// A mapping key expanded from a variable is its text too.
func TestExpandedKeyStaysText(t *testing.T) {
	for _, v := range []string{"null", "0123", "true"} {
		c, err := Parse([]byte("aggregator:\n  backends:\n  - name: a\n    url: http://x\n    headers:\n      ${V}: x\n"), env(map[string]string{"V": v}))
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		if h := c.Aggregator.Backends[0].Headers; h[v] != "x" || len(h) != 1 {
			t.Errorf("key %q became %v", v, h)
		}
	}
}

// In a field that is not text, the expanded value is read as the type
// the field is, quoted or not, as before.
func TestExpandedTypedFields(t *testing.T) {
	c, err := Parse([]byte(`gateway:
  http:
    maxBodyBytes: ${N}
  optimizer:
    enabled: ${B}
    limit: "${N2}"
  timeouts:
    request: ${D}
telemetry:
  sampleRatio: ${F}
ops: {pprof: "${B}"}
aggregator:
  toolOverrides:
  - {backend: a, tool: t, arguments: {n: {hidden: true, value: !!int "${N2}"}}}
`), env(map[string]string{"N": "1048576", "N2": "12", "B": "true", "D": "45s", "F": "0.25"}))
	if err != nil {
		t.Fatal(err)
	}
	g := c.Gateway
	if g.HTTP.MaxBodyBytes != 1048576 || !g.Optimizer.Enabled || g.Optimizer.Limit != 12 || time.Duration(g.Timeouts.Request) != 45*time.Second ||
		c.Telemetry.SampleRatio == nil || *c.Telemetry.SampleRatio != 0.25 || !c.Ops.Pprof {
		t.Fatalf("typed fields: %+v %+v %+v %v %v", g.HTTP, g.Optimizer, g.Timeouts, c.Telemetry.SampleRatio, c.Ops.Pprof)
	}
	// An explicit tag is the way to a typed value in an any-typed field.
	if v := c.Aggregator.ToolOverrides[0].Arguments["n"].Value; !reflect.DeepEqual(v, 12) {
		t.Fatalf("!!int value: %#v", v)
	}
	// An empty variable in a typed field is an unset one, as before.
	c, err = Parse([]byte("gateway:\n  http:\n    maxBodyBytes: ${N}\n  timeouts:\n    request: ${N}\nops:\n  pprof: ${N}\n"), env(map[string]string{"N": ""}))
	if err != nil || c.Gateway.HTTP.MaxBodyBytes != 0 || c.Gateway.Timeouts.Request != 0 || c.Ops.Pprof {
		t.Fatalf("empty variable in typed fields: %v %+v", err, c)
	}
}

// Tool-override annotations are a known schema: title is text, the hints
// are booleans. A hint from ${VAR} is read as a bool field reads it, quoted
// or not, so that `readOnlyHint: ${RO}` with RO=true is the boolean true
// (as it was before values from variables were typed by their field), and
// a value that is no boolean is refused naming the key and the variable.
func TestExpandedAnnotationHints(t *testing.T) {
	const file = `aggregator:
  listen: ":1"
  backends:
  - {name: a, url: "http://a"}
  toolOverrides:
  - backend: a
    tool: t
    annotations:
      title: ${T}
      readOnlyHint: ${RO}
      destructiveHint: "${NO}"
      idempotentHint: ${RO}
      openWorldHint: ${NO}
`
	c, err := Parse([]byte(file), env(map[string]string{"T": "true", "RO": "true", "NO": "false"}))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"title": "true", "readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}
	if got := c.Aggregator.ToolOverrides[0].Annotations; !reflect.DeepEqual(got, want) {
		t.Fatalf("annotations %#v, want %#v", got, want)
	}
	if err := c.ValidateAggregator(); err != nil {
		t.Fatalf("annotations from variables refused: %v", err)
	}

	c, err = Parse([]byte(file), env(map[string]string{"T": "x", "RO": "s3cr3t", "NO": "false"}))
	if err == nil {
		err = c.ValidateAggregator()
	}
	if err == nil || !strings.Contains(err.Error(), "aggregator.toolOverrides[0].annotations.readOnlyHint (line 10, from ${RO}): must be a bool") || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("a hint that is no boolean: %v", err)
	}
}

// A backend's URLFromEnvironment are the values the environment wrote
// into its URL: not a default written in the file, nor an empty value,
// nor what another key was expanded from.
func TestBackendURLFromEnvironment(t *testing.T) {
	c, err := Parse([]byte(`aggregator:
  backends:
  - name: zap
    url: https://mcp.example.com/api/${ZAP_KEY}/mcp?v=${VERSION:-2}&t=${EMPTY}
    headers: {X-Other: "${OTHER}"}
  - name: plain
    url: https://mcp.example.com/mcp
`), env(map[string]string{"ZAP_KEY": "k3y-of-zap", "EMPTY": "", "OTHER": "other-secret"}))
	if err != nil {
		t.Fatal(err)
	}
	b := c.Aggregator.Backends
	if !slices.Equal(b[0].URLFromEnvironment, []string{"k3y-of-zap"}) || len(b[1].URLFromEnvironment) != 0 {
		t.Fatalf("from the environment %q and %q, want [k3y-of-zap] and none", b[0].URLFromEnvironment, b[1].URLFromEnvironment)
	}
	if b[0].URL != "https://mcp.example.com/api/k3y-of-zap/mcp?v=2&t=" {
		t.Fatalf("url %q", b[0].URL)
	}
	// A URL reached through a YAML alias has its values too, and a file
	// that writes the same URL from the environment instead of as text
	// is a change of the backends (what is redacted changes).
	aliased := `aggregator:
  backends:
  - {name: a, url: &u "https://mcp.example.com/api/${ZAP_KEY}/mcp"}
  - {name: b, url: *u}
`
	c, err = Parse([]byte(aliased), env(map[string]string{"ZAP_KEY": "k3y-of-zap"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range c.Aggregator.Backends {
		if !slices.Equal(b.URLFromEnvironment, []string{"k3y-of-zap"}) {
			t.Fatalf("backend %s: from the environment %q, want [k3y-of-zap]", b.Name, b.URLFromEnvironment)
		}
	}
	literal, err := Parse([]byte(strings.ReplaceAll(aliased, "${ZAP_KEY}", "k3y-of-zap")), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := Changed(literal, c); !slices.Equal(got, []string{"aggregator.backends"}) {
		t.Fatalf("changed %q, want [aggregator.backends]", got)
	}
}
