package edge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	"github.com/switchboard-mcp/switchboard/services/apierr"
	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// memorySink keeps what an audit writer writes.
type memorySink struct {
	mu     sync.Mutex
	events []audit.Event
}

func (*memorySink) Name() string { return "memory" }
func (*memorySink) Close() error { return nil }
func (m *memorySink) Write(_ context.Context, batch []audit.Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = append(m.events, batch...)
	return nil
}

// ofTrace returns the events of the request with trace id trace.
func (m *memorySink) ofTrace(trace string) []audit.Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []audit.Event
	for _, e := range m.events {
		if e.TraceID == trace {
			out = append(out, e)
		}
	}
	return out
}

// auditedGateway is a gateway in front of b that writes its trail to the
// returned sink and takes its clients' trace ids, so that each request's
// events can be found.
func auditedGateway(t *testing.T, b *backends, withIndexer bool) (url string, sink *memorySink) {
	t.Helper()
	sink = &memorySink{}
	w, err := audit.New(audit.Options{Service: "gateway", Sinks: []audit.Sink{sink}, FlushEvery: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	cfg := testGatewayConfig(b)
	cfg.HTTP.TrustClientTraceparent = true
	if !withIndexer {
		cfg.Indexer.Address = ""
	}
	_, srv := startGatewayWith(t, b, cfg, func(d *Deps) { d.Audit = w })
	return srv.URL, sink
}

// tracedSend posts body with header and a trace id of its own, which it
// returns.
func tracedSend(t *testing.T, url string, header map[string]string, body string) (string, wireResponse) {
	t.Helper()
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		t.Fatal(err)
	}
	trace := hex.EncodeToString(id)
	h := maps.Clone(header)
	h["traceparent"] = "00-" + trace + "-00f067aa0ba902b7-01"
	return trace, send(t, http.MethodPost, url, h, body)
}

// TestRefusalsAudited: every tools/call, resources/read, prompts/get,
// completion/complete, resources/subscribe and request about a task (and
// the optimizer's call_tool and find_tool) the gateway refuses before asking the
// aggregator or the indexer is one event of the gateway's, with the
// principal, what the client named (within the audit table's bound), the
// outcome (invalid; denied for a forged or replayed requestState; error
// when the gateway cannot check one) and why. A request the aggregator
// was asked, answered or refused there, is the aggregator's to record and
// gets none here; so do a subscription the session keeps, methods the
// trail does not cover and a caller that fails authentication.
func TestRefusalsAudited(t *testing.T) {
	b := startBackends(t)
	url, sink := auditedGateway(t, b, true)
	mcp := url + "/mcp"
	elicit := strings.Replace(modernMeta, `clientCapabilities":{}`, `clientCapabilities":{"elicitation":{"form":{}}}`, 1)
	call := func(name, params string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + elicit + `,"name":` + name + params + `}}`
	}

	type want struct {
		kind    audit.Kind
		name    string
		outcome audit.Outcome
		detail  string // a part of the event's detail
		session bool
	}
	recorded := map[string]want{} // by trace id
	what := map[string]string{}
	refused := func(label, url string, header map[string]string, body string, w want) wireResponse {
		t.Helper()
		trace, resp := tracedSend(t, url, header, body)
		if _, res, rerr := resp.rpc(t); rerr == nil && string(res["isError"]) != "true" {
			t.Fatalf("%s: %d %s, want a refusal", label, resp.status, resp.body)
		}
		recorded[trace], what[trace] = w, label
		return resp
	}
	unrecorded := map[string]string{}
	answered := func(label, url string, header map[string]string, body string) wireResponse {
		t.Helper()
		trace, resp := tracedSend(t, url, header, body)
		unrecorded[trace] = label
		return resp
	}

	// Answered by the aggregator, whatever it said: its event, not ours.
	if _, _, rerr := answered("a normal call", mcp, modernHeaders("tools/call", "Mcp-Name", "alpha_echo"), call(`"alpha_echo"`, `,"arguments":{"text":"hi"}`)).rpc(t); rerr != nil {
		t.Fatalf("a normal call: %v", rerr)
	}
	if _, _, rerr := answered("an unknown tool", mcp, modernHeaders("tools/call", "Mcp-Name", "nope"), call(`"nope"`, "")).rpc(t); rerr == nil {
		t.Fatal("an unknown tool was served")
	}
	_, first, _ := answered("a call asking for input", mcp, modernHeaders("tools/call", "Mcp-Name", "alpha_ask"), call(`"alpha_ask"`, "")).rpc(t)
	state := string(first["requestState"])
	if !strings.HasPrefix(state, `"r1.`) {
		t.Fatalf("no sealed requestState: %v", first)
	}
	answer := `,"inputResponses":{"ok":{"action":"accept","content":{}}},"requestState":`
	if resp := answered("the retry", mcp, modernHeaders("tools/call", "Mcp-Name", "alpha_ask"), call(`"alpha_ask"`, answer+state)); !strings.Contains(string(resp.body), "answered") {
		t.Fatalf("the retry: %d %s", resp.status, resp.body)
	}
	// Not the trail's: a notification, other methods refused, no principal.
	answered("a tools/call notification", mcp, modernHeaders("tools/call", "Mcp-Name", "alpha_echo"),
		`{"jsonrpc":"2.0","method":"tools/call","params":{`+modernMeta+`,"name":"alpha_echo"}}`)
	answered("a bad cursor", mcp, modernHeaders("tools/list"), `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{`+modernMeta+`,"cursor":7}}`)
	answered("a completion", mcp, modernHeaders("completion/complete"),
		`{"jsonrpc":"2.0","id":3,"method":"completion/complete","params":{`+modernMeta+`,"ref":{"type":"ref/prompt","name":"alpha_greet"},"argument":{"name":"who","value":"w"}}}`)
	if resp := answered("no credential", mcp, modernHeaders("tools/call", "Mcp-Name", "alpha_echo", "Authorization", "Bearer wrong"), call(`"alpha_echo"`, "")); resp.status != http.StatusUnauthorized {
		t.Fatalf("no credential: %d", resp.status)
	}

	// Refused here.
	refused("Mcp-Name disagrees", mcp, modernHeaders("tools/call", "Mcp-Name", "beta_add"), call(`"alpha_echo"`, ""),
		want{audit.KindToolCall, "alpha_echo", audit.OutcomeInvalid, "Mcp-Name", false})
	refused("Accept without event streams", mcp, modernHeaders("tools/call", "Mcp-Name", "alpha_echo", "Accept", "application/json"), call(`"alpha_echo"`, ""),
		want{audit.KindToolCall, "alpha_echo", audit.OutcomeInvalid, "Accept", false})
	refused("no era", mcp, legacyHeaders("alice-key", ""), `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"alpha_echo"}}`,
		want{audit.KindToolCall, "alpha_echo", audit.OutcomeInvalid, "_meta", false})
	refused("a read without uri", mcp, modernHeaders("resources/read"), `{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{`+modernMeta+`}}`,
		want{audit.KindResourceRead, "", audit.OutcomeInvalid, "uri is required", false})
	refused("a forged requestState", mcp, modernHeaders("tools/call", "Mcp-Name", "alpha_ask"), call(`"alpha_ask"`, answer+`"r1.forged"`),
		want{audit.KindToolCall, "alpha_ask", audit.OutcomeDenied, "forged", false})
	refused("the retry replayed", mcp, modernHeaders("tools/call", "Mcp-Name", "alpha_ask"), call(`"alpha_ask"`, answer+state),
		want{audit.KindToolCall, "alpha_ask", audit.OutcomeDenied, "replayed", false})
	_, fresh, _ := answered("another call asking for input", mcp, modernHeaders("tools/call", "Mcp-Name", "alpha_ask"), call(`"alpha_ask"`, "")).rpc(t)
	b.down.Store(true)
	refused("a requestState that cannot be checked", mcp, modernHeaders("tools/call", "Mcp-Name", "alpha_ask"), call(`"alpha_ask"`, answer+string(fresh["requestState"])),
		want{audit.KindToolCall, "alpha_ask", audit.OutcomeError, "cannot be checked", false})
	b.down.Store(false)
	huge := strings.Repeat("é", 1<<19) // a megabyte
	refused("a megabyte of tool name", mcp, modernHeaders("tools/call"), call(`"`+huge+`"`, ""),
		want{audit.KindToolCall, huge[:audit.MaxFieldBytes], audit.OutcomeInvalid, "cut to the audit table's bounds: tool", false})

	refused("a completion without argument", mcp, modernHeaders("completion/complete"),
		`{"jsonrpc":"2.0","id":8,"method":"completion/complete","params":{`+modernMeta+`,"ref":{"type":"ref/prompt","name":"alpha_greet"}}}`,
		want{audit.KindCompletion, "alpha_greet", audit.OutcomeInvalid, "argument is required", false})
	refused("a completion without ref", mcp, modernHeaders("completion/complete"), `{"jsonrpc":"2.0","id":9,"method":"completion/complete","params":{`+modernMeta+`}}`,
		want{audit.KindCompletion, "", audit.OutcomeInvalid, "ref is required", false})

	// A request about a task the aggregator was asked is its to record,
	// refused there or not.
	answered("a task read the aggregator refused", mcp, modernHeaders("tasks/get", "Mcp-Name", "t1.nosuch"),
		`{"jsonrpc":"2.0","id":16,"method":"tasks/get","params":{`+tasksMeta+`,"taskId":"t1.nosuch"}}`)
	refused("a task cancelled under another Mcp-Name", mcp, modernHeaders("tasks/cancel", "Mcp-Name", "t1.other"),
		`{"jsonrpc":"2.0","id":13,"method":"tasks/cancel","params":{`+tasksMeta+`,"taskId":"t1.victim"}}`,
		want{audit.KindTaskCancel, "", audit.OutcomeInvalid, "Mcp-Name", false})
	refused("a task read without taskId", mcp, modernHeaders("tasks/get"),
		`{"jsonrpc":"2.0","id":14,"method":"tasks/get","params":{`+tasksMeta+`}}`,
		want{audit.KindTaskGet, "", audit.OutcomeInvalid, "taskId", false})
	refused("a task answered with nothing", mcp, modernHeaders("tasks/update", "Mcp-Name", "t1.mine"),
		`{"jsonrpc":"2.0","id":15,"method":"tasks/update","params":{`+tasksMeta+`,"taskId":"t1.mine","inputResponses":[]}}`,
		want{audit.KindTaskUpdate, "", audit.OutcomeInvalid, "inputResponses", false})

	optimized := url + "/mcp/optimized"
	refused("call_tool with parameters not an object", optimized, modernHeaders("tools/call", "Mcp-Name", "call_tool"),
		call(`"call_tool"`, `,"arguments":{"tool_name":"alpha_echo","parameters":[1]}`),
		want{audit.KindToolCall, "call_tool", audit.OutcomeInvalid, "parameters must be an object", false})
	refused("call_tool of a forged requestState", optimized, modernHeaders("tools/call", "Mcp-Name", "call_tool"),
		call(`"call_tool"`, `,"arguments":{"tool_name":"alpha_echo"},"requestState":"r1.forged"`),
		want{audit.KindToolCall, "alpha_echo", audit.OutcomeDenied, "forged", false})
	// A find_tool without a description is asked of the indexer as a
	// search of nothing, which it refuses, records and charges: the
	// gateway records nothing of it.
	searches := b.idx.Calls("Search")
	answered("find_tool without a description", optimized, modernHeaders("tools/call", "Mcp-Name", "find_tool"), call(`"find_tool"`, `,"arguments":{"tool_keywords":["x"]}`))
	if b.idx.Calls("Search") != searches+1 {
		t.Fatal("a find_tool without a description did not reach the indexer")
	}

	// A Legacy initialize the edge refuses for its headers is a session
	// start refused (one served is recorded with its session).
	initialize := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	plainText := legacyHeaders("alice-key", "")
	plainText["Content-Type"] = "text/plain"
	refused("an initialize of another Content-Type", mcp, plainText, initialize,
		want{audit.KindSessionStart, "", audit.OutcomeInvalid, "Content-Type", false})
	jsonOnly := legacyHeaders("alice-key", "")
	jsonOnly["Accept"] = "application/json"
	refused("an initialize accepting no event stream", mcp, jsonOnly, initialize,
		want{audit.KindSessionStart, "", audit.OutcomeInvalid, "Accept", false})

	session := initializeOn(t, mcp, "alice-key")
	refused("a Legacy prompt without name", mcp, legacyHeaders("alice-key", session), `{"jsonrpc":"2.0","id":6,"method":"prompts/get","params":{"arguments":{}}}`,
		want{audit.KindPromptGet, "", audit.OutcomeInvalid, "name is required", true})
	answered("a subscription", mcp, legacyHeaders("alice-key", session), `{"jsonrpc":"2.0","id":10,"method":"resources/subscribe","params":{"uri":"file:///a.txt"}}`)
	refused("a subscription without uri", mcp, legacyHeaders("alice-key", session), `{"jsonrpc":"2.0","id":11,"method":"resources/subscribe","params":{}}`,
		want{audit.KindResourceSubscribe, "", audit.OutcomeInvalid, "uri is required", true})
	long := "file:///" + strings.Repeat("u", 5000)
	refused("a subscription past the URI bound", mcp, legacyHeaders("alice-key", session), `{"jsonrpc":"2.0","id":12,"method":"resources/subscribe","params":{"uri":"`+long+`"}}`,
		want{audit.KindResourceSubscribe, long[:audit.MaxFieldBytes], audit.OutcomeInvalid, "too long", true})
	otherVersion := legacyHeaders("alice-key", session)
	otherVersion["Mcp-Protocol-Version"] = "2025-06-18"
	refused("a Legacy session of another version", mcp, otherVersion, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"alpha_echo"}}`,
		want{audit.KindToolCall, "alpha_echo", audit.OutcomeInvalid, "MCP-Protocol-Version", false})

	// Refused while the message is parsed: recorded by what was read of
	// it, as long as its method was read and it is not a notification.
	refused("params not an object", mcp, modernHeaders("tools/call", "Mcp-Name", "alpha_echo"),
		`{"jsonrpc":"2.0","id":17,"method":"tools/call","params":["alpha_echo"]}`,
		want{audit.KindToolCall, "", audit.OutcomeInvalid, "params must be an object", false})
	refused("a read whose params are an array", mcp, modernHeaders("resources/read", "Mcp-Name", "file:///a.txt"),
		`{"jsonrpc":"2.0","id":18,"method":"resources/read","params":[]}`,
		want{audit.KindResourceRead, "", audit.OutcomeInvalid, "params must be an object", false})
	refused("jsonrpc 1.0", mcp, modernHeaders("tools/call", "Mcp-Name", "alpha_echo"),
		`{"jsonrpc":"1.0","id":19,"method":"tools/call","params":{`+modernMeta+`,"name":"alpha_echo"}}`,
		want{audit.KindToolCall, "alpha_echo", audit.OutcomeInvalid, `"jsonrpc" must be "2.0"`, false})
	refused("an id that is an object", mcp, modernHeaders("prompts/get", "Mcp-Name", "alpha_greet"),
		`{"jsonrpc":"2.0","id":{},"method":"prompts/get","params":{`+modernMeta+`,"name":"alpha_greet"}}`,
		want{audit.KindPromptGet, "alpha_greet", audit.OutcomeInvalid, "id must be", false})
	refused("capabilities naming extensions twice", mcp, modernHeaders("tools/call", "Mcp-Name", "alpha_echo"),
		`{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{`+strings.Replace(modernMeta, `clientCapabilities":{}`, `clientCapabilities":{"extensions":{},"extensions":{}}`, 1)+`,"name":"alpha_echo"}}`,
		want{audit.KindToolCall, "alpha_echo", audit.OutcomeInvalid, `member "extensions" repeats`, false})
	refused("the tool named twice", mcp, modernHeaders("tools/call", "Mcp-Name", "alpha_echo"),
		`{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{`+modernMeta+`,"name":"alpha_echo","name":"beta_add"}}`,
		want{audit.KindToolCall, "", audit.OutcomeInvalid, `member "name" repeats`, false})
	refused("a Legacy call naming an argument twice", mcp, legacyHeaders("alice-key", session),
		`{"jsonrpc":"2.0","id":22,"method":"tools/call","params":{"name":"alpha_echo","arguments":{"text":"a","text":"b"}}}`,
		want{audit.KindToolCall, "alpha_echo", audit.OutcomeInvalid, `member "text" repeats`, false})
	answered("a tools/call notification of jsonrpc 1.0", mcp, modernHeaders("tools/call", "Mcp-Name", "alpha_echo"),
		`{"jsonrpc":"1.0","method":"tools/call","params":{`+modernMeta+`,"name":"alpha_echo"}}`)
	answered("the method named twice", mcp, modernHeaders("tools/call", "Mcp-Name", "alpha_echo"),
		`{"jsonrpc":"2.0","id":23,"method":"tools/call","method":"tools/list","params":{`+modernMeta+`,"name":"alpha_echo"}}`)
	answered("a body that is not JSON", mcp, modernHeaders("tools/call", "Mcp-Name", "alpha_echo"), `{"jsonrpc":"2.0","id":24,"method":"tools/call",`)

	// The last refusal: the writer writes in order, so once it is written
	// every earlier event is, and a stray one would be there.
	last := refused("the last refusal", mcp, modernHeaders("tools/call", "Mcp-Name", "alpha_echo", "Content-Type", "text/plain"), call(`"alpha_echo"`, ""),
		want{audit.KindToolCall, "alpha_echo", audit.OutcomeInvalid, "Content-Type", false})
	if last.status != http.StatusUnsupportedMediaType {
		t.Fatalf("the last refusal: %d", last.status)
	}
	missing := func() []string {
		var out []string
		for trace := range recorded {
			if len(sink.ofTrace(trace)) == 0 {
				out = append(out, what[trace])
			}
		}
		slices.Sort(out)
		return out
	}
	testkit.Eventually(t, "every refusal in the trail", 10*time.Second, func() error {
		if m := missing(); len(m) > 0 {
			return fmt.Errorf("%d of %d refusals not in the trail: %s", len(m), len(recorded), strings.Join(m, "; "))
		}
		return nil
	})
	for trace, w := range recorded {
		got := sink.ofTrace(trace)
		if len(got) != 1 {
			t.Errorf("%s: %d events, want one: %+v", what[trace], len(got), got)
			continue
		}
		e := got[0]
		name := e.Tool + e.Resource + e.Prompt // one of them at most
		if e.Service != "gateway" || e.Kind != w.kind || e.Outcome != w.outcome || name != w.name || !strings.Contains(e.Detail, w.detail) ||
			e.Subject != "alice" || len(e.Groups) != 1 || e.Groups[0] != "users" || (len(e.Session) == 64) != w.session || e.Backend != "" {
			short, _ := json.Marshal(e)
			t.Errorf("%s: event %.600s; want %s %q %s (detail with %q) for alice", what[trace], short, w.kind, w.name[:min(len(w.name), 40)], w.outcome, w.detail)
		}
		if len(e.Detail) > audit.MaxFieldBytes {
			t.Errorf("%s: a detail of %d bytes", what[trace], len(e.Detail))
		}
	}
	for trace, label := range unrecorded {
		if got := sink.ofTrace(trace); len(got) != 0 {
			t.Errorf("%s is in the gateway's trail: %+v", label, got)
		}
	}
}

// TestRefusedFindToolWithoutIndexer: a gateway without an indexer
// refuses find_tool as unavailable, and records it so.
func TestRefusedFindToolWithoutIndexer(t *testing.T) {
	b := startBackends(t)
	url, sink := auditedGateway(t, b, false)
	trace, resp := tracedSend(t, url+"/mcp/optimized", modernHeaders("tools/call", "Mcp-Name", "find_tool"),
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+modernMeta+`,"name":"find_tool","arguments":{"tool_description":"add"}}}`)
	if !strings.Contains(string(resp.body), "not available") {
		t.Fatalf("find_tool without an indexer: %d %s", resp.status, resp.body)
	}
	testkit.Eventually(t, "the refused find_tool in the trail", 10*time.Second, func() bool { return len(sink.ofTrace(trace)) > 0 })
	if got := sink.ofTrace(trace); len(got) != 1 || got[0].Kind != audit.KindFindTool || got[0].Tool != "find_tool" ||
		got[0].Outcome != audit.OutcomeError || !strings.Contains(got[0].Detail, "not available") || got[0].Subject != "alice" {
		t.Errorf("find_tool without an indexer: %+v", got)
	}
}

// TestRefusalOutcome: the trail's outcome of each error the gateway
// answers itself.
func TestRefusalOutcome(t *testing.T) {
	for code, want := range map[int]audit.Outcome{
		wire.CodeParseError: audit.OutcomeInvalid, wire.CodeInvalidRequest: audit.OutcomeInvalid, wire.CodeMethodNotFound: audit.OutcomeInvalid,
		wire.CodeInvalidParams: audit.OutcomeInvalid, wire.CodeHeaderMismatch: audit.OutcomeInvalid, wire.CodeUnsupportedVer: audit.OutcomeInvalid,
		wire.CodeRateLimited: audit.OutcomeRateLimited, wire.CodeInternalError: audit.OutcomeError,
	} {
		if got := refusalOutcome(wire.NewError(code, "x")); got != want {
			t.Errorf("code %d: %s, want %s", code, got, want)
		}
	}
}

// codeAggregator answers RunCode as an aggregator whose rate limit
// refuses the run, which it records itself.
type codeAggregator struct{ *taskAggregator }

func (codeAggregator) RunCode(context.Context, *aggregatorv1.RunCodeRequest) (*aggregatorv1.RunCodeResponse, error) {
	return nil, apierr.New(codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_RATE_LIMITED, "rate limited", "retryAfterSeconds", "1", "limit", "calls")
}

// TestRunCodeIsTheAggregatorsToRecord: a run_code the aggregator was asked
// is its event alone, refused there or not; the gateway once recorded it
// too.
func TestRunCodeIsTheAggregatorsToRecord(t *testing.T) {
	b := newBackends()
	creds := []config.ServiceCredential{{Name: "gateway", Token: serviceToken, AssertPrincipals: true, Allow: []string{"switchboard.aggregator.v1.AggregatorService/*", "switchboard.indexer.v1.IndexerService/*"}}}
	b.aggAddr = testkit.Serve(t, creds, func(s grpc.ServiceRegistrar) {
		aggregatorv1.RegisterAggregatorServiceServer(s, codeAggregator{&taskAggregator{FakeAggregator: b.agg, b: b}})
	}).Addr
	b.idxAddr = testkit.Serve(t, creds, b.idx.Register).Addr
	url, sink := auditedGateway(t, b, true)
	run, resp := tracedSend(t, url+"/mcp/optimized", modernHeaders("tools/call", "Mcp-Name", "run_code"),
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+modernMeta+`,"name":"run_code","arguments":{"program":"result = 1"}}}`)
	if resp.status != http.StatusTooManyRequests {
		t.Fatalf("run_code: %d %s", resp.status, resp.body)
	}
	// The writer writes in order: once a later refusal is written, an
	// event of the run would be there.
	last, _ := tracedSend(t, url+"/mcp", modernHeaders("tools/call", "Mcp-Name", "alpha_echo", "Content-Type", "text/plain"),
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{`+modernMeta+`,"name":"alpha_echo"}}`)
	testkit.Eventually(t, "the later refusal in the trail", 10*time.Second, func() bool { return len(sink.ofTrace(last)) > 0 })
	if got := sink.ofTrace(run); len(got) != 0 {
		t.Fatalf("the gateway recorded a run the aggregator was asked: %+v", got)
	}
}

// TestRefusedDeleteIsNoSessionEnd: a DELETE the gateway refuses leaves
// the session open, and the trail says it was refused, not that the
// session ended.
func TestRefusedDeleteIsNoSessionEnd(t *testing.T) {
	b := startBackends(t)
	url, sink := auditedGateway(t, b, true)
	session := initializeOn(t, url+"/mcp", "alice-key")
	h := legacyHeaders("alice-key", session)
	h["Mcp-Protocol-Version"] = "2025-06-18"
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		t.Fatal(err)
	}
	trace := hex.EncodeToString(id)
	h["traceparent"] = "00-" + trace + "-00f067aa0ba902b7-01"
	if resp := send(t, http.MethodDelete, url+"/mcp", h, ""); resp.status != http.StatusBadRequest {
		t.Fatalf("DELETE of another version: %d", resp.status)
	}
	if resp := send(t, http.MethodPost, url+"/mcp", legacyHeaders("alice-key", session), `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); resp.status != http.StatusOK {
		t.Fatalf("the session after a refused DELETE: %d %s", resp.status, resp.body)
	}
	testkit.Eventually(t, "the DELETE's event", 10*time.Second, func() bool { return len(sink.ofTrace(trace)) > 0 })
	if e := sink.ofTrace(trace)[0]; e.Kind != audit.KindSessionEnd || e.Outcome != audit.OutcomeInvalid || !strings.Contains(e.Detail, "MCP-Protocol-Version") {
		t.Fatalf("a refused DELETE recorded as %s %s (%q), want session_end invalid naming the version", e.Kind, e.Outcome, e.Detail)
	}
}

// TestRefusedRetriesDoNotFloodTheLog: a retry whose requestState the
// indexer will not record is refused, and resent at the client's rate;
// it once wrote a warning each time. The principal's share of the records
// full is its own bound and no failure: it writes none.
func TestRefusedRetriesDoNotFloodTheLog(t *testing.T) {
	b := newBackends()
	var limited atomic.Bool
	b.idx.Check = func(_ context.Context, method string, _ any) error {
		if limited.Load() && method == "ConsumeRequestState" {
			return status.Error(codes.ResourceExhausted, "this principal holds as many live request state records as it may")
		}
		return nil
	}
	b.serve(t)
	logs := &testkit.LogBuffer{}
	_, srv := startGatewayWith(t, b, testGatewayConfig(b), func(d *Deps) { d.Log = slog.New(slog.NewTextHandler(logs, nil)) })
	elicit := strings.Replace(modernMeta, `clientCapabilities":{}`, `clientCapabilities":{"elicitation":{"form":{}}}`, 1)
	call := func(extra string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + elicit + `,"name":"alpha_ask"` + extra + `}}`
	}
	headers := modernHeaders("tools/call", "Mcp-Name", "alpha_ask")
	_, first, _ := send(t, http.MethodPost, srv.URL+"/mcp", headers, call("")).rpc(t)
	retry := call(`,"inputResponses":{"ok":{"action":"accept","content":{}}},"requestState":` + string(first["requestState"]))
	limited.Store(true)
	for range 50 {
		if _, _, rerr := send(t, http.MethodPost, srv.URL+"/mcp", headers, retry).rpc(t); rerr == nil {
			t.Fatal("a retry whose state could not be recorded was served")
		}
	}
	if n := strings.Count(logs.String(), "could not be recorded as used"); n != 0 {
		t.Fatalf("50 retries past the principal's share wrote %d warnings", n)
	}
}

// TestMissingTasksCapabilityAuditedInvalid: a Modern request about a task
// from a client that did not declare the tasks extension is the client's
// fault (-32021, HTTP 400, counted "rejected" in the metrics). The trail
// must say invalid ("what the client sent wrong", operations.md §10), not
// error ("what the gateway cannot do now"), which an operator reads as a
// failure of the gateway.
func TestMissingTasksCapabilityAuditedInvalid(t *testing.T) {
	b := startBackends(t)
	url, sink := auditedGateway(t, b, true)
	for _, method := range []string{"tasks/get", "tasks/cancel"} {
		trace, resp := tracedSend(t, url+"/mcp", modernHeaders(method, "Mcp-Name", "t1.x"),
			`{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":{`+modernMeta+`,"taskId":"t1.x"}}`)
		if _, _, rerr := resp.rpc(t); resp.status != http.StatusBadRequest || rerr == nil || rerr.Code != wire.CodeMissingCapability {
			t.Fatalf("%s without the tasks extension: %d %s, want 400 -32021", method, resp.status, resp.body)
		}
		var got []audit.Event
		testkit.Eventually(t, "the refusal in the trail", 10*time.Second, func() error {
			if got = sink.ofTrace(trace); len(got) == 0 {
				return fmt.Errorf("no event yet")
			}
			return nil
		})
		if len(got) != 1 || got[0].Outcome != audit.OutcomeInvalid {
			t.Errorf("%s without the tasks extension: events %+v; want one with outcome %q (the client's fault)",
				method, got, audit.OutcomeInvalid)
		}
	}
}
