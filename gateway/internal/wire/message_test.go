package wire

import (
	"strings"
	"testing"
)

// TestParseRefusesRepeatedMembers: a message naming a member twice in any
// of its objects is read two ways (rawjson.Get and the gateway's checks
// take the first, encoding/json, go-sdk and backends the last), so it is
// read by none: -32600 when the envelope repeats one (a response's result
// or error included), -32602 when its params do, at any depth, arguments
// and _meta included. Names compare as they decode; case differs.
func TestParseRefusesRepeatedMembers(t *testing.T) {
	const caps = `"_meta":{"io.modelcontextprotocol/clientCapabilities":`
	cases := []struct {
		name, body string
		code       int
		id         string // the id the error keeps
	}{
		{"method twice", `{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{}}`, CodeInvalidRequest, "1"},
		{"id twice", `{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/list"}`, CodeInvalidRequest, ""},
		{"params twice", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"a"},"params":{"name":"b"}}`, CodeInvalidRequest, "3"},
		{"a response's result", `{"jsonrpc":"2.0","id":4,"result":{"action":"accept","action":"decline"}}`, CodeInvalidRequest, "4"},
		{"tool name twice", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"a","name":"b"}}`, CodeInvalidParams, "5"},
		{"extensions twice", `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{` + caps + `{"extensions":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}},"name":"a"}}`, CodeInvalidParams, "6"},
		{"an extension twice", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{` + caps + `{"extensions":{"io.modelcontextprotocol/tasks":null,"io.modelcontextprotocol/tasks":{}}}},"name":"a"}}`, CodeInvalidParams, "7"},
		{"an argument, escaped", `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"a","arguments":{"to":"me","\u0074o":"them"}}}`, CodeInvalidParams, `"a"`},
		{"in an array of arguments", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"a","arguments":{"rows":[{"k":1},{"k":1,"k":2}]}}}`, CodeInvalidParams, "8"},
	}
	for _, tc := range cases {
		_, id, rerr := Parse([]byte(tc.body))
		if rerr == nil || rerr.Code != tc.code {
			t.Errorf("%s: %v; want code %d", tc.name, rerr, tc.code)
			continue
		}
		if string(id) != tc.id {
			t.Errorf("%s: id %s, want %q", tc.name, id, tc.id)
		}
		if !strings.Contains(rerr.Message, "repeats") {
			t.Errorf("%s: message %q does not say what repeats", tc.name, rerr.Message)
		}
	}
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"a":{"k":1},"b":{"k":2},"rows":[{"k":1},{"k":2}]}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"k":1,"K":2}}}`,
	} {
		if _, _, rerr := Parse([]byte(body)); rerr != nil {
			t.Errorf("%s: %v", body, rerr)
		}
	}
}

// TestParseReturnsWhatItReadOfARefusal: a message refused once its body
// is read as a JSON object comes back as far as it was read (its id as
// sent, its method, its params), so that the edge can record a refused
// request in the trail; what repeats is not returned as read. A body
// that is no JSON object comes back as nothing.
func TestParseReturnsWhatItReadOfARefusal(t *testing.T) {
	cases := []struct {
		name, body, method, tool string
		request                  bool
	}{
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"a"}}`, "tools/call", "a", true},
		{"a notification", `{"jsonrpc":"1.0","method":"tools/call","params":{"name":"a"}}`, "tools/call", "a", false},
		{"params an array", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":["a"]}`, "tools/call", "", true},
		{"an object id", `{"jsonrpc":"2.0","id":{},"method":"prompts/get","params":{"name":"p"}}`, "prompts/get", "p", true},
		{"the method not a string", `{"jsonrpc":"2.0","id":1,"method":7,"params":{"name":"a"}}`, "", "a", true},
		{"the method twice", `{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"tools/list","params":{"name":"a"}}`, "", "a", true},
		{"the id twice", `{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"a"}}`, "tools/call", "a", true},
		{"the name twice", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}`, "tools/call", "", true},
		{"params twice", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"},"params":{"name":"b"}}`, "tools/call", "", true},
		{"an argument twice", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":1,"x":2}}}`, "tools/call", "a", true},
	}
	for _, tc := range cases {
		msg, _, rerr := Parse([]byte(tc.body))
		if rerr == nil || msg == nil {
			t.Errorf("%s: %v, %v; want a refusal with what was read", tc.name, msg, rerr)
			continue
		}
		tool, _ := msg.Params.String("name")
		if msg.Method != tc.method || tool != tc.tool || msg.IsNotification() == tc.request {
			t.Errorf("%s: read method %q, name %q, notification %v", tc.name, msg.Method, tool, msg.IsNotification())
		}
	}
	for _, body := range []string{`[{"jsonrpc":"2.0","id":1,"method":"tools/call"}]`, `{"jsonrpc":"2.0","id":1,"method":"tools/call",`, `42`, "{\"method\":\"\xff\"}"} {
		if msg, _, rerr := Parse([]byte(body)); rerr == nil || msg != nil {
			t.Errorf("%q: %v, %v; want a refusal and nothing read", body, msg, rerr)
		}
	}
}

// BenchmarkParse parses a Modern tools/call as a client sends it: with
// its _meta and small arguments (about 500 bytes), and with arguments of
// about 8 KiB of rows.
func BenchmarkParse(b *testing.B) {
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}},"extensions":{"io.modelcontextprotocol/tasks":{}}},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1.0.0"},"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`
	row := `{"id":12345,"name":"a row of the table","tags":["x","y","z"],"owner":{"login":"alice","id":7},"open":true},`
	sizes := []struct {
		name, args string
	}{
		{"small", `{"owner":"acme","repo":"switchboard","title":"A bug","labels":["bug"]}`},
		{"8KiB", `{"rows":[` + strings.Repeat(row, 80) + `{}]}`},
	}
	for _, s := range sizes {
		body := []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{` + meta + `,"name":"github_create_issue","arguments":` + s.args + `}}`)
		if _, _, rerr := Parse(body); rerr != nil {
			b.Fatal(rerr)
		}
		b.Run(s.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, rerr := Parse(body); rerr != nil {
					b.Fatal(rerr)
				}
			}
		})
	}
}
