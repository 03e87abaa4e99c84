package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/audit"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// startAdmission starts an aggregator over admissionBackend with the
// audit trail in a file, and the configuration's extra section, once the
// backend is listed.
func startAdmission(t *testing.T, extra string) (docs *testBackend, h *harness, auditFile string) {
	t.Helper()
	docs = admissionBackend(t)
	auditFile = t.TempDir() + "/audit.jsonl"
	h = startAggregatorFile(t, `
aggregator:
  backends:
    - {name: docs, url: `+docs.url()+`}
audit:
  sink: file
  file: `+auditFile+`
`+extra+`
`)
	testkit.Eventually(t, "docs listed", 10*time.Second, func() bool { return len(listToolNames(t, h.gateway, principal("lister"), 0)) > 0 })
	return docs, h, auditFile
}

// admissionBackend is a test backend with one item of every kind, whose
// owner advertises resources.subscribe and completions: a Legacy one, so
// that a subscription is one resources/subscribe request.
func admissionBackend(t *testing.T) *testBackend {
	return newTestBackend(t, "docs", backendOptions{stateful: true, tools: []string{"echo"}, subscribe: true, extra: func(b *testBackend) {
		b.server.AddResource(&mcp.Resource{URI: "docs://a", Name: "a"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "docs://a", Text: "a"}}}, nil
		})
		b.server.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "docs://items/{id}", Name: "item"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "item"}}}, nil
		})
		b.server.AddPrompt(&mcp.Prompt{Name: "greet"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello"}}}}, nil
		})
	}})
}

// TestEveryRPCIsAdmitted enumerates the RPCs of AggregatorService from its
// service descriptor, so that a new RPC fails here until it is placed.
// Each either reaches no backend for a caller (its backend requests are
// counted to hold it to that), or is driven against a real backend under
// a limit of one request per principal and with the audit trail on: the
// first request reaches the backend and is recorded ok; the second is
// refused RESOURCE_EXHAUSTED before the backend sees it, and recorded
// rate_limited. An RPC that skipped the limit or the trail fails here.
func TestEveryRPCIsAdmitted(t *testing.T) {
	docs, h, file := startAdmission(t, "rateLimits: {limits: [{name: one-each, per: principal, rate: 1/h, burst: 1}]}")
	ctx := context.Background()

	// admitted drives one RPC as principal p; it reports whether the
	// request was admitted, failing the test on any other error.
	type admitted struct {
		method string     // the backend's method
		trail  audit.Kind // the event's kind
		call   func(p *commonv1.Principal) (bool, error)
	}
	refusedByLimit := func(err error) (bool, error) {
		if err == nil {
			return true, nil
		}
		if status.Code(err) == codes.ResourceExhausted {
			return false, nil
		}
		return false, err
	}
	watch := func(p *commonv1.Principal) (bool, error) {
		wctx, cancel := context.WithCancel(ctx)
		stream, err := h.gateway.WatchCatalog(wctx, &aggregatorv1.WatchCatalogRequest{Principal: p, ResourceUris: []string{"docs://a"}})
		if err != nil {
			cancel()
			return false, err
		}
		first, err := stream.Recv()
		if err != nil {
			cancel()
			return false, err
		}
		// The first watch stays open: its subscription is the one the
		// backend holds.
		t.Cleanup(cancel)
		// A URI the limit refused is left out, like a denied one.
		return len(first.GetSubscribedResourceUris()) == 1, nil
	}
	rpcs := map[string]*admitted{
		"CallTool": {"tools/call", audit.KindToolCall, func(p *commonv1.Principal) (bool, error) {
			return refusedByLimit(second(h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: p, Name: "docs_echo", ArgumentsJson: "{}"})))
		}},
		"CallToolStream": {"tools/call", audit.KindToolCall, func(p *commonv1.Principal) (bool, error) {
			stream, err := h.gateway.CallToolStream(ctx, &aggregatorv1.CallToolStreamRequest{Principal: p, Call: &aggregatorv1.CallToolRequest{Principal: p, Name: "docs_echo"}})
			if err != nil {
				return false, err
			}
			for {
				_, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					return true, nil
				}
				if err != nil {
					return refusedByLimit(err)
				}
			}
		}},
		"ReadResource": {"resources/read", audit.KindResourceRead, func(p *commonv1.Principal) (bool, error) {
			return refusedByLimit(second(h.gateway.ReadResource(ctx, &aggregatorv1.ReadResourceRequest{Principal: p, Uri: "docs://items/7"})))
		}},
		"GetPrompt": {"prompts/get", audit.KindPromptGet, func(p *commonv1.Principal) (bool, error) {
			return refusedByLimit(second(h.gateway.GetPrompt(ctx, &aggregatorv1.GetPromptRequest{Principal: p, Name: "docs_greet"})))
		}},
		"Complete": {"completion/complete", audit.KindCompletion, func(p *commonv1.Principal) (bool, error) {
			return refusedByLimit(second(h.gateway.Complete(ctx, &aggregatorv1.CompleteRequest{Principal: p,
				ParamsJson: `{"ref":{"type":"ref/prompt","name":"docs_greet"},"argument":{"name":"who","value":"a"}}`})))
		}},
		// Only a watch that names resources reaches a backend: each URI
		// is a subscription, admitted on its own.
		"WatchCatalog": {"resources/subscribe", audit.KindResourceSubscribe, watch},
	}
	// The RPCs that send nothing to a backend on a caller's behalf: they
	// read the catalog snapshot (and the backends' health) only.
	catalogOnly := map[string]func(p *commonv1.Principal) error{
		"Discover": func(p *commonv1.Principal) error {
			return second(h.gateway.Discover(ctx, &aggregatorv1.DiscoverRequest{Principal: p}))
		},
		"ListTools": func(p *commonv1.Principal) error {
			return second(h.gateway.ListTools(ctx, &aggregatorv1.ListToolsRequest{Principal: p}))
		},
		"ListResources": func(p *commonv1.Principal) error {
			return second(h.gateway.ListResources(ctx, &aggregatorv1.ListResourcesRequest{Principal: p}))
		},
		"ListResourceTemplates": func(p *commonv1.Principal) error {
			return second(h.gateway.ListResourceTemplates(ctx, &aggregatorv1.ListResourceTemplatesRequest{Principal: p}))
		},
		"ListPrompts": func(p *commonv1.Principal) error {
			return second(h.gateway.ListPrompts(ctx, &aggregatorv1.ListPromptsRequest{Principal: p}))
		},
		"ListBackends": func(p *commonv1.Principal) error {
			return second(h.gateway.ListBackends(ctx, &aggregatorv1.ListBackendsRequest{Principal: p}))
		},
	}
	// ResumeHeldCall and ResumeHeldCallStream carry a held call's retry
	// that the replica which received it forwards here: they are admitted
	// as CallTool is (found, filtered, authorized, with the caller's
	// credentials), and the receiving replica, which ran CallTool's
	// admission, took its tokens and records its event (route_test.go's
	// forward row drives both across replicas).
	forwardedRetry := map[string]bool{"ResumeHeldCall": true, "ResumeHeldCallStream": true}
	// The requests about a task read it from the task store by its
	// owner, server and id first: one that is not the caller's is
	// NOT_FOUND before any other step, recorded as such. Those about the caller's task are
	// admitted as calls of its tool (tasks.go), which test/e2e's task
	// tests drive through real processes.
	const unknownTask = "t1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	taskRequests := map[string]func(p *commonv1.Principal) error{
		"GetTask": func(p *commonv1.Principal) error {
			return second(h.gateway.GetTask(ctx, &aggregatorv1.GetTaskRequest{Principal: p, TaskId: unknownTask}))
		},
		"UpdateTask": func(p *commonv1.Principal) error {
			return second(h.gateway.UpdateTask(ctx, &aggregatorv1.UpdateTaskRequest{Principal: p, TaskId: unknownTask, InputResponsesJson: `{"q":{"action":"accept"}}`}))
		},
		"CancelTask": func(p *commonv1.Principal) error {
			return second(h.gateway.CancelTask(ctx, &aggregatorv1.CancelTaskRequest{Principal: p, TaskId: unknownTask}))
		},
	}
	// RunCode reaches backends only through the tool calls its program
	// makes, each admitted by callTool as a CallTool (codemode_test.go
	// shows them filtered, authorized, limited and audited); where code
	// mode is off, as here, it is NOT_FOUND before anything.
	taskRequests["RunCode"] = func(p *commonv1.Principal) error {
		return second(h.gateway.RunCode(ctx, &aggregatorv1.RunCodeRequest{Principal: p, Program: "result = docs_echo()"}))
	}
	// GetTraffic reads what the replica counted, for operators.
	catalogOnly["GetTraffic"] = func(*commonv1.Principal) error {
		return second(h.operator.GetTraffic(ctx, &aggregatorv1.GetTrafficRequest{}))
	}
	catalogOnly["ListTasks"] = func(p *commonv1.Principal) error {
		return second(h.gateway.ListTasks(ctx, &aggregatorv1.ListTasksRequest{Principal: p}))
	}

	desc := aggregatorv1.AggregatorService_ServiceDesc
	var names []string
	for _, m := range desc.Methods {
		names = append(names, m.MethodName)
	}
	for _, s := range desc.Streams {
		names = append(names, s.StreamName)
	}
	backendCalls := func() int {
		n := 0
		for _, m := range []string{"tools/call", "resources/read", "prompts/get", "completion/complete", "resources/subscribe"} {
			n += docs.received(m)
		}
		return n
	}
	for _, name := range names {
		p := principal("caller-of-" + name)
		switch {
		case rpcs[name] != nil:
			r := rpcs[name]
			before := docs.received(r.method)
			if ok, err := r.call(p); err != nil || !ok {
				t.Fatalf("%s: the first request was not admitted: %v", name, err)
			}
			if got := docs.received(r.method); got != before+1 {
				t.Fatalf("%s: the backend received %d %s requests, want 1 (%v)", name, got-before, r.method, docs.methods)
			}
			if ok, err := r.call(p); err != nil || ok {
				t.Fatalf("%s: the second request was admitted past a limit of one (err %v)", name, err)
			}
			if got := docs.received(r.method); got != before+1 {
				t.Fatalf("%s: the backend received a request the limit refused", name)
			}
		case catalogOnly[name] != nil:
			before := backendCalls()
			if err := catalogOnly[name](p); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if backendCalls() != before {
				t.Fatalf("%s reached a backend; admit it (admit.go) and drive it in this test", name)
			}
		case forwardedRetry[name]:
		case taskRequests[name] != nil:
			before := backendCalls()
			if err := taskRequests[name](p); status.Code(err) != codes.NotFound {
				t.Fatalf("%s of a task that does not exist: %v, want NotFound", name, err)
			}
			if backendCalls() != before {
				t.Fatalf("%s of a task that does not exist reached a backend", name)
			}
		default:
			t.Fatalf("RPC %s is neither admitted nor declared to reach no backend: place it in this test", name)
		}
	}

	h.audit.Close() // flushes
	events := readTrail(t, file)
	for name, r := range rpcs {
		subject := "caller-of-" + name
		var got []audit.Outcome
		for _, e := range events {
			if e.Subject == subject {
				if e.Kind != r.trail || e.Backend != "docs" {
					t.Errorf("%s: event %+v, want kind %s, backend docs", name, e, r.trail)
				}
				got = append(got, e.Outcome)
			}
		}
		if len(got) != 2 || got[0] != audit.OutcomeOK || got[1] != audit.OutcomeRateLimited {
			t.Errorf("%s: outcomes %v, want [ok rate_limited] (%d events)", name, got, len(events))
		}
	}
	for name := range catalogOnly {
		for _, e := range events {
			if e.Subject == "caller-of-"+name {
				t.Errorf("%s left an event %+v", name, e)
			}
		}
	}
	// A refused request about a task is in the trail like any refusal:
	// a client probing task ids leaves its events.
	for name, kind := range map[string]audit.Kind{"GetTask": audit.KindTaskGet, "UpdateTask": audit.KindTaskUpdate, "CancelTask": audit.KindTaskCancel} {
		var got []string
		for _, e := range events {
			if e.Subject == "caller-of-"+name {
				got = append(got, string(e.Kind)+" "+string(e.Outcome))
			}
		}
		if want := string(kind) + " " + string(audit.OutcomeNotFound); !slices.Equal(got, []string{want}) {
			t.Errorf("%s of a task that does not exist left events %q, want [%s]", name, got, want)
		}
	}
}

// A renewal spares a subscription its token and its event because the
// gateway reopening a session's watch paid both already; an internal
// client has no earlier watch its claim could be checked against, so its
// renewals are admitted like new subscriptions.
func TestRenewalsOnlyFromTheGateway(t *testing.T) {
	_, h, file := startAdmission(t, "rateLimits: {limits: [{name: one-each, per: principal, rate: 1/h, burst: 1}]}")
	subscribed := func(renewed bool) int {
		ctx, cancel := context.WithCancel(t.Context())
		t.Cleanup(cancel)
		req := &aggregatorv1.WatchCatalogRequest{ResourceUris: []string{"docs://a"}}
		if renewed {
			req.RenewedResourceUris = req.ResourceUris
		}
		stream, err := h.internal.WatchCatalog(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		first, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return len(first.GetSubscribedResourceUris())
	}
	if subscribed(false) != 1 || subscribed(true) != 0 || subscribed(true) != 0 {
		t.Fatal("an internal client's renewal passed a limit of one")
	}
	h.audit.Close() // flushes
	if n := len(resourceSubscribeEvents(t, file)); n != 3 {
		t.Fatalf("%d resource_subscribe events for an internal client's 3 subscriptions", n)
	}
}

// TestServerFilterAppliesToTheURIRead: a virtual server's resources.exclude
// holds for a URI read through one of its templates, not only for the
// listing: the excluded URI answers NOT_FOUND, like a missing one, and the
// backend never sees the read; another URI of the same template is read.
func TestServerFilterAppliesToTheURIRead(t *testing.T) {
	docs := admissionBackend(t)
	h := startAggregatorFile(t, `
aggregator:
  backends:
    - {name: docs, url: `+docs.url()+`}
servers:
  - name: public
    backends: [docs]
    resources: {exclude: ["docs://items/secret*"]}
`)
	ctx := context.Background()
	alice := principal("alice")
	read := func(server, uri string) error {
		return second(h.gateway.ReadResource(ctx, &aggregatorv1.ReadResourceRequest{Principal: alice, Server: server, Uri: uri}))
	}
	testkit.Eventually(t, "the template routed", 10*time.Second, func() bool { return read("public", "docs://items/1") == nil })
	before := docs.received("resources/read")
	wantStatus(t, read("public", "docs://items/secret-plans"), codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	wantStatus(t, read("public", "docs://nothing"), codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	// Nor under another spelling of the same URI (RFC 3986's equivalents),
	// which the template matches too and a backend may decode.
	for _, uri := range []string{"docs://items/%73ecret-plans", "DOCS://items/secret-plans", "docs://items/secret%2Dplans"} {
		wantStatus(t, read("public", uri), codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	}
	if got := docs.received("resources/read"); got != before {
		t.Fatalf("the backend received %d reads the server's filter excludes", got-before)
	}
	// The whole catalog has no such filter.
	if err := read("", "docs://items/secret-plans"); err != nil {
		t.Fatalf("read through /mcp: %v", err)
	}
	// Completion of a resource reference goes by the same rule.
	complete := func(uri string) error {
		return second(h.gateway.Complete(ctx, &aggregatorv1.CompleteRequest{Principal: alice, Server: "public",
			ParamsJson: `{"ref":{"type":"ref/resource","uri":"` + uri + `"},"argument":{"name":"id","value":"s"}}`}))
	}
	if err := complete("docs://items/{id}"); err != nil {
		t.Fatalf("completion of the template: %v", err)
	}
	completions := docs.received("completion/complete")
	for _, uri := range []string{"docs://items/secret-plans", "docs://items/%73ecret-plans", "docs://items/x/../secret-plans"} {
		wantStatus(t, complete(uri), codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	}
	if got := docs.received("completion/complete"); got != completions {
		t.Fatalf("the backend received %d completions the server's filter excludes", got-completions)
	}
	// And a subscription, under every spelling.
	subscribes := docs.received("resources/subscribe")
	if got := watchedURIs(t, h, alice, "public", "docs://items/secret-plans", "docs://items/%73ecret-plans", "docs://items/x/../secret-plans"); len(got) != 0 {
		t.Fatalf("subscribed through the server's filter: %v", got)
	}
	if got := docs.received("resources/subscribe"); got != subscribes {
		t.Fatalf("the backend received %d subscriptions the server's filter excludes", got-subscribes)
	}
}

// TestPolicyAppliesToEverySpellingOfAURI: a Cedar forbid on a resource
// holds for every request naming it, under any of its spellings.
func TestPolicyAppliesToEverySpellingOfAURI(t *testing.T) {
	docs := admissionBackend(t)
	h := startAggregatorFile(t, `
aggregator:
  backends:
    - {name: docs, url: `+docs.url()+`}
  authz: {policyFile: `+writeFile(t, "policy.cedar", "permit (principal, action, resource);\nforbid (principal == User::\"alice\", action, resource == Resource::\"docs://items/secret\");\n")+`}
`)
	ctx := context.Background()
	alice := principal("alice")
	read := func(uri string) error {
		return second(h.gateway.ReadResource(ctx, &aggregatorv1.ReadResourceRequest{Principal: alice, Uri: uri}))
	}
	testkit.Eventually(t, "the template routed", 10*time.Second, func() bool { return read("docs://items/1") == nil })
	spellings := []string{"docs://items/secret", "docs://items/%73ecret", "DOCS://items/secret", "docs://items/a/../secret", "docs://items/a%2F..%2Fsecret"}
	for _, uri := range spellings {
		wantStatus(t, read(uri), codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
		wantStatus(t, second(h.gateway.Complete(ctx, &aggregatorv1.CompleteRequest{Principal: alice,
			ParamsJson: `{"ref":{"type":"ref/resource","uri":"` + uri + `"},"argument":{"name":"id","value":"s"}}`})),
			codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	}
	if got := watchedURIs(t, h, alice, "", spellings...); len(got) != 0 {
		t.Fatalf("alice subscribed to a resource the policy forbids her: %v", got)
	}
	// A renewed subscription (the gateway's reopened watch) is decided
	// again: renewal spares only its token and event.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := h.gateway.WatchCatalog(ctx, &aggregatorv1.WatchCatalogRequest{Principal: alice, ResourceUris: spellings, RenewedResourceUris: spellings})
	if err != nil {
		t.Fatal(err)
	}
	if first, err := stream.Recv(); err != nil || len(first.GetSubscribedResourceUris()) != 0 {
		t.Fatalf("alice renewed subscriptions the policy forbids her: %v %v", first.GetSubscribedResourceUris(), err)
	}
	if got := watchedURIs(t, h, principal("bob"), "", spellings...); len(got) != len(spellings) {
		t.Fatalf("bob, whom the policy allows, subscribed to %v of %v", got, spellings)
	}
}

// watchedURIs opens a watch of server subscribing to uris and returns
// those its first message says are subscribed.
func watchedURIs(t *testing.T, h *harness, p *commonv1.Principal, server string, uris ...string) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stream, err := h.gateway.WatchCatalog(ctx, &aggregatorv1.WatchCatalogRequest{Principal: p, Server: server, ResourceUris: uris})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return first.GetSubscribedResourceUris()
}

// TestServerFilterAppliesAfterDotSegments: a URI with dot segments is the
// URI they resolve to (RFC 3986, 5.2.4), for a backend that resolves
// paths serves that one; the filter holds for it, and the backend is
// asked for the resolved form. So it does for the path a backend that
// decodes escaped slashes first finds.
func TestServerFilterAppliesAfterDotSegments(t *testing.T) {
	docs := newTestBackend(t, "docs", backendOptions{tools: []string{"echo"}, extra: withFilesByPath})
	h := startAggregatorFile(t, `
aggregator:
  backends:
    - {name: docs, url: `+docs.url()+`}
servers:
  - name: public
    backends: [docs]
    resources: {exclude: ["docs://files/secret/*"]}
`)
	ctx := context.Background()
	read := func(uri string) (string, error) {
		r, err := h.gateway.ReadResource(ctx, &aggregatorv1.ReadResourceRequest{Principal: principal("alice"), Server: "public", Uri: uri})
		return r.GetResultJson(), err
	}
	testkit.Eventually(t, "the template routed", 10*time.Second, func() bool { _, err := read("docs://files/pub/a"); return err == nil })
	for _, uri := range []string{"docs://files/secret/keys", "docs://files/pub/../secret/keys", "docs://files/pub/%2E%2E/secret/keys", "docs://files/./secret/keys",
		// Escaped slashes, which such a backend decodes before it
		// resolves the path.
		"docs://files/secret%2Fkeys", "docs://files/pub/..%2Fsecret/keys", "docs://files/pub%2F..%2Fsecret%2Fkeys", "docs://files/pub%5C..%5Csecret%5Ckeys",
		// An empty segment that such a backend collapses before it
		// resolves "..".
		"docs://files/pub/%2F..%2Fsecret/keys", "docs://files/pub%2F%2F..%2Fsecret/keys", "docs://files//secret/keys"} {
		_, err := read(uri)
		wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	}
	// The backend is asked for the canonical form; the client gets the
	// contents under the URI it asked for.
	got, err := read("docs://files/secret/../pub/b")
	if err != nil || !strings.Contains(got, `"contents of /pub/b"`) || !strings.Contains(got, `"uri":"docs://files/secret/../pub/b"`) {
		t.Fatalf("read of a kept file through dot segments: %v %s, want /pub/b under the URI asked for", err, got)
	}
}

// TestServerFilterAppliesToAnEscapedSlashInTheAuthority: a template
// whose variable follows "://" ("notes://{name}") takes the authority as
// part of its name. A backend that decodes that name before resolving it
// finds "notes://pub%2F..%2Fsecret" as "secret", so the filter must hold
// for "notes://secret" there; it held for "notes://pub/secret", the URI
// the decoded text names under RFC 3986, and the backend read the
// excluded note.
func TestServerFilterAppliesToAnEscapedSlashInTheAuthority(t *testing.T) {
	notes := newTestBackend(t, "notes", backendOptions{tools: []string{"echo"}, extra: func(b *testBackend) {
		b.server.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "notes://{name}", Name: "note"},
			func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				name, err := url.PathUnescape(strings.TrimPrefix(req.Params.URI, "notes://"))
				if err != nil {
					return nil, err
				}
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "note " + path.Clean("/"+name)}}}, nil
			})
	}})
	h := startAggregatorFile(t, `
aggregator:
  backends:
    - {name: notes, url: `+notes.url()+`}
servers:
  - name: public
    backends: [notes]
    resources: {exclude: ["notes://secret"]}
`)
	ctx := context.Background()
	read := func(uri string) (string, error) {
		r, err := h.gateway.ReadResource(ctx, &aggregatorv1.ReadResourceRequest{Principal: principal("alice"), Server: "public", Uri: uri})
		return r.GetResultJson(), err
	}
	testkit.Eventually(t, "the template routed", 10*time.Second, func() bool { _, err := read("notes://pub"); return err == nil })
	for _, uri := range []string{"notes://secret", "notes://pub%2F..%2Fsecret", "notes://pub%5C..%5Csecret", "notes://%2E%2E%2Fsecret"} {
		got, err := read(uri)
		if status.Code(err) != codes.NotFound {
			t.Errorf("read %s: %v %s, want the excluded note missing", uri, err, got)
		}
	}
	if got, err := read("notes://secret%2F..%2Fpub"); err != nil || !strings.Contains(got, "note /pub") {
		t.Fatalf("read of a kept note through an escaped slash: %v %s", err, got)
	}
}

// TestPolicyHoldsForAQueryAddedThroughATemplate: a backend that serves
// a template's URIs by their path ignores a query or fragment, so
// "docs://files/secret/keys?v=1" is the file a policy forbids; the policy
// was asked about the URI with its query only, which no rule names, and
// the backend served the forbidden file.
func TestPolicyHoldsForAQueryAddedThroughATemplate(t *testing.T) {
	docs := newTestBackend(t, "docs", backendOptions{tools: []string{"echo"}, extra: withFilesByPath})
	h := startAggregatorFile(t, `
aggregator:
  authz: {policyFile: `+writeFile(t, "policy.cedar", "permit (principal, action, resource);\nforbid (principal, action, resource == Resource::\"docs://files/secret/keys\");\n")+`}
  backends:
    - {name: docs, url: `+docs.url()+`}
`)
	ctx := context.Background()
	read := func(uri string) (string, error) {
		r, err := h.gateway.ReadResource(ctx, &aggregatorv1.ReadResourceRequest{Principal: principal("alice"), Uri: uri})
		return r.GetResultJson(), err
	}
	testkit.Eventually(t, "the template routed", 10*time.Second, func() bool { _, err := read("docs://files/pub/a"); return err == nil })
	for _, uri := range []string{"docs://files/secret/keys", "docs://files/secret/keys?v=1", "docs://files/secret/keys#top", "docs://files/secret/keys/?v=1#top"} {
		if got, err := read(uri); status.Code(err) != codes.NotFound {
			t.Errorf("read %s: %v %s, want the forbidden file missing", uri, err, got)
		}
	}
	if got, err := read("docs://files/pub/a?v=1"); err != nil || !strings.Contains(got, "contents of /pub/a") {
		t.Fatalf("read of an allowed file with a query: %v %s", err, got)
	}
}

// TestDecodedPathDeniedWhileTheBackendIsDown: a URI read through a
// template whose decoded path the policy denies is missing, as when its
// backend is up. With the backend down it was "unavailable", as the URI
// as written was authorized and found down before the decoded path was
// asked about, which told a denied path from a missing one.
func TestDecodedPathDeniedWhileTheBackendIsDown(t *testing.T) {
	docs := newTestBackend(t, "docs", backendOptions{tools: []string{"echo"}, extra: func(b *testBackend) {
		b.server.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "docs://files/{+path}", Name: "file"},
			func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "a file"}}}, nil
			})
	}})
	h := startAggregatorFile(t, `
aggregator:
  catalogTTL: 1h
  health: {interval: 50ms, timeout: 500ms, unhealthyThreshold: 1}
  authz: {policyFile: `+writeFile(t, "policy.cedar", "permit (principal, action, resource);\nforbid (principal, action, resource == Resource::\"docs://files/secret/keys\");\n")+`}
  backends:
    - {name: docs, url: `+docs.url()+`}
`)
	ctx := context.Background()
	read := func(uri string) error {
		_, err := h.gateway.ReadResource(ctx, &aggregatorv1.ReadResourceRequest{Principal: principal("alice"), Uri: uri})
		return err
	}
	testkit.Eventually(t, "the template routed", 10*time.Second, func() bool { return read("docs://files/pub/a") == nil })
	wantStatus(t, read("docs://files/secret%2Fkeys"), codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	docs.down.Store(true)
	testkit.Eventually(t, "docs unhealthy", 5*time.Second, func() bool {
		return backendHealth(t, h, "docs").GetHealth() == aggregatorv1.BackendHealth_BACKEND_HEALTH_UNHEALTHY
	})
	wantStatus(t, read("docs://files/pub/a"), codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_BACKEND_UNAVAILABLE)
	wantStatus(t, read("docs://files/secret%2Fkeys"), codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
}

// TestServerFilterAppliesToEverySpellingOfAListedURI: a backend may list
// a URI in a form other than the canonical one ("%7E" for "~", as Java's
// URLEncoder writes it) and serve it through a template as well; a
// pattern written either way keeps it out of the list and of reads under
// every spelling.
func TestServerFilterAppliesToEverySpellingOfAListedURI(t *testing.T) {
	docs := newTestBackend(t, "docs", backendOptions{tools: []string{"echo"}, extra: func(b *testBackend) {
		read := func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "salary"}}}, nil
		}
		b.server.AddResource(&mcp.Resource{URI: "docs://items/%7Eboss/salary", Name: "salary"}, read)
		b.server.AddResource(&mcp.Resource{URI: "docs://items/public", Name: "public"}, read)
		b.server.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "docs://items/{+path}", Name: "item"}, read)
	}})
	for _, pattern := range []string{"docs://items/%7Eboss/*", "docs://items/~boss/*", "docs://items/%7eboss/*"} {
		h := startAggregatorFile(t, `
aggregator:
  backends:
    - {name: docs, url: `+docs.url()+`}
servers:
  - {name: support, backends: [docs], resources: {exclude: ["`+pattern+`"]}}
`)
		ctx, alice := context.Background(), principal("alice")
		var listed []string
		testkit.Eventually(t, "the resources listed", 10*time.Second, func() bool {
			res, err := h.gateway.ListResources(ctx, &aggregatorv1.ListResourcesRequest{Principal: alice, Server: "support"})
			listed = nil
			for _, r := range res.GetResources() {
				listed = append(listed, r.GetUri())
			}
			return err == nil && len(listed) > 0
		})
		if !slices.Equal(listed, []string{"docs://items/public"}) {
			t.Errorf("exclude %s: support lists %v, want only docs://items/public", pattern, listed)
		}
		for _, uri := range []string{"docs://items/%7Eboss/salary", "docs://items/~boss/salary", "docs://items/%7eboss/salary"} {
			_, err := h.gateway.ReadResource(ctx, &aggregatorv1.ReadResourceRequest{Principal: alice, Server: "support", Uri: uri})
			wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
		}
	}
}

// TestServerFilterAppliesToEverySpellingOfATemplate: a pattern is read in
// canonical form for a resource template as for a URI. "docs://%69tems/*"
// once kept the reads of docs://items/7 out but listed the template
// docs://items/{id} and sent its completions to the backend, as the
// template was matched as written.
func TestServerFilterAppliesToEverySpellingOfATemplate(t *testing.T) {
	docs := admissionBackend(t)
	for _, pattern := range []string{"docs://items/*", "docs://%69tems/*", "DOCS://items/*"} {
		h := startAggregatorFile(t, `
aggregator:
  backends:
    - {name: docs, url: `+docs.url()+`}
servers:
  - {name: public, backends: [docs], resources: {exclude: ["`+pattern+`"]}}
`)
		ctx, alice := context.Background(), principal("alice")
		testkit.Eventually(t, "the resources listed", 10*time.Second, func() bool {
			res, err := h.gateway.ListResources(ctx, &aggregatorv1.ListResourcesRequest{Principal: alice, Server: "public"})
			return err == nil && len(res.GetResources()) > 0
		})
		templates, err := h.gateway.ListResourceTemplates(ctx, &aggregatorv1.ListResourceTemplatesRequest{Principal: alice, Server: "public"})
		if err != nil || len(templates.GetResourceTemplates()) != 0 {
			t.Errorf("exclude %s: public lists the templates %v (%v), want none", pattern, templates.GetResourceTemplates(), err)
		}
		before := docs.received("completion/complete")
		_, err = h.gateway.Complete(ctx, &aggregatorv1.CompleteRequest{Principal: alice, Server: "public",
			ParamsJson: `{"ref":{"type":"ref/resource","uri":"docs://items/{id}"},"argument":{"name":"id","value":"s"}}`})
		wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
		if n := docs.received("completion/complete") - before; n != 0 {
			t.Errorf("exclude %s: %d completions of the excluded template reached the backend", pattern, n)
		}
	}
}

// TestPolicyOnATemplateHoldsForReadsThroughIt: a policy that forbids a
// resource template forbids what is read through it, as a server filter
// that leaves the template out does: the template is not listed, not
// completed and not read through, and the refused read looks like a
// missing resource. Before, the read was authorized for its URI alone,
// and the forbidden template served it.
func TestPolicyOnATemplateHoldsForReadsThroughIt(t *testing.T) {
	docs := admissionBackend(t)
	h := startAggregatorFile(t, `
aggregator:
  authz: {policyFile: `+writeFile(t, "policy.cedar", "permit (principal, action, resource);\nforbid (principal == User::\"bob\", action, resource == Resource::\"docs://items/{id}\");\n")+`}
  backends:
    - {name: docs, url: `+docs.url()+`}
`)
	ctx := context.Background()
	testkit.Eventually(t, "the templates listed", 10*time.Second, func() bool {
		res, err := h.gateway.ListResourceTemplates(ctx, &aggregatorv1.ListResourceTemplatesRequest{Principal: principal("alice")})
		return err == nil && len(res.GetResourceTemplates()) == 1
	})
	if res, err := h.gateway.ListResourceTemplates(ctx, &aggregatorv1.ListResourceTemplatesRequest{Principal: principal("bob")}); err != nil || len(res.GetResourceTemplates()) != 0 {
		t.Fatalf("bob is shown the templates %v (%v), want none", res.GetResourceTemplates(), err)
	}
	if _, err := h.gateway.ReadResource(ctx, &aggregatorv1.ReadResourceRequest{Principal: principal("alice"), Uri: "docs://items/7"}); err != nil {
		t.Fatalf("alice's read through the template: %v", err)
	}
	before := docs.received("resources/read")
	_, err := h.gateway.ReadResource(ctx, &aggregatorv1.ReadResourceRequest{Principal: principal("bob"), Uri: "docs://items/7"})
	wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	if n := docs.received("resources/read") - before; n != 0 {
		t.Errorf("%d of bob's reads through the forbidden template reached the backend", n)
	}
	// A listed resource no template serves is bob's to read.
	if _, err := h.gateway.ReadResource(ctx, &aggregatorv1.ReadResourceRequest{Principal: principal("bob"), Uri: "docs://a"}); err != nil {
		t.Fatalf("bob's read of a listed resource: %v", err)
	}
}

// TestTrailNamesAResourceAsItIsRead: a read, a subscription and a
// completion of one resource record it under one URI, whatever spelling
// named it, the form it is routed, filtered and authorized under. A read
// recorded "docs://items/7" for "DOCS://items/%37", while a subscription
// and a completion recorded the spelling, so a search of the trail for
// the resource missed them.
func TestTrailNamesAResourceAsItIsRead(t *testing.T) {
	_, h, file := startAdmission(t, "")
	ctx := context.Background()
	p := principal("alice")
	const spelling = "DOCS://items/%37"
	if err := second(h.gateway.ReadResource(ctx, &aggregatorv1.ReadResourceRequest{Principal: p, Uri: spelling})); err != nil {
		t.Fatal(err)
	}
	if got := watchedURIs(t, h, p, "", spelling); len(got) != 1 {
		t.Fatalf("subscribed %v, want %s", got, spelling)
	}
	if err := second(h.gateway.Complete(ctx, &aggregatorv1.CompleteRequest{Principal: p,
		ParamsJson: `{"ref":{"type":"ref/resource","uri":"` + spelling + `"},"argument":{"name":"id","value":"7"}}`})); err != nil {
		t.Fatal(err)
	}
	h.audit.Close() // flushes
	kinds := map[audit.Kind]bool{}
	for _, e := range readTrail(t, file) {
		if e.Subject != "alice" {
			continue
		}
		kinds[e.Kind] = true
		if e.Resource != "docs://items/7" {
			t.Errorf("%s event names %q, want docs://items/7", e.Kind, e.Resource)
		}
	}
	if len(kinds) != 3 {
		t.Fatalf("events of kinds %v, want a read, a subscription and a completion", kinds)
	}
}

// second is the error of a (result, error) pair.
func second[T any](_ T, err error) error { return err }

// readTrail reads the events of an audit file sink.
func readTrail(t *testing.T, file string) []audit.Event {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var events []audit.Event
	lines := bufio.NewScanner(strings.NewReader(string(raw)))
	for lines.Scan() {
		var e audit.Event
		if err := json.Unmarshal(lines.Bytes(), &e); err != nil {
			t.Fatalf("line %q: %v", lines.Text(), err)
		}
		events = append(events, e)
	}
	return events
}

// TestViewsOfPrincipalsSpelledAlike: a principal is never handed another's
// view. A subject "alice\x00admins" in group x once got the view cached
// for alice in admins and x (and its own, empty, view was served to her
// when it came first): a principal with a control character is refused
// now, and views are cached under keys no principal can spell alike.
func TestViewsOfPrincipalsSpelledAlike(t *testing.T) {
	tickets := newTestBackend(t, "tickets", backendOptions{tools: []string{"get"}})
	h := startAggregatorFile(t, `
aggregator:
  authz: {policyFile: `+writeFile(t, "policy.cedar", `permit (principal in Group::"admins", action, resource);`)+`}
  backends:
    - {name: tickets, url: `+tickets.url()+`}
`)
	alice := &commonv1.Principal{Subject: "alice", Groups: []string{"admins", "x"}}
	mallory := &commonv1.Principal{Subject: "alice\x00admins", Groups: []string{"x"}}
	list := func(p *commonv1.Principal) error {
		_, err := h.gateway.ListTools(context.Background(), &aggregatorv1.ListToolsRequest{Principal: p})
		return err
	}
	if err := list(mallory); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a subject with a NUL: %v, want INVALID_ARGUMENT", err)
	}
	if got := listToolNames(t, h.gateway, alice, 0); !slices.Contains(got, "tickets_get") {
		t.Fatalf("alice, listing after mallory, sees %v", got)
	}
	if err := list(mallory); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a subject with a NUL, after alice: %v", err)
	}
}

// withFilesByPath adds the template docs://files/{+path}, whose reads
// answer "contents of" the path as a backend serving files by their path
// finds it: Go's url.Parse decodes escapes first (a query and fragment
// apart), path.Clean resolves dot segments and doubled slashes.
func withFilesByPath(b *testBackend) {
	b.server.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "docs://files/{+path}", Name: "file"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			u, err := url.Parse(req.Params.URI)
			if err != nil {
				return nil, err
			}
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "contents of " + path.Clean(u.Path)}}}, nil
		})
}
