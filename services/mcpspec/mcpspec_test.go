package mcpspec_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		name string
		sig  mcpspec.Signals
		want mcpspec.Era
	}{
		{"GET in a session", mcpspec.Signals{HTTPMethod: "GET", SessionID: "s"}, mcpspec.EraLegacy},
		{"GET without a session", mcpspec.Signals{HTTPMethod: "GET"}, mcpspec.EraUnknown},
		{"DELETE in a session", mcpspec.Signals{HTTPMethod: "DELETE", SessionID: "s"}, mcpspec.EraLegacy},
		{"Modern _meta", mcpspec.Signals{HTTPMethod: "POST", Method: "tools/list", MetaVersion: json.RawMessage(`"2026-07-28"`)}, mcpspec.EraModern},
		{"Modern _meta wins over a session", mcpspec.Signals{HTTPMethod: "POST", Method: "tools/list", SessionID: "s", MetaVersion: json.RawMessage(`"2026-07-28"`)}, mcpspec.EraModern},
		{"an older revision in _meta in a session", mcpspec.Signals{HTTPMethod: "POST", Method: "tools/list", SessionID: "s", MetaVersion: json.RawMessage(`"2025-11-25"`)}, mcpspec.EraLegacy},
		{"an older revision in _meta without a session", mcpspec.Signals{HTTPMethod: "POST", Method: "tools/list", MetaVersion: json.RawMessage(`"2025-11-25"`)}, mcpspec.EraModern},
		{"a version that is no string in a session", mcpspec.Signals{HTTPMethod: "POST", Method: "tools/list", SessionID: "s", MetaVersion: json.RawMessage(`7`)}, mcpspec.EraModern},
		{"Modern _meta wins over initialize", mcpspec.Signals{HTTPMethod: "POST", Method: "initialize", MetaVersion: json.RawMessage(`"2026-07-28"`)}, mcpspec.EraModern},
		{"initialize", mcpspec.Signals{HTTPMethod: "POST", Method: "initialize"}, mcpspec.EraLegacy},
		{"initialize under a Modern header", mcpspec.Signals{HTTPMethod: "POST", Method: "initialize", HeaderVersion: mcpspec.Modern}, mcpspec.EraLegacy},
		{"session under a Modern header", mcpspec.Signals{HTTPMethod: "POST", Method: "tools/list", SessionID: "s", HeaderVersion: mcpspec.Modern}, mcpspec.EraLegacy},
		{"Modern header without _meta", mcpspec.Signals{HTTPMethod: "POST", Method: "tools/list", HeaderVersion: mcpspec.Modern}, mcpspec.EraModern},
		{"a later revision's header", mcpspec.Signals{HTTPMethod: "POST", Method: "tools/list", HeaderVersion: "2027-01-01"}, mcpspec.EraModern},
		{"Legacy header, no session", mcpspec.Signals{HTTPMethod: "POST", Method: "tools/list", HeaderVersion: mcpspec.Legacy}, mcpspec.EraUnknown},
		{"ping without a session", mcpspec.Signals{HTTPMethod: "POST", Method: "ping"}, mcpspec.EraUnknown},
		{"unknown header version", mcpspec.Signals{HTTPMethod: "POST", Method: "tools/list", HeaderVersion: "1900-01-01"}, mcpspec.EraUnknown},
	}
	for _, tc := range cases {
		if got := mcpspec.Classify(tc.sig); got != tc.want {
			t.Errorf("%s: Classify = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestMethodSet(t *testing.T) {
	for _, m := range []string{"initialize", "ping", "logging/setLevel", "resources/subscribe"} {
		if mcpspec.Defined(mcpspec.EraModern, m) || !mcpspec.Defined(mcpspec.EraLegacy, m) {
			t.Errorf("%s must be Legacy only", m)
		}
	}
	for _, m := range []string{"server/discover", "subscriptions/listen"} {
		if !mcpspec.Defined(mcpspec.EraModern, m) || mcpspec.Defined(mcpspec.EraLegacy, m) {
			t.Errorf("%s must be Modern only", m)
		}
	}
	if mcpspec.Defined(mcpspec.EraModern, "tools/unknown") || mcpspec.Defined(mcpspec.EraUnknown, "tools/list") {
		t.Error("unknown method or era must not be defined")
	}
	if mcpspec.Methods["resources/read"].Target != "uri" || mcpspec.Methods["tools/call"].Target != "name" {
		t.Error("Mcp-Name targets")
	}
}

// TestTaskMethodsPerEra: Modern has tasks/get, tasks/update and
// tasks/cancel, each naming its task in Mcp-Name; Legacy has tasks/get,
// tasks/list, tasks/cancel and tasks/result.
func TestTaskMethodsPerEra(t *testing.T) {
	for method, want := range map[string][2]bool{
		"tasks/get": {true, true}, "tasks/update": {true, false}, "tasks/cancel": {true, true},
		"tasks/list": {false, true}, "tasks/result": {false, true}, "tools/call": {true, true}, "ping": {false, true},
	} {
		if got := [2]bool{mcpspec.Defined(mcpspec.EraModern, method), mcpspec.Defined(mcpspec.EraLegacy, method)}; got != want {
			t.Errorf("%s defined (Modern, Legacy) = %v, want %v", method, got, want)
		}
		if task := mcpspec.Methods[method].Task; task != strings.HasPrefix(method, "tasks/") {
			t.Errorf("%s: Task is %v", method, task)
		}
	}
	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		if mcpspec.Methods[m].Target != "taskId" {
			t.Errorf("%s's Mcp-Name target is %q", m, mcpspec.Methods[m].Target)
		}
	}
}

// A tool is the model's unless its MCP App visibility is a list without
// "model".
func TestModelVisible(t *testing.T) {
	for def, want := range map[string]bool{
		`{"name":"t"}`: true,
		`{"name":"t","_meta":{"ui":{"resourceUri":"ui://a"}}}`:       true,
		`{"name":"t","_meta":{"ui":{"visibility":["model","app"]}}}`: true,
		`{"name":"t","_meta":{"ui":{"visibility":["app","model"]}}}`: true,
		`{"name":"t","_meta":{"ui":{"visibility":["model"]}}}`:       true,
		`{"name":"t","_meta":{"ui":{"visibility":["app"]}}}`:         false,
		`{"name":"t","_meta":{"ui":{"visibility":[]}}}`:              false,
		`{"name":"t","_meta":{"ui":{"visibility":["\u0061pp"]}}}`:    false,
		`{"name":"t","_meta":{"ui":{"visibility":"app"}}}`:           true,
		`{"name":"t","_meta":{"ui":{"visibility":["m\u006fdel"]}}}`:  true,
	} {
		if got := mcpspec.ModelVisible([]byte(def)); got != want {
			t.Errorf("%s: %v, want %v", def, got, want)
		}
	}
}
