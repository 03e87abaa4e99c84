package override

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
)

func hidden(v any) config.ArgumentOverride    { return config.ArgumentOverride{Hidden: true, Value: v} }
func defaulted(v any) config.ArgumentOverride { return config.ArgumentOverride{Default: v} }

func mustCompile(t testing.TB, global, server []config.ToolOverride) *Set {
	t.Helper()
	s, err := Compile(global, server)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return s
}

// view is what a compiled override does, in comparable form.
type view struct {
	Name, Title, Description string
	Annotations              map[string]string
	Hidden, Defaults         map[string]string
	Timeout                  time.Duration
	TaskSupport              string
}

func viewOf(t *Tool) view {
	v := view{Name: t.name, Timeout: t.timeout, TaskSupport: t.TaskSupport(), Annotations: map[string]string{}, Hidden: map[string]string{}, Defaults: map[string]string{}}
	if t.title != nil {
		v.Title = string(t.title)
	}
	if t.description != nil {
		v.Description = string(t.description)
	}
	for _, a := range t.annotations {
		v.Annotations[a.name] = string(a.value)
	}
	for _, a := range t.hidden {
		v.Hidden[a.name] = string(a.value)
	}
	for _, a := range t.defaults {
		v.Defaults[a.name] = string(a.value)
	}
	return v
}

func TestCompileMerge(t *testing.T) {
	global := []config.ToolOverride{
		{Backend: "tickets", Tool: "search", Name: "find", Title: "Find tickets", Description: "global",
			Annotations: map[string]any{"readOnlyHint": true, "title": "G"},
			Arguments:   map[string]config.ArgumentOverride{"tenant": hidden("acme"), "limit": defaulted(10)},
			Timeout:     config.Duration(5 * time.Second), TaskSupport: config.TaskSupportOptional},
		{Backend: "tickets", Tool: "close", Description: "only global"},
	}
	cases := []struct {
		name   string
		server []config.ToolOverride
		tool   string
		want   view
	}{
		{"global alone", nil, "search", view{Name: "find", Title: `"Find tickets"`, Description: `"global"`,
			Annotations: map[string]string{"readOnlyHint": "true", "title": `"G"`},
			Hidden:      map[string]string{"tenant": `"acme"`}, Defaults: map[string]string{"limit": "10"}, Timeout: 5 * time.Second, TaskSupport: "optional"}},
		{"server fields win, unset ones inherit", []config.ToolOverride{{Backend: "tickets", Tool: "search", Description: "server",
			Annotations: map[string]any{"title": "S", "openWorldHint": false},
			Arguments:   map[string]config.ArgumentOverride{"limit": defaulted(50), "region": hidden(map[string]any{"eu": []any{1, "x"}})},
			Timeout:     config.Duration(time.Second), TaskSupport: config.TaskSupportRequired}}, "search",
			view{Name: "find", Title: `"Find tickets"`, Description: `"server"`,
				Annotations: map[string]string{"readOnlyHint": "true", "title": `"S"`, "openWorldHint": "false"},
				Hidden:      map[string]string{"tenant": `"acme"`, "region": `{"eu":[1,"x"]}`}, Defaults: map[string]string{"limit": "50"}, Timeout: time.Second, TaskSupport: "required"}},
		{"server turns a hidden argument into a default, whole", []config.ToolOverride{{Backend: "tickets", Tool: "search",
			Arguments: map[string]config.ArgumentOverride{"tenant": defaulted("beta")}}}, "search",
			view{Name: "find", Title: `"Find tickets"`, Description: `"global"`,
				Annotations: map[string]string{"readOnlyHint": "true", "title": `"G"`},
				Hidden:      map[string]string{}, Defaults: map[string]string{"limit": "10", "tenant": `"beta"`}, Timeout: 5 * time.Second, TaskSupport: "optional"}},
		{"server-only tool", []config.ToolOverride{{Backend: "docs", Tool: "get", Name: "read", Title: "<T & \"q\">"}}, "",
			view{Name: "read", Title: `"\u003cT \u0026 \"q\"\u003e"`, Annotations: map[string]string{}, Hidden: map[string]string{}, Defaults: map[string]string{}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := mustCompile(t, global, tc.server)
			b, tool := "tickets", tc.tool
			if tool == "" {
				b, tool = "docs", "get"
			}
			got := s.Tool(b, tool)
			if got == nil {
				t.Fatalf("no override of %s.%s", b, tool)
			}
			if v := viewOf(got); !reflect.DeepEqual(v, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", v, tc.want)
			}
			// The global list is never modified by a merge.
			if len(global[0].Annotations) != 2 || len(global[0].Arguments) != 2 || !global[0].Arguments["tenant"].Hidden {
				t.Fatalf("global override mutated: %+v", global[0])
			}
			if c := s.Tool("tickets", "close"); c == nil || string(c.description) != `"only global"` {
				t.Fatalf("global-only override lost: %+v", c)
			}
			if s.Tool("tickets", "other") != nil || s.Tool("docs", "search") != nil {
				t.Fatal("an override for a tool nobody named")
			}
		})
	}
}

func TestCompileRefuses(t *testing.T) {
	cases := map[string][]config.ToolOverride{
		"no backend":         {{Tool: "x"}},
		"twice":              {{Backend: "b", Tool: "x"}, {Backend: "b", Tool: "x"}},
		"hidden no value":    {{Backend: "b", Tool: "x", Arguments: map[string]config.ArgumentOverride{"a": {Hidden: true}}}},
		"visible with value": {{Backend: "b", Tool: "x", Arguments: map[string]config.ArgumentOverride{"a": {Value: 1}}}},
		"neither":            {{Backend: "b", Tool: "x", Arguments: map[string]config.ArgumentOverride{"a": {}}}},
		"not JSON":           {{Backend: "b", Tool: "x", Arguments: map[string]config.ArgumentOverride{"a": hidden(map[any]any{1: 2})}}},
		"negative timeout":   {{Backend: "b", Tool: "x", Timeout: -1}},
		"unnamed argument":   {{Backend: "b", Tool: "x", Arguments: map[string]config.ArgumentOverride{"": hidden(1)}}},
		"task support typo":  {{Backend: "b", Tool: "x", TaskSupport: "always"}},
	}
	for name, list := range cases {
		if _, err := Compile(nil, list); err == nil {
			t.Errorf("%s: compiled", name)
		}
		if _, err := Compile(list, nil); err == nil {
			t.Errorf("%s (global): compiled", name)
		}
	}
}

// TestCompileFromYAML: values as the configuration's YAML decoder gives
// them (nested maps, lists, integers, an expanded secret) compile to JSON.
func TestCompileFromYAML(t *testing.T) {
	c, err := config.Parse([]byte(`
aggregator:
  toolOverrides:
    - backend: tickets
      tool: search
      name: find
      timeout: 2s
      annotations: {readOnlyHint: true}
      arguments:
        apiKey: {hidden: true, value: "${TICKETS_KEY}"}
        filter: {hidden: true, value: {status: [open, pending], max: 3}}
        limit: {default: 20}
`), func(k string) (string, bool) {
		return map[string]string{"TICKETS_KEY": "s3cr3t"}[k], k == "TICKETS_KEY"
	})
	if err != nil {
		t.Fatal(err)
	}
	s := mustCompile(t, c.Aggregator.ToolOverrides, nil)
	tool := s.Tool("tickets", "search")
	got, err := tool.Arguments([]byte(`{"q":"printer"}`))
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"q":"printer","apiKey":"s3cr3t","filter":{"max":3,"status":["open","pending"]},"limit":20}`
	if string(got) != want || tool.Timeout() != 2*time.Second || tool.Name("search") != "find" {
		t.Fatalf("arguments %s (want %s), timeout %v, name %q", got, want, tool.Timeout(), tool.Name("search"))
	}
}

func TestNilSetAndTool(t *testing.T) {
	var s *Set
	tool := s.Tool("b", "t")
	if tool != nil || s.Len() != 0 {
		t.Fatal("a nil set overrides")
	}
	raw := []byte(` {"name":"t", "x":1} `)
	if def, err := tool.Definition(raw); err != nil || string(def) != string(raw) {
		t.Fatalf("nil Definition = %s, %v", def, err)
	}
	args := []byte(`{"a": 1}`)
	if got, err := tool.Arguments(args); err != nil || string(got) != string(args) {
		t.Fatalf("nil Arguments = %s, %v", got, err)
	}
	if tool.Name("t") != "t" || tool.Timeout() != 0 || tool.Undeclared(raw) != nil {
		t.Fatal("a nil tool overrides")
	}
	// An override without arguments leaves the call's arguments alone
	// (and refuses what is not an object, as every tool does:
	// TestArgumentsOfEveryTool).
	bare := mustCompile(t, []config.ToolOverride{{Backend: "b", Tool: "t", Title: "x"}}, nil).Tool("b", "t")
	if got, err := bare.Arguments(args); err != nil || &got[0] != &args[0] {
		t.Fatalf("override without arguments: %s, %v", got, err)
	}
	if bare.Name("t") != "t" {
		t.Fatal("an override without a name renamed")
	}
}

func TestHiddenArgumentError(t *testing.T) {
	err := error(&HiddenArgumentError{Argument: "apiKey"})
	if !errors.Is(err, ErrHiddenArgument) {
		t.Fatal("does not match ErrHiddenArgument")
	}
	var h *HiddenArgumentError
	if !errors.As(err, &h) || h.Argument != "apiKey" {
		t.Fatal("errors.As")
	}
	if _, err := json.Marshal(err.Error()); err != nil {
		t.Fatal(err)
	}
}

// A removed backend's client is kept for its longest call: the longest
// timeout a set gives one of its tools, a server's over the global ones.
func TestLongestTimeout(t *testing.T) {
	set := mustCompile(t, []config.ToolOverride{
		{Backend: "b", Tool: "quick", Timeout: config.Duration(time.Second)},
		{Backend: "b", Tool: "slow", Timeout: config.Duration(time.Minute)},
		{Backend: "c", Tool: "slower", Timeout: config.Duration(time.Hour)},
	}, []config.ToolOverride{{Backend: "b", Tool: "quick", Timeout: config.Duration(2 * time.Minute)}})
	for backend, want := range map[string]time.Duration{"b": 2 * time.Minute, "c": time.Hour, "d": 0} {
		if got := set.LongestTimeout(backend); got != want {
			t.Errorf("LongestTimeout(%s) = %s, want %s", backend, got, want)
		}
	}
	if got := (*Set)(nil).LongestTimeout("b"); got != 0 {
		t.Errorf("a nil set: %s", got)
	}
}
