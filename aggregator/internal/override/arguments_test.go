package override

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/services/config"
)

func argumentsTool(t testing.TB) *Tool {
	return mustCompile(t, []config.ToolOverride{{Backend: "b", Tool: "s",
		Arguments: map[string]config.ArgumentOverride{"tenant": hidden("acme"), "limit": defaulted(10), "mode": defaulted("fast")}}}, nil).Tool("b", "s")
}

func TestArguments(t *testing.T) {
	tool := argumentsTool(t)
	cases := []struct {
		name, in, want string
		err            error
	}{
		{"absent", ``, `{"tenant":"acme","limit":10,"mode":"fast"}`, nil},
		{"null", ` null `, `{"tenant":"acme","limit":10,"mode":"fast"}`, nil},
		{"empty object", ` { } `, `{"tenant":"acme","limit":10,"mode":"fast"}`, nil},
		{"client bytes kept, injected after", `{ "q" : "a,}" ,"n":[1, 2] }`, `{ "q" : "a,}" ,"n":[1, 2],"tenant":"acme","limit":10,"mode":"fast"}`, nil},
		{"a defaulted argument keeps the client's value", `{"limit":3}`, `{"limit":3,"tenant":"acme","mode":"fast"}`, nil},
		{"the client's null is its value", `{"mode":null,"limit":3}`, `{"mode":null,"limit":3,"tenant":"acme"}`, nil},
		{"hidden set", `{"q":1,"tenant":"evil"}`, "", ErrHiddenArgument},
		{"hidden set to null", `{"tenant":null}`, "", ErrHiddenArgument},
		{"hidden set under an escaped name", `{"ten\u0061nt":"evil"}`, "", ErrHiddenArgument},
		{"array", `[1]`, "", ErrArgumentsNotObject},
		{"string", `"x"`, "", ErrArgumentsNotObject},
		{"number", `1`, "", ErrArgumentsNotObject},
		{"invalid JSON", `{"q":tru}`, "", ErrArgumentsNotObject},
		{"truncated", `{"q":1`, "", ErrArgumentsNotObject},
		{"trailing text", `{"q":1}{}`, "", ErrArgumentsNotObject},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tool.Arguments([]byte(tc.in))
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("error %v, want %v", err, tc.err)
				}
				if strings.Contains(fmt.Sprint(err), "acme") || strings.Contains(fmt.Sprint(err), "evil") {
					t.Fatalf("error %q tells a value", err)
				}
				return
			}
			if err != nil || string(got) != tc.want || !json.Valid(got) {
				t.Fatalf("got %s, %v; want %s", got, err, tc.want)
			}
		})
	}
	var h *HiddenArgumentError
	if _, err := tool.Arguments([]byte(`{"tenant":1}`)); !errors.As(err, &h) || h.Argument != "tenant" || !strings.Contains(err.Error(), `"tenant"`) {
		t.Fatalf("hidden error %v", err)
	}
}

// TestArgumentsNothingToAdd: only defaults, all set by the client: the
// client's bytes themselves go on.
func TestArgumentsNothingToAdd(t *testing.T) {
	tool := mustCompile(t, []config.ToolOverride{{Backend: "b", Tool: "s", Arguments: map[string]config.ArgumentOverride{"limit": defaulted(10)}}}, nil).Tool("b", "s")
	in := []byte(`{"limit": 1}`)
	got, err := tool.Arguments(in)
	if err != nil || &got[0] != &in[0] {
		t.Fatalf("got %s, %v: not the client's bytes", got, err)
	}
}

// TestArgumentsMany: past indexFrom arguments the lookup is a map, and
// past 64 defaults the record of what the client set is a slice; both
// answer as the small case does.
func TestArgumentsMany(t *testing.T) {
	args := map[string]config.ArgumentOverride{}
	for i := range 100 {
		args[fmt.Sprintf("d%03d", i)] = defaulted(i)
	}
	args["secret"] = hidden(true)
	global := []config.ToolOverride{{Backend: "b", Tool: "s", Arguments: args}}
	tool := mustCompile(t, global, nil).Tool("b", "s")
	if tool.index == nil {
		t.Fatal("no index for 101 arguments")
	}
	got, err := tool.Arguments([]byte(`{"d007":"mine","d099":null}`))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(got, &m); err != nil || len(m) != 101 || m["d007"] != "mine" || m["d099"] != nil || m["d050"] != float64(50) || m["secret"] != true {
		t.Fatalf("arguments %s (%v)", got, err)
	}
	if _, err := tool.Arguments([]byte(`{"secret":false}`)); !errors.Is(err, ErrHiddenArgument) {
		t.Fatalf("hidden through the index: %v", err)
	}
}

// Every tool's arguments are checked alike: a tool with no override (a
// nil Tool) and one whose override adds no argument (a rename) refuse
// what is not an object as one that injects does. The rename once let
// an array through to the backend.
func TestArgumentsOfEveryTool(t *testing.T) {
	renamed := mustCompile(t, []config.ToolOverride{{Backend: "b", Tool: "s", Name: "t"}}, nil).Tool("b", "s")
	for name, tool := range map[string]*Tool{"no override": nil, "a rename": renamed} {
		for _, in := range []string{`[1]`, `"x"`, `{"q":tru}`, `{"q":1}{}`} {
			if got, err := tool.Arguments([]byte(in)); !errors.Is(err, ErrArgumentsNotObject) {
				t.Errorf("%s: Arguments(%s) = %s, %v; want ErrArgumentsNotObject", name, in, got, err)
			}
		}
		for in, want := range map[string]string{``: ``, ` null `: ``, `{"q":1}`: `{"q":1}`} {
			if got, err := tool.Arguments([]byte(in)); err != nil || string(got) != want {
				t.Errorf("%s: Arguments(%q) = %q, %v; want %q", name, in, got, err, want)
			}
		}
	}
}

// FuzzArguments: on any input Arguments does not panic; it refuses what is
// neither absent nor an object, refuses an object that sets the hidden
// argument, and otherwise answers an object holding the client's members,
// the hidden value, and each default the client did not set.
func FuzzArguments(f *testing.F) {
	for _, s := range []string{``, `null`, `{}`, `{"q":"x"}`, `{"limit":1}`, `{"tenant":1}`, `{"ten\u0061nt":1}`, `[]`, `{"a":}`, `{"a":"\"}`, ` {"limit":null , "q":[{}]} `} {
		f.Add(s)
	}
	tool := argumentsTool(f)
	f.Fuzz(func(t *testing.T, in string) {
		got, err := tool.Arguments([]byte(in))
		trimmed := strings.Trim(in, " \t\r\n") // JSON's whitespace
		if trimmed == "" || trimmed == "null" {
			trimmed = "{}"
		}
		var client map[string]json.RawMessage
		if json.Unmarshal([]byte(trimmed), &client) != nil || client == nil {
			if !errors.Is(err, ErrArgumentsNotObject) {
				t.Fatalf("Arguments(%q) = %s, %v; want ErrArgumentsNotObject", in, got, err)
			}
			return
		}
		if _, set := client["tenant"]; set {
			if !errors.Is(err, ErrHiddenArgument) {
				t.Fatalf("Arguments(%q) = %s, %v; want ErrHiddenArgument", in, got, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Arguments(%q): %v", in, err)
		}
		var out map[string]json.RawMessage
		if err := json.Unmarshal(got, &out); err != nil {
			t.Fatalf("Arguments(%q) = %s: %v", in, got, err)
		}
		if string(out["tenant"]) != `"acme"` {
			t.Fatalf("Arguments(%q) = %s: hidden value missing", in, got)
		}
		for name, def := range map[string]string{"limit": "10", "mode": `"fast"`} {
			want, set := client[name]
			if !set {
				want = json.RawMessage(def)
			}
			if string(out[name]) != string(want) {
				t.Fatalf("Arguments(%q) = %s: %s is %s, want %s", in, got, name, out[name], want)
			}
		}
		for k, v := range client {
			if string(out[k]) != string(v) {
				t.Fatalf("Arguments(%q) = %s: client member %q changed", in, got, k)
			}
		}
	})
}

// BenchmarkArguments: a typical call, a 200-byte argument object, through
// an override with one hidden and one defaulted argument.
func BenchmarkArguments(b *testing.B) {
	tool := mustCompile(b, []config.ToolOverride{{Backend: "tickets", Tool: "search",
		Arguments: map[string]config.ArgumentOverride{"tenant": hidden("acme-corp"), "limit": defaulted(20)}}}, nil).Tool("tickets", "search")
	in := []byte(`{"query":"printer on the third floor does not print double-sided","status":["open","pending"],"assignee":"j.doe@example.com","sort":"updated","order":"desc","fields":["id","title","status","updated"]}`)
	if len(in) < 190 || len(in) > 210 {
		b.Fatalf("argument object is %d bytes", len(in))
	}
	b.Run("override", func(b *testing.B) {
		b.SetBytes(int64(len(in)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := tool.Arguments(in); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The check every call pays today without an override (the call
	// path's isObject); Arguments includes it.
	b.Run("validation-alone", func(b *testing.B) {
		b.SetBytes(int64(len(in)))
		b.ReportAllocs()
		for b.Loop() {
			if !json.Valid(in) {
				b.Fatal("invalid")
			}
		}
	})
}
