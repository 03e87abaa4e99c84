package e2e

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// refusalSpec serves a tool that answers, one that asks its client to
// confirm first (a multi-round-trip request with a requestState), a
// resource and a prompt.
const refusalSpec = `
tools:
  - {name: lookup, description: Look up an order by its number., behaviour: echo}
  - {name: pay, description: Pay an order., behaviour: confirm}
resources:
  - {uri: "doc://readme", name: readme, text: "read me"}
prompts:
  - {name: greet, description: Greets someone., arguments: [{name: who, required: true}], text: "hello"}
`

const refusalKey = "refusal-key-" + "5e6f5e6f5e6f5e6f"

// refusalMeta is a Modern _meta whose client can answer an elicitation.
const refusalMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
	`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}},"io.modelcontextprotocol/clientInfo":{"name":"refusals","version":"0"}}`

// refusalReply is one answer of the gateway.
type refusalReply struct {
	status int
	Result map[string]json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (r refusalReply) String() string {
	if r.Error != nil {
		return fmt.Sprintf("HTTP %d, error %d %q", r.status, r.Error.Code, r.Error.Message)
	}
	b, _ := json.Marshal(r.Result)
	return fmt.Sprintf("HTTP %d, result %.300s", r.status, b)
}

// refusalPost sends one JSON-RPC message with a trace id of its own (the
// gateway trusts the client's traceparent here), so the trail's events of
// this very request can be told from the others'. header holds the
// request's headers; a "" value leaves one out.
func refusalPost(t *testing.T, url string, header map[string]string, body string) (traceID string, reply refusalReply) {
	t.Helper()
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		t.Fatal(err)
	}
	traceID = hex.EncodeToString(id)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	for k, v := range header {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	raw = mcpspec.LastMessage(resp.Header.Get("Content-Type"), raw)
	reply.status = resp.StatusCode
	_ = json.Unmarshal(raw, &reply) // a 401 is no JSON-RPC answer
	return traceID, reply
}

// modernHeader is what a Modern client of alice sends for method on the
// item name; extra are name, value pairs that replace or ("" value)
// leave out a header.
func modernHeader(method, name string, extra ...string) map[string]string {
	h := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Authorization": "Bearer " + refusalKey, "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method, "Mcp-Name": name}
	for i := 0; i+1 < len(extra); i += 2 {
		h[extra[i]] = extra[i+1]
	}
	return h
}

func modernBody(method, params string) string {
	if params != "" {
		params = "," + params
	}
	return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{` + refusalMeta + params + `}}`
}

// TestAuditGatewayRefusals: through the real processes, a tools/call,
// resources/read, prompts/get, completion/complete or resources/subscribe
// (and the optimizer's call_tool) that the gateway refuses before asking
// the aggregator or the indexer is in the trail, once, as the gateway's
// event (a find_tool without a description is the indexer's): the principal,
// the item as the client named it (cut to the table's bound, never the
// megabyte the client sent), and invalid, or denied for a forged or
// replayed requestState. A call the aggregator answered, refused there
// or not, has the aggregator's one event and no other; a request that
// fails authentication has none.
func TestAuditGatewayRefusals(t *testing.T) {
	trail := filepath.Join(t.TempDir(), "audit.jsonl")
	c := harness.Start(t, harness.Options{
		Backends: []harness.Backend{{Name: "shop", Spec: refusalSpec}},
		Configure: func(cfg *config.Config) {
			cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: refusalKey, Subject: "alice", Groups: []string{"support"}}}}
			cfg.Gateway.HTTP.TrustClientTraceparent = true
			cfg.Audit = config.Audit{Sink: config.AuditFile, File: trail}
		},
	})
	raw, optimized := c.MCPURL, c.MCPURL+"/optimized"

	// want is the one event each request must have: by trace id.
	type event struct {
		what    string
		service string
		kind    audit.Kind
		outcome audit.Outcome
		name    string // the tool, resource or prompt
		session bool   // a Legacy session's digest
	}
	want := map[string]event{}
	unrecorded := map[string]string{}
	refused := func(what string, kind audit.Kind, name string, outcome audit.Outcome, url string, header map[string]string, body string) {
		t.Helper()
		trace, r := refusalPost(t, url, header, body)
		if r.Error == nil && string(r.Result["isError"]) != "true" {
			t.Fatalf("%s: %s, want a refusal", what, r)
		}
		want[trace] = event{what, "gateway", kind, outcome, name, header["Mcp-Session-Id"] != ""}
		t.Logf("%s: %s (trace %s)", what, r, trace)
	}
	served := func(what string, kind audit.Kind, name string, outcome audit.Outcome, url string, header map[string]string, body string) refusalReply {
		t.Helper()
		trace, r := refusalPost(t, url, header, body)
		want[trace] = event{what, "aggregator", kind, outcome, name, false}
		t.Logf("%s: %s (trace %s)", what, r, trace)
		return r
	}

	// Calls that reach the aggregator: its event, and no other.
	if r := served("a normal call", audit.KindToolCall, "shop_lookup", audit.OutcomeOK, raw, modernHeader("tools/call", "shop_lookup"),
		modernBody("tools/call", `"name":"shop_lookup","arguments":{"order":"A-1"}`)); r.Error != nil || string(r.Result["isError"]) == "true" {
		t.Fatalf("a normal call: %s", r)
	}
	if r := served("an unknown tool", audit.KindToolCall, "shop_nothing", audit.OutcomeNotFound, raw, modernHeader("tools/call", "shop_nothing"),
		modernBody("tools/call", `"name":"shop_nothing","arguments":{}`)); r.Error == nil {
		t.Fatalf("an unknown tool: %s", r)
	}

	if r := served("a completion", audit.KindCompletion, "shop_greet", audit.OutcomeOK, raw, modernHeader("completion/complete", ""),
		modernBody("completion/complete", `"ref":{"type":"ref/prompt","name":"shop_greet"},"argument":{"name":"who","value":"a"}`)); r.Error != nil {
		t.Fatalf("a completion: %s", r)
	}

	// Refused by the gateway: malformed params and headers.
	refused("Mcp-Name disagreeing with the body", audit.KindToolCall, "shop_lookup", audit.OutcomeInvalid, raw,
		modernHeader("tools/call", "shop_pay"), modernBody("tools/call", `"name":"shop_lookup","arguments":{"order":"A-2"}`))
	refused("arguments not an object", audit.KindToolCall, "shop_lookup", audit.OutcomeInvalid, raw,
		modernHeader("tools/call", "shop_lookup"), modernBody("tools/call", `"name":"shop_lookup","arguments":["A-3"]`))
	refused("no name", audit.KindToolCall, "", audit.OutcomeInvalid, raw,
		modernHeader("tools/call", ""), modernBody("tools/call", `"arguments":{"order":"A-4"}`))
	refused("a name that is no string", audit.KindToolCall, "", audit.OutcomeInvalid, raw,
		modernHeader("tools/call", ""), modernBody("tools/call", `"name":42,"arguments":{}`))
	refused("a resource URI that is no string", audit.KindResourceRead, "", audit.OutcomeInvalid, raw,
		modernHeader("resources/read", ""), modernBody("resources/read", `"uri":7`))
	refused("prompt arguments that are not strings", audit.KindPromptGet, "shop_greet", audit.OutcomeInvalid, raw,
		modernHeader("prompts/get", "shop_greet"), modernBody("prompts/get", `"name":"shop_greet","arguments":{"who":5}`))
	refused("a completion without argument", audit.KindCompletion, "shop_greet", audit.OutcomeInvalid, raw,
		modernHeader("completion/complete", ""), modernBody("completion/complete", `"ref":{"type":"ref/prompt","name":"shop_greet"}`))
	refused("a read whose Mcp-Name disagrees", audit.KindResourceRead, "doc://readme", audit.OutcomeInvalid, raw,
		modernHeader("resources/read", "doc://other"), modernBody("resources/read", `"uri":"doc://readme"`))

	// A forged requestState, and a genuine one replayed.
	refused("a forged requestState", audit.KindToolCall, "shop_pay", audit.OutcomeDenied, raw, modernHeader("tools/call", "shop_pay"),
		modernBody("tools/call", `"name":"shop_pay","arguments":{"amount":3},"inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}},"requestState":"s1.Zm9yZ2Vk"`))
	pay := func(extra string) string {
		return modernBody("tools/call", `"name":"shop_pay","arguments":{"amount":3}`+extra)
	}
	first := served("a call asking for confirmation", audit.KindToolCall, "shop_pay", audit.OutcomeOK, raw, modernHeader("tools/call", "shop_pay"), pay(""))
	var state string
	if first.Error != nil || string(first.Result["resultType"]) != `"input_required"` || json.Unmarshal(first.Result["requestState"], &state) != nil {
		t.Fatalf("the first round: %s, want input_required with a requestState", first)
	}
	retry := `,"inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}},"requestState":` + jsonQuoted(state)
	if r := served("the retry with the answer", audit.KindToolCall, "shop_pay", audit.OutcomeOK, raw, modernHeader("tools/call", "shop_pay"), pay(retry)); r.Error != nil || string(r.Result["resultType"]) != `"complete"` {
		t.Fatalf("the retry: %s", r)
	}
	refused("the retry replayed", audit.KindToolCall, "shop_pay", audit.OutcomeDenied, raw, modernHeader("tools/call", "shop_pay"), pay(retry))

	// The optimizer's meta-tools, refused before any service is asked.
	refused("call_tool without tool_name", audit.KindToolCall, "call_tool", audit.OutcomeInvalid, optimized,
		modernHeader("tools/call", "call_tool"), modernBody("tools/call", `"name":"call_tool","arguments":{}`))
	refused("call_tool with a forged requestState", audit.KindToolCall, "shop_lookup", audit.OutcomeDenied, optimized,
		modernHeader("tools/call", "call_tool"), modernBody("tools/call", `"name":"call_tool","arguments":{"tool_name":"shop_lookup","parameters":{"order":"A-5"}},"requestState":"forged"`))
	// find_tool without a description is a search of nothing, refused
	// and recorded by the indexer, which charges it to the principal's
	// limits as every search it refuses.
	search, found := refusalPost(t, optimized, modernHeader("tools/call", "find_tool"), modernBody("tools/call", `"name":"find_tool","arguments":{}`))
	if string(found.Result["isError"]) != "true" {
		t.Fatalf("find_tool without tool_description: %s, want a refusal", found)
	}
	want[search] = event{"find_tool without tool_description", "indexer", audit.KindFindTool, audit.OutcomeInvalid, "find_tool", false}

	// Legacy: a malformed call on a session, and a call on no session.
	session := rawInitialize(t, c.Config.Gateway.Listen, "Bearer "+refusalKey)
	legacy := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Authorization": "Bearer " + refusalKey, "Mcp-Session-Id": session, "Mcp-Protocol-Version": harness.Legacy}
	refused("a Legacy call with arguments not an object", audit.KindToolCall, "shop_lookup", audit.OutcomeInvalid, raw, legacy,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"shop_lookup","arguments":"A-6"}}`)
	refused("a Legacy subscription without uri", audit.KindResourceSubscribe, "", audit.OutcomeInvalid, raw, legacy,
		`{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{}}`)
	noSession := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Authorization": "Bearer " + refusalKey, "Mcp-Session-Id": "s1.no-such-session", "Mcp-Protocol-Version": harness.Legacy}
	trace, r := refusalPost(t, raw, noSession, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"shop_lookup","arguments":{}}}`)
	if r.status != http.StatusNotFound {
		t.Fatalf("a call on no session: %s", r)
	}
	want[trace] = event{"a call on no session", "gateway", audit.KindToolCall, audit.OutcomeInvalid, "shop_lookup", false}

	// Not a principal's call: no event.
	trace, r = refusalPost(t, raw, modernHeader("tools/call", "shop_lookup", "Authorization", "Bearer wrong"),
		modernBody("tools/call", `"name":"shop_lookup","arguments":{}`))
	if r.status != http.StatusUnauthorized {
		t.Fatalf("an unauthenticated call: %s", r)
	}
	unrecorded[trace] = "an unauthenticated call"

	// A megabyte of name: the event holds the table's bound of it.
	huge := strings.Repeat("x", 1<<20)
	refused("a megabyte name", audit.KindToolCall, strings.Repeat("x", audit.MaxFieldBytes), audit.OutcomeInvalid, raw,
		modernHeader("tools/call", ""), modernBody("tools/call", `"name":"`+huge+`","arguments":{}`))

	// Last, one event of each writer: each writes its events in order, so
	// once these are in the file every earlier one is too, and a
	// duplicate would be there.
	served("the aggregator's last call", audit.KindToolCall, "shop_lookup", audit.OutcomeOK, raw, modernHeader("tools/call", "shop_lookup"),
		modernBody("tools/call", `"name":"shop_lookup","arguments":{"order":"Z"}`))
	refused("the gateway's last refusal", audit.KindToolCall, "shop_lookup", audit.OutcomeInvalid, raw,
		modernHeader("tools/call", "shop_lookup", "Content-Type", "text/plain"), modernBody("tools/call", `"name":"shop_lookup","arguments":{}`))

	byTrace := map[string][]audit.Event{}
	testkit.Eventually(t, "every request's event in the trail", 30*time.Second, func() error {
		content, err := os.ReadFile(trail)
		if err != nil {
			return err
		}
		clear(byTrace)
		lines := bufio.NewScanner(bytes.NewReader(content))
		lines.Buffer(nil, 4<<20)
		for lines.Scan() {
			if n := len(lines.Bytes()); n > 16<<10 {
				t.Fatalf("a trail line of %d bytes: %.200s...", n, lines.Bytes())
			}
			var e audit.Event
			if err := json.Unmarshal(lines.Bytes(), &e); err != nil {
				t.Fatalf("not a JSON line: %q: %v", lines.Text(), err)
			}
			if e.TraceID != "" {
				byTrace[e.TraceID] = append(byTrace[e.TraceID], e)
			}
		}
		var missing []string
		for trace, w := range want {
			if len(byTrace[trace]) == 0 {
				missing = append(missing, w.what)
			}
		}
		if len(missing) > 0 {
			slices.Sort(missing)
			return fmt.Errorf("%d of %d requests have no event yet: %s", len(missing), len(want), strings.Join(missing, "; "))
		}
		return nil
	})
	for trace, w := range want {
		events := byTrace[trace]
		if len(events) != 1 {
			t.Errorf("%s (trace %s): %d events, want exactly one %+v: %+v", w.what, trace, len(events), w, events)
			continue
		}
		e := events[0]
		name := e.Tool + e.Resource + e.Prompt // one of them at most
		if e.Service != w.service || e.Kind != w.kind || e.Outcome != w.outcome || name != w.name ||
			e.Subject != "alice" || len(e.Groups) != 1 || e.Groups[0] != "support" || (len(e.Session) == 64) != w.session {
			t.Errorf("%s (trace %s): event %+v, want %+v for alice (support)", w.what, trace, e, w)
		}
		if e.Service == "gateway" && (e.Detail == "" || len(e.Detail) > audit.MaxFieldBytes || e.Backend != "" || e.Server != "") {
			t.Errorf("%s (trace %s): the gateway's event %+v: want a detail within %d bytes, no backend, no server", w.what, trace, e, audit.MaxFieldBytes)
		}
	}
	for trace, what := range unrecorded {
		if events := byTrace[trace]; len(events) != 0 {
			t.Errorf("%s is in the trail: %+v", what, events)
		}
	}
}

// jsonQuoted is s as a JSON string.
func jsonQuoted(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
