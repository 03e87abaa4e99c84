package wire

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

var info = json.RawMessage(`{"name":"sb","version":"1"}`)

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not JSON: %s: %v", b, err)
	}
	return m
}

// TestShapeKeepsUnknownMembers: members go-sdk does not model, odd keys
// and nested values are copied byte for byte.
func TestShapeKeepsUnknownMembers(t *testing.T) {
	in := `{"content":[{"type":"text","text":"hi","vendorBlockField":{"x":[1,2]}}], "vendorField" : {"a":"}\"{"},"ünïcode\u00e9":1,"isError":false}`
	out, err := Shape([]byte(in), Shaping{Era: mcpspec.EraModern, ServerInfo: info})
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{`"content":[{"type":"text","text":"hi","vendorBlockField":{"x":[1,2]}}]`, `"vendorField":{"a":"}\"{"}`, `"ünïcode\u00e9":1`, `"isError":false`} {
		if !strings.Contains(string(out), part) {
			t.Errorf("%s lost %s", out, part)
		}
	}
	m := decode(t, out)
	if m["resultType"] != "complete" || m["ttlMs"] != nil || m["cacheScope"] != nil {
		t.Errorf("modern members: %s", out)
	}
	if !reflect.DeepEqual(m["_meta"], map[string]any{mcpspec.MetaServerInfo: map[string]any{"name": "sb", "version": "1"}}) {
		t.Errorf("_meta: %s", out)
	}
}

// A result's own resultType is never passed on: a backend's
// completion/complete answered input_required (which only tools/call,
// resources/read and prompts/get may return) or a value no revision
// defines, and the gateway sent it to the client as it was.
func TestShapeDecidesTheResultType(t *testing.T) {
	for _, own := range []string{`"input_required"`, `"bogus"`, `"task"`, `7`} {
		out, err := Shape([]byte(`{"completion":{"values":["w"]},"resultType":`+own+`}`), Shaping{Era: mcpspec.EraModern, ServerInfo: info})
		if err != nil {
			t.Fatal(err)
		}
		if m := decode(t, out); m["resultType"] != "complete" || strings.Count(string(out), "resultType") != 1 {
			t.Errorf("a result of resultType %s became %s", own, out)
		}
	}
}

func TestShapeModernAndLegacy(t *testing.T) {
	backend := `{"resultType":"complete","ttlMs":5000,"cacheScope":"public","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"backend"},"trace":"t1"},"contents":[]}`
	out, err := Shape([]byte(backend), Shaping{Era: mcpspec.EraModern, ServerInfo: info, Cacheable: true, TTLms: 60000})
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, out)
	meta := m["_meta"].(map[string]any)
	// The backend's smaller ttlMs wins, the scope is private, and the
	// serverInfo is the gateway's while other _meta keys stay.
	if m["ttlMs"] != 5000.0 || m["cacheScope"] != "private" || meta["trace"] != "t1" || meta[mcpspec.MetaServerInfo].(map[string]any)["name"] != "sb" {
		t.Errorf("modern: %s", out)
	}
	for in, want := range map[string]float64{
		`{"ttlMs":0}`: 0, `{"ttlMs":-5}`: 0, `{"ttlMs":"5000"}`: 0, `{"ttlMs":null}`: 0, `{"ttlMs":1e3}`: 1000,
		`{"ttlMs":2.9}`: 2, `{"ttlMs":1e300}`: 60000, `{"ttlMs":90000}`: 60000, `{"contents":[]}`: 0,
	} {
		out, err := Shape([]byte(in), Shaping{Era: mcpspec.EraModern, ServerInfo: info, Cacheable: true, TTLms: 60000, FromBackend: true})
		if err != nil || decode(t, out)["ttlMs"] != want {
			t.Errorf("a backend's %s: %s %v, want ttlMs %v", in, out, err, want)
		}
	}
	// The gateway's own result (no ttlMs) gets the gateway's TTL.
	if own, _ := Shape([]byte(`{"capabilities":{}}`), Shaping{Era: mcpspec.EraModern, Cacheable: true, TTLms: 60000}); decode(t, own)["ttlMs"] != 60000.0 {
		t.Errorf("the gateway's own result: %s", own)
	}
	out, err = Shape([]byte(backend), Shaping{Era: mcpspec.EraLegacy, ServerInfo: info, Cacheable: true, TTLms: 60000})
	if err != nil {
		t.Fatal(err)
	}
	m = decode(t, out)
	if _, ok := m["resultType"]; ok {
		t.Errorf("legacy keeps resultType: %s", out)
	}
	if m["ttlMs"] != nil || m["cacheScope"] != nil || !reflect.DeepEqual(m["_meta"], map[string]any{"trace": "t1"}) {
		t.Errorf("legacy: %s", out)
	}
	out, _ = Shape([]byte(`{"_meta":{"io.modelcontextprotocol/serverInfo":{}},"content":[]}`), Shaping{Era: mcpspec.EraLegacy})
	if string(out) != `{"content":[]}` {
		t.Errorf("legacy with only serverInfo in _meta: %s", out)
	}
}

func TestShapeSetDropAndResultType(t *testing.T) {
	out, err := Shape([]byte(`{"resultType":"input_required","content":null,"requestState":"raw","inputRequests":{}}`),
		Shaping{Era: mcpspec.EraModern, ServerInfo: info, ResultType: "input_required", Drop: []string{"content"}, Set: map[string]json.RawMessage{"requestState": json.RawMessage(`"sealed"`)}})
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, out)
	if _, ok := m["content"]; ok || m["requestState"] != "sealed" || m["resultType"] != "input_required" {
		t.Errorf("%s", out)
	}
}

func TestShapeRefusesWhatIsNotAnObject(t *testing.T) {
	for _, in := range []string{``, `[]`, `"x"`, `{`, `{"a"}`, `{"a":1,}`, `{"a":1}x`, `{"a":"unterminated}`, `{"a":[1,2}`, `{a:1}`} {
		if _, err := Shape([]byte(in), Shaping{Era: mcpspec.EraModern}); err == nil {
			t.Errorf("Shape(%q) accepted", in)
		}
	}
	if v, ok := Member([]byte(`{"a":{"b":[1,{"c":"}"}]},"resultType":"input_required"}`), "resultType"); !ok || string(v) != `"input_required"` {
		t.Errorf("Member = %s %v", v, ok)
	}
}

func TestPage(t *testing.T) {
	items := []json.RawMessage{json.RawMessage(`{"name":"a","x-vendor":1}`), json.RawMessage(`{"name":"b"}`)}
	modern := decode(t, Page("tools", items, "c1", Shaping{Era: mcpspec.EraModern, ServerInfo: info, Cacheable: true, TTLms: 1500}))
	if len(modern["tools"].([]any)) != 2 || modern["nextCursor"] != "c1" || modern["ttlMs"] != 1500.0 || modern["cacheScope"] != "private" || modern["resultType"] != "complete" {
		t.Errorf("modern page: %v", modern)
	}
	legacy := decode(t, Page("prompts", nil, "", Shaping{Era: mcpspec.EraLegacy, ServerInfo: info, Cacheable: true, TTLms: 1500}))
	if !reflect.DeepEqual(legacy, map[string]any{"prompts": []any{}}) {
		t.Errorf("legacy last page: %v", legacy)
	}
}

// FuzzShape: whatever the text, Shape never panics, and what it accepts
// and returns is a JSON object.
func FuzzShape(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"_meta":{"x":1},"ttlMs":3}`, `{"a":"\u00e9\"","b":[{}]}`, `{"_meta":null}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) {
			return
		}
		for _, era := range []mcpspec.Era{mcpspec.EraModern, mcpspec.EraLegacy} {
			out, err := Shape([]byte(in), Shaping{Era: era, ServerInfo: info, Cacheable: true, TTLms: 10})
			if err != nil {
				continue
			}
			var m map[string]json.RawMessage
			if json.Unmarshal(out, &m) != nil {
				t.Fatalf("Shape(%q) = %q, not a JSON object", in, out)
			}
		}
	})
}

// A backend's result passed on byte for byte may hold line breaks between
// its tokens; its SSE event stays one data line (every other line would
// be no field of the event, and a client's reader fails on it), and its
// data is the same JSON.
func TestSSEEventOfAResultWithLineBreaks(t *testing.T) {
	shaped, err := Shape([]byte("{\"content\":[\r\n {\"type\":\"text\",\"text\":\"a\\nb\"}\n]}"), Shaping{})
	if err != nil {
		t.Fatal(err)
	}
	msg := Response([]byte("1"), shaped, nil)
	ev := string(SSEEvent(msg))
	lines := strings.Split(strings.TrimSuffix(ev, "\n\n"), "\n")
	if len(lines) != 2 || lines[0] != "event: message" || !strings.HasPrefix(lines[1], "data: ") {
		t.Fatalf("event %q: want an event line and one data line", ev)
	}
	var got, want any
	if err := json.Unmarshal([]byte(strings.TrimPrefix(lines[1], "data: ")), &got); err != nil {
		t.Fatalf("data %q: %v", lines[1], err)
	}
	_ = json.Unmarshal(msg, &want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("data %v, want %v", got, want)
	}
}
