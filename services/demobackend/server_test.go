package demobackend

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/switchboard-mcp/switchboard/services/testkit"
)

const testSpec = `
instructions: a test backend
tools:
  - {name: echo, description: Echo, behaviour: echo}
  - {name: greet, behaviour: text, text: "hi from {backend}/{tool}"}
  - {name: add, behaviour: add}
  - {name: broken, behaviour: error, text: "nope"}
  - {name: nap, behaviour: sleep}
resources:
  - {uri: "demo://readme", name: readme, mimeType: text/plain, text: "readme of {backend}"}
resourceTemplates:
  - {uriTemplate: "demo://city/{name}", name: city, text: "{uri} on {backend}"}
prompts:
  - name: hello
    text: "Say hello to {who} from {backend}"
    arguments: [{name: who, required: true, values: [alice, albert, bob]}]
`

func startBackend(t *testing.T, statefulOnly bool) (*Backend, *httptest.Server) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(path, []byte(testSpec), 0o600); err != nil {
		t.Fatal(err)
	}
	spec, err := LoadSpec(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(spec, Options{Name: "alpha", StatefulOnly: statefulOnly})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b.Handler())
	t.Cleanup(srv.Close)
	return b, srv
}

func connect(t *testing.T, url, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, opts)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url + MCPPath},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect (version %q): %v", version, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	m, ok := res.StructuredContent.(map[string]any)
	if !ok {
		t.Fatalf("structured content is %T, want an object", res.StructuredContent)
	}
	var fromText map[string]any
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &fromText); err != nil {
		t.Fatalf("text content is not the JSON of the answer: %v", err)
	}
	if fromText["backend"] != m["backend"] {
		t.Fatalf("text names backend %v, structured content %v", fromText["backend"], m["backend"])
	}
	return m
}

func TestBothErasOnOneURL(t *testing.T) {
	_, srv := startBackend(t, false)
	for _, tc := range []struct{ pin, want string }{{"", "2026-07-28"}, {"2025-11-25", "2025-11-25"}} {
		t.Run("pin="+tc.pin, func(t *testing.T) {
			cs := connect(t, srv.URL, tc.pin, nil)
			if got := cs.InitializeResult().ProtocolVersion; got != tc.want {
				t.Fatalf("negotiated %q, want %q", got, tc.want)
			}
			tools, err := cs.ListTools(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range tools.Tools {
				names = append(names, tool.Name)
			}
			if got := strings.Join(names, ","); got != "add,broken,echo,greet,nap" {
				t.Fatalf("tools = %s", got)
			}
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"x": "y"}})
			if err != nil {
				t.Fatal(err)
			}
			m := structured(t, res)
			if m["backend"] != "alpha" || m["arguments"].(map[string]any)["x"] != "y" {
				t.Fatalf("echo answered %v", m)
			}
		})
	}
}

func TestBehaviours(t *testing.T) {
	_, srv := startBackend(t, false)
	cs := connect(t, srv.URL, "", nil)
	call := func(name string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res, structured(t, res)
	}
	if _, m := call("greet", nil); m["text"] != "hi from alpha/greet" {
		t.Errorf("greet = %v", m)
	}
	if _, m := call("add", map[string]any{"a": 2, "b": 3.5}); m["sum"] != 5.5 {
		t.Errorf("add = %v", m)
	}
	if res, m := call("add", map[string]any{"a": "x"}); !res.IsError || m["error"] == nil {
		t.Errorf("add with bad arguments = %v, isError %v", m, res.IsError)
	}
	if res, m := call("broken", nil); !res.IsError || m["error"] != "nope" || m["backend"] != "alpha" {
		t.Errorf("broken = %v, isError %v", m, res.IsError)
	}
	if _, m := call("nap", map[string]any{"duration": "1ms"}); m["slept"] != "1ms" {
		t.Errorf("nap = %v", m)
	}

	read, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "demo://city/oslo"})
	if err != nil || read.Contents[0].Text != "demo://city/oslo on alpha" {
		t.Errorf("template read = %+v, %v", read, err)
	}
	read, err = cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "demo://readme"})
	if err != nil || read.Contents[0].Text != "readme of alpha" {
		t.Errorf("resource read = %+v, %v", read, err)
	}
	prompt, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "hello", Arguments: map[string]string{"who": "bob"}})
	if err != nil || prompt.Messages[0].Content.(*mcp.TextContent).Text != "Say hello to bob from alpha" {
		t.Errorf("prompt = %+v, %v", prompt, err)
	}
	if _, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "hello"}); err == nil {
		t.Error("prompt without its required argument succeeded")
	}
	comp, err := cs.Complete(t.Context(), &mcp.CompleteParams{
		Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "hello"},
		Argument: mcp.CompleteParamsArgument{Name: "who", Value: "al"},
	})
	if err != nil || strings.Join(comp.Completion.Values, ",") != "alice,albert" {
		t.Errorf("complete = %+v, %v", comp, err)
	}
}

func TestSleepHonoursCancellation(t *testing.T) {
	b, srv := startBackend(t, false)
	cs := connect(t, srv.URL, "", nil)
	// The call is cancelled once the backend runs its sleep (a timeout
	// could fire before the call reached it on a loaded machine, and no
	// sleep would be counted at all).
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		poll := time.NewTicker(time.Millisecond)
		defer poll.Stop()
		deadline := time.Now().Add(10 * time.Second)
		for b.Sleeps().Running == 0 && time.Now().Before(deadline) {
			<-poll.C
		}
		cancel()
	}()
	start := time.Now()
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "nap", Arguments: map[string]any{"duration": "1m"}})
	if err == nil {
		t.Fatal("a cancelled sleep returned a result")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("cancelled call took %s", d)
	}
	// The backend's own count says it saw the cancellation (the handler
	// ends after the client gave up, so poll).
	testkit.Eventually(t, "the backend counts the cancelled sleep", 10*time.Second, func() error {
		if s := b.Sleeps(); s != (SleepStats{Cancelled: 1}) {
			return fmt.Errorf("sleeps %+v, want one cancelled", s)
		}
		return nil
	})
	if _, m := callTool(t, cs, "nap", map[string]any{"duration": "1ms"}); m["slept"] != "1ms" {
		t.Fatalf("nap = %v", m)
	}
	resp, err := http.Get(srv.URL + "/admin/sleeps")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var stats SleepStats
	if err := json.NewDecoder(resp.Body).Decode(&stats); err != nil || stats != (SleepStats{Cancelled: 1, Completed: 1}) {
		t.Fatalf("GET /admin/sleeps: %+v %v", stats, err)
	}
}

// TestAskAsksByElicitation: an ask tool asks the client in either
// era (input_required under Modern, elicitation/create in a Legacy
// session; go-sdk clients answer both through the same handler) and
// returns the action.
func TestAskAsksByElicitation(t *testing.T) {
	b, srv := startBackend(t, false)
	if err := b.AddTool(ToolSpec{Name: "ask", Behaviour: BehaviourAsk, Text: "Go ahead with {tool}?"}); err != nil {
		t.Fatal(err)
	}
	for _, version := range []string{"", "2025-11-25"} {
		asked := make(chan string, 1)
		cs := connect(t, srv.URL, version, &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked <- r.Params.Message
			return &mcp.ElicitResult{Action: "decline"}, nil
		}})
		if _, m := callTool(t, cs, "ask", nil); m["action"] != "decline" {
			t.Fatalf("version %q: ask = %v", version, m)
		}
		if got := <-asked; got != "Go ahead with ask?" {
			t.Fatalf("version %q: asked %q", version, got)
		}
	}
}

func TestStatefulOnlyFallsBackToLegacy(t *testing.T) {
	_, srv := startBackend(t, true)
	cs := connect(t, srv.URL, "", nil)
	if got := cs.InitializeResult().ProtocolVersion; got != "2025-11-25" {
		t.Fatalf("a default client negotiated %q with a Legacy-only backend, want 2025-11-25", got)
	}
	if cs.ID() == "" {
		t.Fatal("Legacy session has no session id")
	}
}

// TestAdminChangesCatalog adds and removes a tool through /admin and
// checks that both a Modern listener and a Legacy session are told.
func TestAdminChangesCatalog(t *testing.T) {
	b, srv := startBackend(t, false)
	changed := map[string]chan struct{}{"modern": make(chan struct{}, 8), "legacy": make(chan struct{}, 8)}
	sessions := map[string]*mcp.ClientSession{}
	for era, pin := range map[string]string{"modern": "", "legacy": "2025-11-25"} {
		ch := changed[era]
		sessions[era] = connect(t, srv.URL, pin, &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { ch <- struct{}{} },
		})
	}

	body := `{"name":"late","description":"added later","behaviour":"text","text":"late on {backend}"}`
	resp, err := http.Post(srv.URL+"/admin/tools", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /admin/tools: %s", resp.Status)
	}
	for era, ch := range changed {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s client got no tools/list_changed", era)
		}
		res, err := sessions[era].CallTool(t.Context(), &mcp.CallToolParams{Name: "late"})
		if err != nil || structured(t, res)["text"] != "late on alpha" {
			t.Fatalf("%s: calling the added tool: %+v, %v", era, res, err)
		}
	}

	for _, tc := range []struct {
		method, path, body string
		want               int
	}{
		{"DELETE", "/admin/tools/late", "", http.StatusNoContent},
		{"DELETE", "/admin/tools/late", "", http.StatusNotFound},
		{"POST", "/admin/tools", `{"name":"x","behaviour":"dance"}`, http.StatusBadRequest},
		{"POST", "/admin/tools", `{"name":"x","colour":"red"}`, http.StatusBadRequest},
		{"POST", "/admin/tools", `not json`, http.StatusBadRequest},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s %s: %d, want %d", tc.method, tc.path, tc.body, resp.StatusCode, tc.want)
		}
	}
	if got := strings.Join(b.ToolNames(), ","); got != "add,broken,echo,greet,nap" {
		t.Fatalf("tools after removal = %s", got)
	}
}

func TestSpecErrors(t *testing.T) {
	for name, spec := range map[string]Spec{
		"unknown behaviour": {Tools: []ToolSpec{{Name: "a", Behaviour: "dance"}}},
		"duplicate tool":    {Tools: []ToolSpec{{Name: "a"}, {Name: "a"}}},
		"nameless tool":     {Tools: []ToolSpec{{Description: "x"}}},
		"bad schema":        {Tools: []ToolSpec{{Name: "a", InputSchema: map[string]any{"type": "string"}}}},
		"template no var":   {ResourceTemplates: []TemplateSpec{{URITemplate: "demo://x", Name: "x"}}},
		"duplicate prompt":  {Prompts: []PromptSpec{{Name: "p"}, {Name: "p"}}},
	} {
		if _, err := New(spec, Options{Name: "x"}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := New(DefaultSpec(), Options{}); err == nil {
		t.Error("a backend without a name was accepted")
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("tools:\n  - name: a\n    behavior: echo\n"), 0o600)
	if _, err := LoadSpec(bad); err == nil || !strings.Contains(err.Error(), "behavior") {
		t.Errorf("a misspelt key was accepted: %v", err)
	}
}

func TestToolSources(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tools.json")
	os.WriteFile(path, []byte(`{"zeta": "last", "alpha": "first"}`), 0o600)
	tools, err := ToolsFromDescriptions(path)
	if err != nil || len(tools) != 2 || tools[0].Name != "alpha" || tools[1].Description != "last" {
		t.Fatalf("ToolsFromDescriptions = %+v, %v", tools, err)
	}
	os.WriteFile(path, []byte(`["not", "a map"]`), 0o600)
	if _, err := ToolsFromDescriptions(path); err == nil {
		t.Fatal("a JSON array was accepted")
	}
	syn := SyntheticTools(1200)
	if len(syn) != 1200 || syn[0].Name != "tool_0000" || syn[1199].Name != "tool_1199" {
		t.Fatalf("SyntheticTools: %d tools, first %q", len(syn), syn[0].Name)
	}
}

// TestJoinsCallersTrace sends a traceparent with a call: the backend's span
// must belong to that trace, so a request through Switchboard is one trace.
func TestJoinsCallersTrace(t *testing.T) {
	recorder := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	defer provider.Shutdown(context.Background())
	prevProvider, prevPropagator := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(provider)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTracerProvider(prevProvider); otel.SetTextMapPropagator(prevPropagator) })

	_, srv := startBackend(t, false)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/healthz", nil)
	req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	spans := recorder.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans recorded, want 1", len(spans))
	}
	if got := spans[0].SpanContext().TraceID().String(); got != traceID {
		t.Fatalf("span in trace %s, want the caller's %s", got, traceID)
	}
	if spans[0].Name() != "demo backend GET /healthz" {
		t.Fatalf("span name %q", spans[0].Name())
	}
}

// TestResourceUpdatedReachesSubscribers subscribes in both eras and
// announces a change through /admin: both subscribers are told.
func TestResourceUpdatedReachesSubscribers(t *testing.T) {
	_, srv := startBackend(t, false)
	updated := map[string]chan string{}
	for era, pin := range map[string]string{"modern": "", "legacy": "2025-11-25"} {
		ch := make(chan string, 64)
		updated[era] = ch
		cs := connect(t, srv.URL, pin, &mcp.ClientOptions{
			ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) { ch <- req.Params.URI },
		})
		if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: "demo://readme"}); err != nil {
			t.Fatalf("%s subscribe: %v", era, err)
		}
	}
	announce := func() {
		resp, err := http.Post(srv.URL+"/admin/resources/updated", "application/json", strings.NewReader(`{"uri":"demo://readme"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("POST /admin/resources/updated: %s", resp.Status)
		}
	}
	// A Modern subscription is a listen stream that may still be opening:
	// announce until each subscriber has heard of it.
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for era, ch := range updated {
		for got := false; !got; {
			announce()
			select {
			case uri := <-ch:
				if uri != "demo://readme" {
					t.Fatalf("%s: updated %q", era, uri)
				}
				got = true
			case <-tick.C:
			case <-deadline:
				t.Fatalf("%s subscriber never heard of the update", era)
			}
		}
	}
	resp, err := http.Post(srv.URL+"/admin/resources/updated", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("an update without a URI got %s", resp.Status)
	}
}

// callTool calls a tool that must succeed and returns its structured
// content.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res, structured(t, res)
}

// TestLogSendsEachLevelAboveTheSessions: a Legacy session that set its
// level to info gets the log tool's info and warning messages, not its
// debug one, and the backend announces logging because it has a log tool.
func TestLogSendsEachLevelAboveTheSessions(t *testing.T) {
	b, err := New(Spec{Tools: []ToolSpec{{Name: "chatty", Behaviour: BehaviourLog}}}, Options{Name: "alpha", StatefulOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b.Handler())
	t.Cleanup(srv.Close)
	got := make(chan string, 8)
	cs := connect(t, srv.URL, "2025-11-25", &mcp.ClientOptions{LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
		got <- string(r.Params.Level)
	}})
	if cs.InitializeResult().Capabilities.Logging == nil {
		t.Fatal("a backend with a log tool does not announce logging")
	}
	if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "chatty"})
	if err != nil {
		t.Fatal(err)
	}
	structured(t, res)
	var levels []string
	for len(levels) < 2 {
		select {
		case l := <-got:
			levels = append(levels, l)
		case <-time.After(5 * time.Second):
			t.Fatalf("log messages %v, want [info warning]", levels)
		}
	}
	if strings.Join(levels, ",") != "info,warning" {
		t.Fatalf("log messages %v, want [info warning]", levels)
	}
	select {
	case l := <-got:
		t.Fatalf("an extra log message at %s", l)
	default:
	}
}
