package override

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/services/config"
)

func TestDefinition(t *testing.T) {
	args := map[string]config.ArgumentOverride{"tenant": hidden("acme"), "limit": defaulted(10), "mode": defaulted("fast")}
	cases := []struct {
		name string
		ov   config.ToolOverride
		in   string
		want string
	}{
		{"rename", config.ToolOverride{Name: "find"},
			`{"name":"search","x-vendor":{"k":[1, 2]},"inputSchema":{"type":"object"}}`,
			`{"name":"find","x-vendor":{"k":[1, 2]},"inputSchema":{"type":"object"}}`},
		{"title and description replaced, or added", config.ToolOverride{Title: "Find", Description: "Finds \"tickets\"\n"},
			`{"name":"s","description":"old","_meta":{"a":1}}`,
			`{"name":"s","description":"Finds \"tickets\"\n","_meta":{"a":1},"title":"Find"}`},
		{"annotations merged member by member", config.ToolOverride{Annotations: map[string]any{"readOnlyHint": true, "title": "T"}},
			`{"name":"s","annotations":{"destructiveHint":true, "readOnlyHint":false,"x":{"y":[]}}}`,
			`{"name":"s","annotations":{"destructiveHint":true,"readOnlyHint":true,"x":{"y":[]},"title":"T"}}`},
		{"annotations created", config.ToolOverride{Annotations: map[string]any{"openWorldHint": false}},
			`{"name":"s"}`,
			`{"name":"s","annotations":{"openWorldHint":false}}`},
		{"null annotations replaced", config.ToolOverride{Annotations: map[string]any{"openWorldHint": false}},
			`{"name":"s","annotations":null}`,
			`{"name":"s","annotations":{"openWorldHint":false}}`},
		{"hidden leaves properties and required; defaults set and leave required", config.ToolOverride{Arguments: args},
			`{"name":"s","inputSchema":{"type":"object","properties":{"q":{"type":"string"},"tenant":{"type":"string"},"limit":{"type":"integer","default":5,"minimum":1},"mode":true},"required":["q","tenant","limit"],"additionalProperties":false},"outputSchema":{"type":"object"}}`,
			`{"name":"s","inputSchema":{"type":"object","properties":{"q":{"type":"string"},"limit":{"type":"integer","default":10,"minimum":1},"mode":{"default":"fast"}},"required":["q"],"additionalProperties":false},"outputSchema":{"type":"object"}}`},
		{"escaped names are the same names", config.ToolOverride{Arguments: args},
			`{"name":"s","inputSchema":{"properties":{"ten\u0061nt":{},"q":{}},"required":["\u0074enant","q"]}}`,
			`{"name":"s","inputSchema":{"properties":{"q":{}},"required":["q"]}}`},
		{"a required list left empty is removed", config.ToolOverride{Arguments: args},
			`{"name":"s","inputSchema":{"type":"object","required":["tenant"],"properties":{"tenant":{"type":"string"}}}}`,
			`{"name":"s","inputSchema":{"type":"object","properties":{}}}`},
		{"undeclared arguments invent no property", config.ToolOverride{Arguments: args},
			`{"name":"s","inputSchema":{"type":"object","properties":{"q":{"type":"string"}}}}`,
			`{"name":"s","inputSchema":{"type":"object","properties":{"q":{"type":"string"}}}}`},
		{"a property schema that is no object keeps no default", config.ToolOverride{Arguments: args},
			`{"name":"s","inputSchema":{"properties":{"limit":false,"mode":"junk"},"required":"limit"}}`,
			`{"name":"s","inputSchema":{"properties":{"limit":false,"mode":"junk"},"required":"limit"}}`},
		{"non-object schema left as it is", config.ToolOverride{Arguments: args},
			`{"name":"s","inputSchema":true}`,
			`{"name":"s","inputSchema":true}`},
		{"task support added to execution", config.ToolOverride{TaskSupport: config.TaskSupportRequired},
			`{"name":"s","execution":{"x":1,"taskSupport":"forbidden"}}`,
			`{"name":"s","execution":{"x":1,"taskSupport":"required"}}`},
		{"app removed, the rest of _meta kept", config.ToolOverride{UI: &config.UIOverride{Remove: true}},
			`{"name":"s","_meta":{"a":1,"ui":{"resourceUri":"ui://x/p"},"ui/resourceUri":"ui://x/p"}}`,
			`{"name":"s","_meta":{"a":1}}`},
		{"no app to remove", config.ToolOverride{UI: &config.UIOverride{Remove: true}},
			`{"name":"s"}`,
			`{"name":"s"}`},
		{"app page and visibility replaced, csp-like members kept", config.ToolOverride{UI: &config.UIOverride{ResourceURI: "ui://x/q", Visibility: []string{"app"}}},
			`{"name":"s","_meta":{"ui/resourceUri":"ui://x/p","ui":{"resourceUri":"ui://x/p","visibility":["model","app"],"v":{"w":1}}}}`,
			`{"name":"s","_meta":{"ui":{"resourceUri":"ui://x/q","visibility":["app"],"v":{"w":1}}}}`},
		{"app given to a plain tool", config.ToolOverride{UI: &config.UIOverride{ResourceURI: "ui://x/q"}},
			`{"name":"s"}`,
			`{"name":"s","_meta":{"ui":{"resourceUri":"ui://x/q"}}}`},
		{"execution created for task support", config.ToolOverride{TaskSupport: config.TaskSupportOptional},
			`{"name":"s"}`,
			`{"name":"s","execution":{"taskSupport":"optional"}}`},
		{"forbidden task support leaves execution", config.ToolOverride{TaskSupport: config.TaskSupportForbidden},
			`{"name":"s","execution":{"taskSupport":"optional"}}`,
			`{"name":"s","execution":{"taskSupport":"optional"}}`},
		{"absent schema", config.ToolOverride{Arguments: args, Title: "x"},
			`{"name":"s"}`,
			`{"name":"s","title":"x"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.ov.Backend, tc.ov.Tool = "b", "s"
			tool := mustCompile(t, []config.ToolOverride{tc.ov}, nil).Tool("b", "s")
			got, err := tool.Definition([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			if !json.Valid(got) {
				t.Fatalf("not JSON: %s", got)
			}
		})
	}
}

func TestDefinitionRefusesNonObjects(t *testing.T) {
	tool := mustCompile(t, []config.ToolOverride{{Backend: "b", Tool: "s", Title: "x"}}, nil).Tool("b", "s")
	for _, bad := range []string{``, `[]`, `"x"`, `{"a":1`, `{"a":tru}`, `{"a":1}{}`, `null`} {
		if _, err := tool.Definition([]byte(bad)); !errors.Is(err, ErrDefinitionNotObject) {
			t.Errorf("Definition(%q) error %v", bad, err)
		}
	}
}

func TestUndeclaredAndFields(t *testing.T) {
	tool := mustCompile(t, []config.ToolOverride{{Backend: "b", Tool: "s", Title: "New", Annotations: map[string]any{"readOnlyHint": true},
		Arguments: map[string]config.ArgumentOverride{"tenant": hidden("acme"), "limit": defaulted(10), "zone": defaulted("eu"), "q": defaulted("")}}}, nil).Tool("b", "s")
	raw := []byte(`{"name":"s","description":"d","inputSchema":{"properties":{"q":{"type":"string"}},"required":["q"]}}`)
	if got := tool.Undeclared(raw); !reflect.DeepEqual(got, []string{"limit", "tenant", "zone"}) {
		t.Fatalf("Undeclared = %q", got)
	}
	def, err := tool.Definition(raw)
	if err != nil {
		t.Fatal(err)
	}
	f := FieldsOf(def)
	if f.Title != "New" || f.Description != "d" || string(f.InputSchema) != `{"properties":{"q":{"type":"string","default":""}}}` || string(f.Annotations) != `{"readOnlyHint":true}` {
		t.Fatalf("fields %+v (%s, %s)", f, f.InputSchema, f.Annotations)
	}
	if f := FieldsOf([]byte(`{"outputSchema":{"type":"object"},"title":"first","title":"second","outputSchema":null}`)); f.Title != "first" || string(f.OutputSchema) != `{"type":"object"}` {
		t.Fatalf("fields %+v: not the first member of each name", f)
	}
	if f := FieldsOf([]byte(`{"annotations":null,"title":3}`)); f.Annotations != nil || f.Title != "" || f.InputSchema != nil {
		t.Fatalf("fields of a sparse definition: %+v", f)
	}
}

// FuzzDefinition: on any input, Definition does not panic, refuses what is
// not a JSON object, and turns every object into a JSON object that keeps
// every member it does not own as it was.
func FuzzDefinition(f *testing.F) {
	for _, s := range []string{
		`{"name":"s","inputSchema":{"type":"object","properties":{"tenant":{},"limit":{"default":1},"q":true},"required":["tenant","limit","q"]}}`,
		`{"name":"s","annotations":{"title":"x"},"inputSchema":{"properties":{"ten\u0061nt":false},"required":[1,{"a":"tenant"}]}}`,
		`{"inputSchema":{"properties":[],"required":{}}}`, `{"inputSchema":"x","annotations":[]}`, `{}`, `[]`, `{"a":"\"}`, `{"name":"a","name":"b"}`,
	} {
		f.Add(s)
	}
	tool := mustCompile(f, []config.ToolOverride{{Backend: "b", Tool: "s", Name: "n", Title: "t", Description: "d",
		Annotations: map[string]any{"readOnlyHint": true},
		Arguments:   map[string]config.ArgumentOverride{"tenant": hidden("acme"), "limit": defaulted(10), "q": defaulted("x")}}}, nil).Tool("b", "s")
	f.Fuzz(func(t *testing.T, in string) {
		def, err := tool.Definition([]byte(in))
		var want map[string]json.RawMessage
		if json.Unmarshal([]byte(in), &want) != nil || want == nil {
			if err == nil {
				t.Fatalf("Definition(%q) accepted what is not an object", in)
			}
			return
		}
		if err != nil {
			t.Fatalf("Definition(%q): %v", in, err)
		}
		var got map[string]json.RawMessage
		if err := json.Unmarshal(def, &got); err != nil {
			t.Fatalf("Definition(%q) = %s: not an object: %v", in, def, err)
		}
		if string(got["name"]) != `"n"` || string(got["title"]) != `"t"` {
			t.Fatalf("Definition(%q) = %s: name or title not set", in, def)
		}
		_ = tool.Undeclared([]byte(in))
		_ = FieldsOf(def)
		for k := range want {
			switch k {
			case "name", "title", "description", "annotations", "inputSchema":
				continue
			}
			if _, ok := got[k]; !ok {
				t.Fatalf("Definition(%q) = %s lost member %q", in, def, k)
			}
		}
		if !strings.Contains(in, `\`) && !hasDuplicates(in) {
			// Without escapes or repeated names the members are plain
			// subslices: every other member is kept byte for byte.
			for k, v := range want {
				switch k {
				case "name", "title", "description", "annotations", "inputSchema":
					continue
				}
				if string(got[k]) != string(v) {
					t.Fatalf("Definition(%q) member %q = %s, want %s", in, k, got[k], v)
				}
			}
		}
	})
}

// hasDuplicates reports whether a JSON object's top level repeats a name
// (encoding/json keeps the last, the rewrite the first).
func hasDuplicates(in string) bool {
	dec := json.NewDecoder(strings.NewReader(in))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		k, _ := tok.(string)
		if seen[k] {
			return true
		}
		seen[k] = true
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return false
		}
	}
	return false
}
