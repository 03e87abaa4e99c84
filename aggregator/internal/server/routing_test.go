package server_test

import (
	"context"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/backenderr"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// withContent gives a backend a resource, a template and a prompt.
func withContent(b *testBackend) {
	b.server.AddResource(&mcp.Resource{URI: "mem://" + b.name + "/readme", Name: "readme"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: b.name + " readme"}}}, nil
	})
	b.server.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "mem://" + b.name + "/items/{id}", Name: "item"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		if strings.HasSuffix(req.Params.URI, "/missing") {
			return nil, mcp.ResourceNotFoundError(req.Params.URI)
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: b.name + " item " + req.Params.URI}}}, nil
	})
	b.server.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "who"}}}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: b.name + " greets " + req.Params.Arguments["who"]}}}}, nil
	})
}

// twoEras starts a stateless Modern backend and a stateful Legacy-only one
// (pinned to 2025-11-25), and an aggregator in front of them.
func twoEras(t *testing.T) (*harness, *testBackend, *testBackend) {
	modern := newTestBackend(t, "modern", backendOptions{tools: []string{"echo", "create_issue"}, extra: withContent})
	legacy := newTestBackend(t, "legacy", backendOptions{stateful: true, tools: []string{"echo", "create_issue"}, extra: withContent})
	t.Setenv("TEST_MODERN_API_KEY", "secret-123")
	cfg := parseConfig(t, `
aggregator:
  catalogTTL: 1h
  backends:
    - name: modern
      url: `+modern.url()+`
      timeout: 1s
      headers:
        X-Api-Key: ${TEST_MODERN_API_KEY}
    - name: legacy
      url: `+legacy.url()+`
      protocol: "2025-11-25"
      timeout: 5s
`)
	return startAggregator(t, cfg), modern, legacy
}

func parseConfig(t testing.TB, yaml string) config.Aggregator {
	t.Helper()
	c, err := config.Load(writeFile(t, "switchboard.yaml", yaml))
	if err != nil {
		t.Fatal(err)
	}
	return c.Aggregator
}

func TestListsBothErasWithPrefixedSortedNames(t *testing.T) {
	h, _, _ := twoEras(t)
	got := listToolNames(t, h.gateway, principal("alice"), 0)
	want := []string{"legacy_create_issue", "legacy_echo", "legacy_fail", "legacy_hang", "modern_create_issue", "modern_echo", "modern_fail", "modern_hang"}
	if !slices.Equal(got, want) {
		t.Fatalf("tools %v, want %v", got, want)
	}

	backends, err := h.gateway.ListBackends(context.Background(), &aggregatorv1.ListBackendsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	eras := map[string]string{}
	for _, b := range backends.GetBackends() {
		eras[b.GetName()] = b.GetProtocolVersion()
		if b.GetHealth() != aggregatorv1.BackendHealth_BACKEND_HEALTH_HEALTHY || b.GetToolCount() != 4 || b.GetPromptCount() != 1 ||
			b.GetResourceCount() != 1 || b.GetResourceTemplateCount() != 1 || b.GetLastCheck() == nil {
			t.Errorf("backend %s: %v", b.GetName(), b)
		}
	}
	if eras["modern"] != "2026-07-28" || eras["legacy"] != "2025-11-25" {
		t.Fatalf("negotiated versions %v", eras)
	}
	if names := []string{backends.GetBackends()[0].GetName(), backends.GetBackends()[1].GetName()}; !slices.Equal(names, []string{"legacy", "modern"}) {
		t.Fatalf("backends not in name order: %v", names)
	}
}

func TestCallToolRoutesToOwnerUnderOriginalName(t *testing.T) {
	h, modern, legacy := twoEras(t)
	ctx := context.Background()
	for _, c := range []struct{ name, want string }{
		{"modern_create_issue", `modern/create_issue {"title":"x"}`},
		{"legacy_create_issue", `legacy/create_issue {"title":"x"}`},
	} {
		resp, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: principal("alice"), Name: c.name, ArgumentsJson: `{"title":"x"}`})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := resultText(t, resp.GetResultJson()); got != c.want || resp.GetIsError() || resp.GetResultType() != "complete" {
			t.Fatalf("%s: %q (is_error %v, type %q), want %q", c.name, got, resp.GetIsError(), resp.GetResultType(), c.want)
		}
	}

	// Arguments naming a member twice are read two ways (a backend's
	// decoder may keep the first; a retry's binding keeps the last): read
	// by none, the call refused before the backend.
	calls := modern.received("tools/call")
	nested := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, args := range []string{`{"title":"x","title":"y"}`, `{"d":` + nested(600) + `,"title":"x","title":"y"}`, `{"d":` + nested(1200) + `}`} {
		_, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: principal("alice"), Name: "modern_create_issue", ArgumentsJson: args})
		wantStatus(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	}
	if modern.received("tools/call") != calls {
		t.Fatal("a call with a member named twice, or too deep to tell, reached the backend")
	}

	// Headers reach only the backend they are configured for.
	if keys := modern.headerValues("X-Api-Key"); len(keys) == 0 || slices.ContainsFunc(keys, func(v string) bool { return v != "secret-123" }) {
		t.Fatalf("modern backend saw X-Api-Key %v", keys)
	}
	if keys := legacy.headerValues("X-Api-Key"); len(keys) != 0 {
		t.Fatalf("legacy backend received another backend's credential: %v", keys)
	}
}

func TestCallsReuseOneConnectionPool(t *testing.T) {
	h, modern, legacy := twoEras(t)
	before := modern.connections() + legacy.connections()
	for i := range 200 {
		name := "modern_echo"
		if i%2 == 1 {
			name = "legacy_echo"
		}
		if _, err := h.gateway.CallTool(context.Background(), &aggregatorv1.CallToolRequest{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	// Sequential calls ride the pooled keep-alive connections: no new
	// connection (let alone session) per call. A call can start while the
	// previous response's last bytes are still in flight and take a second
	// pooled connection, so a few new connections are normal; losing
	// connections to cancelled bodies costs ~15% of calls a new one.
	if added := modern.connections() + legacy.connections() - before; added > 10 {
		t.Fatalf("200 sequential calls opened %d new TCP connections", added)
	}
}

func TestToolFailureIsAResultNotAnError(t *testing.T) {
	h, _, _ := twoEras(t)
	for _, name := range []string{"modern_fail", "legacy_fail"} {
		resp, err := h.gateway.CallTool(context.Background(), &aggregatorv1.CallToolRequest{Name: name})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !resp.GetIsError() || !strings.Contains(resp.GetResultJson(), `"isError":true`) || !strings.Contains(resultText(t, resp.GetResultJson()), "tool failed") {
			t.Fatalf("%s: %+v", name, resp)
		}
	}
}

func TestBackendTimeoutIsDeadlineExceededWithinTimeout(t *testing.T) {
	h, _, _ := twoEras(t)
	start := time.Now()
	_, err := h.gateway.CallTool(context.Background(), &aggregatorv1.CallToolRequest{Name: "modern_hang"})
	took := time.Since(start)
	wantStatus(t, err, codes.DeadlineExceeded, commonv1.ErrorReason_ERROR_REASON_BACKEND_TIMEOUT)
	if took < time.Second || took > 2500*time.Millisecond {
		t.Fatalf("timed out after %s, configured 1s", took)
	}
	// The backend stays usable after a timed-out call.
	if _, err := h.gateway.CallTool(context.Background(), &aggregatorv1.CallToolRequest{Name: "modern_echo"}); err != nil {
		t.Fatal(err)
	}
}

func TestUnknownNamesAreNotFound(t *testing.T) {
	h, _, _ := twoEras(t)
	ctx := context.Background()
	_, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Name: "echo"})
	wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	_, err = h.gateway.GetPrompt(ctx, &aggregatorv1.GetPromptRequest{Name: "nope"})
	wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	_, err = h.gateway.ReadResource(ctx, &aggregatorv1.ReadResourceRequest{Uri: "mem://nobody/readme"})
	wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	_, err = h.gateway.Complete(ctx, &aggregatorv1.CompleteRequest{ParamsJson: `{"ref":{"type":"ref/prompt","name":"nope"},"argument":{"name":"who","value":"a"}}`})
	wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	_, err = h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Name: "modern_echo", ArgumentsJson: `[1,2]`})
	wantStatus(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	_, err = h.anon.ListTools(ctx, &aggregatorv1.ListToolsRequest{})
	wantStatus(t, err, codes.Unauthenticated, commonv1.ErrorReason_ERROR_REASON_UNAUTHENTICATED)
}

func TestResourcesTemplatesPromptsAndCompletionRoute(t *testing.T) {
	h, _, _ := twoEras(t)
	ctx := context.Background()
	for _, era := range []string{"modern", "legacy"} {
		res, err := h.gateway.ReadResource(ctx, &aggregatorv1.ReadResourceRequest{Uri: "mem://" + era + "/readme"})
		if err != nil || res.GetBackend() != era || !strings.Contains(res.GetResultJson(), era+" readme") {
			t.Fatalf("read %s readme: %v %v", era, res, err)
		}
		res, err = h.gateway.ReadResource(ctx, &aggregatorv1.ReadResourceRequest{Uri: "mem://" + era + "/items/42"})
		if err != nil || res.GetBackend() != era || !strings.Contains(res.GetResultJson(), era+" item mem://"+era+"/items/42") {
			t.Fatalf("read through %s template: %v %v", era, res, err)
		}
		// The backend's own "resource not found" comes back with its code
		// and data, for the gateway to re-emit in the client's era.
		_, err = h.gateway.ReadResource(ctx, &aggregatorv1.ReadResourceRequest{Uri: "mem://" + era + "/items/missing"})
		wantStatus(t, err, codes.Unknown, commonv1.ErrorReason_ERROR_REASON_BACKEND_ERROR)
		if be, ok := backenderr.From(err); !ok || be.GetCode() != -32602 || !strings.Contains(be.GetDataJson(), "items/missing") {
			t.Fatalf("backend not-found detail %v", be)
		}
		p, err := h.gateway.GetPrompt(ctx, &aggregatorv1.GetPromptRequest{Name: era + "_greet", Arguments: map[string]string{"who": "bob"}})
		if err != nil || p.GetBackend() != era || !strings.Contains(p.GetResultJson(), era+" greets bob") {
			t.Fatalf("prompt %s_greet: %v %v", era, p, err)
		}
		c, err := h.gateway.Complete(ctx, &aggregatorv1.CompleteRequest{ParamsJson: `{"ref":{"type":"ref/prompt","name":"` + era + `_greet"},"argument":{"name":"who","value":"b"}}`})
		if err != nil || !strings.Contains(c.GetResultJson(), era+":greet:b") {
			t.Fatalf("complete %s_greet: %v %v", era, c, err)
		}
		c, err = h.gateway.Complete(ctx, &aggregatorv1.CompleteRequest{ParamsJson: `{"ref":{"type":"ref/resource","uri":"mem://` + era + `/items/{id}"},"argument":{"name":"id","value":"4"}}`})
		if err != nil || !strings.Contains(c.GetResultJson(), era+":mem://"+era+"/items/{id}:4") {
			t.Fatalf("complete %s template: %v %v", era, c, err)
		}
	}
}

func TestTraceContextReachesBackend(t *testing.T) {
	h, modern, legacy := twoEras(t)
	traceID, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	spanID, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled, Remote: true,
	}))
	for _, name := range []string{"modern_echo", "legacy_echo"} {
		if _, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range []*testBackend{modern, legacy} {
		if !slices.ContainsFunc(b.headerValues("Traceparent"), func(v string) bool {
			return strings.Contains(v, hex.EncodeToString(traceID[:]))
		}) {
			t.Fatalf("%s backend never saw trace %s; traceparents: %v", b.name, traceID, b.headerValues("Traceparent"))
		}
	}
}

// TestInputRequiredRoundTrip passes a Modern backend's multi-round-trip
// request through untouched, and the client's answers back.
func TestInputRequiredRoundTrip(t *testing.T) {
	asker := newTestBackend(t, "asker", backendOptions{extra: func(b *testBackend) {
		b.server.AddTool(&mcp.Tool{Name: "confirm", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			answer, ok := req.Params.InputResponses["ok"].(*mcp.ElicitResult)
			if !ok {
				return &mcp.CallToolResult{
					InputRequests: mcp.InputRequestMap{"ok": &mcp.ElicitParams{Message: "Proceed?", RequestedSchema: map[string]any{"type": "object"}}},
					RequestState:  "state-1",
				}, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "answer " + answer.Action + " with " + req.Params.RequestState}}}, nil
		})
	}})
	h := startAggregator(t, parseConfig(t, "aggregator:\n  backends:\n    - {name: asker, url: "+asker.url()+"}\n"))
	ctx := context.Background()
	first, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Name: "asker_confirm"})
	if err != nil {
		t.Fatal(err)
	}
	if first.GetResultType() != "input_required" || !strings.Contains(first.GetResultJson(), `"requestState":"state-1"`) ||
		!strings.Contains(first.GetResultJson(), `"elicitation/create"`) {
		t.Fatalf("first round: %v", first)
	}
	second, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{
		Name:               "asker_confirm",
		InputResponsesJson: `{"ok":{"action":"accept","content":{}}}`,
		RequestState:       "state-1",
	})
	if err != nil {
		t.Fatal(err)
	}
	if second.GetResultType() != "complete" || resultText(t, second.GetResultJson()) != "answer accept with state-1" {
		t.Fatalf("second round: %v", second)
	}
	_, err = h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Name: "asker_confirm", InputResponsesJson: `[1]`})
	wantStatus(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
}

// TestListedResourcesReadAsListed: a resource is read under the URI its
// backend lists, however that is spelled (the case of its authority, an
// escape of an unreserved character), and the backend is asked for it as
// it listed it; an equivalent spelling reads the same resource.
func TestListedResourcesReadAsListed(t *testing.T) {
	listed := []string{"docs://Items/Readme", "docs://items/%7Euser/notes"}
	docs := newTestBackend(t, "docs", backendOptions{extra: func(b *testBackend) {
		for _, uri := range listed {
			b.server.AddResource(&mcp.Resource{URI: uri, Name: uri}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "asked for " + req.Params.URI}}}, nil
			})
		}
	}})
	// Bob may not read the notes, forbidden by their listed URI.
	h := startAggregator(t, parseConfig(t, `
aggregator:
  authz: {policyFile: `+writeFile(t, "policy.cedar", `permit (principal, action, resource);
forbid (principal == User::"bob", action, resource == Resource::"docs://items/%7Euser/notes");`)+`}
  backends:
    - {name: docs, url: `+docs.url()+`}
`))
	for _, uri := range []string{"docs://items/%7Euser/notes", "docs://items/~user/notes", "docs://items/%7euser/./notes"} {
		if _, err := h.gateway.ReadResource(context.Background(), &aggregatorv1.ReadResourceRequest{Principal: principal("bob"), Uri: uri}); status.Code(err) != codes.NotFound {
			t.Errorf("bob, forbidden the notes by their listed URI, reads them as %s: %v", uri, err)
		}
	}
	for uri, asked := range map[string]string{
		"docs://Items/Readme":          "docs://Items/Readme",
		"docs://Items/./Readme":        "docs://Items/Readme",
		"docs://items/%7Euser/notes":   "docs://items/%7Euser/notes",
		"DOCS://items/~user/notes":     "docs://items/%7Euser/notes",
		"docs://items/%7euser/./notes": "docs://items/%7Euser/notes",
	} {
		resp, err := h.gateway.ReadResource(context.Background(), &aggregatorv1.ReadResourceRequest{Principal: principal("alice"), Uri: uri})
		if err != nil || !strings.Contains(resp.GetResultJson(), `"asked for `+asked+`"`) || !strings.Contains(resp.GetResultJson(), `"uri":"`+uri+`"`) {
			t.Errorf("read of %s: %v %.200s; want the backend asked for %s, the contents under %s", uri, err, resp.GetResultJson(), asked, uri)
		}
	}
}

// TestTwoSpellingsOfOneResourceConflict: two backends listing one URI
// under two spellings list one resource, which both cannot serve: a
// conflict, as for the same spelling (a read of one's exact URI was once
// served by the other, with nothing reported).
func TestTwoSpellingsOfOneResourceConflict(t *testing.T) {
	lists := func(uri string) func(*testBackend) {
		return func(b *testBackend) {
			b.server.AddResource(&mcp.Resource{URI: uri, Name: uri}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: b.name}}}, nil
			})
		}
	}
	alpha := newTestBackend(t, "alpha", backendOptions{extra: lists("docs://x/%7Ea")})
	beta := newTestBackend(t, "beta", backendOptions{extra: lists("docs://x/~a")})
	h := startAggregator(t, parseConfig(t, `
aggregator:
  backends:
    - {name: alpha, url: `+alpha.url()+`}
    - {name: beta, url: `+beta.url()+`}
`))
	ctx := context.Background()
	bk, err := h.operator.ListBackends(ctx, &aggregatorv1.ListBackendsRequest{Principal: principal("alice")})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range bk.GetConflicts() {
		found = found || c.GetKind() == "resources" && c.GetName() == "docs://x/~a"
	}
	if !found {
		t.Errorf("conflicts %v, want docs://x/~a", bk.GetConflicts())
	}
	res, err := h.gateway.ListResources(ctx, &aggregatorv1.ListResourcesRequest{Principal: principal("alice")})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.GetResources()); n > 1 {
		t.Errorf("%d resources listed for one URI: %v", n, res.GetResources())
	}
}

// TestCompletionAsksAboutWhatWasAdmitted: a completion's reference is
// read as a go-sdk backend reads it and sent rebuilt from what was
// admitted. A second member spelled in another case ("Uri") or twice
// cannot have one template admitted and another completed, and an
// app page template is completed under the backend's own URI.
func TestCompletionAsksAboutWhatWasAdmitted(t *testing.T) {
	docs := newTestBackend(t, "docs", backendOptions{stateful: true, tools: []string{"echo"}, extra: func(b *testBackend) {
		for _, tmpl := range []string{"docs://items/{id}", "docs://secret/{id}", "ui://pages/{id}"} {
			b.server.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: tmpl, Name: tmpl}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "x"}}}, nil
			})
		}
	}})
	h := startAggregatorFile(t, `
aggregator:
  backends:
    - {name: docs, url: `+docs.url()+`}
servers:
  - name: public
    backends: [docs]
    resources: {exclude: ["docs://secret/*"]}
`)
	ctx := context.Background()
	complete := func(ref string) (string, error) {
		r, err := h.gateway.Complete(ctx, &aggregatorv1.CompleteRequest{Principal: principal("alice"), Server: "public",
			ParamsJson: `{"ref":` + ref + `,"argument":{"name":"id","value":"s"}}`})
		return r.GetResultJson(), err
	}
	testkit.Eventually(t, "the templates routed", 10*time.Second, func() bool {
		_, err := complete(`{"type":"ref/resource","uri":"docs://items/{id}"}`)
		return err == nil
	})
	_, err := complete(`{"type":"ref/resource","uri":"docs://secret/{id}"}`)
	wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	for _, ref := range []string{
		`{"type":"ref/resource","uri":"docs://secret/{id}","Uri":"docs://items/{id}"}`,
		`{"type":"ref/resource","Uri":"docs://secret/{id}","uri":"docs://items/{id}"}`,
		`{"type":"ref/resource","uri":"docs://secret/{id}","uri":"docs://items/{id}"}`,
		`{"Type":"ref/prompt","type":"ref/resource","name":"x","uri":"docs://items/{id}"}`,
	} {
		got, err := complete(ref)
		if strings.Contains(got, "secret") || (err == nil && !strings.Contains(got, "docs:docs://items/{id}:s")) {
			t.Errorf("ref %s: the backend completed %s (%v)", ref, got, err)
		}
	}
	got, err := complete(`{"type":"ref/resource","uri":"ui://docs/pages/{id}"}`)
	if err != nil || !strings.Contains(got, `"docs:ui://pages/{id}:s"`) {
		t.Fatalf("the app page template ui://docs/pages/{id}: %s %v, want the backend's own ui://pages/{id} completed", got, err)
	}
}
