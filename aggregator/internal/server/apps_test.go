package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

const uiExtension = "io.modelcontextprotocol/ui"

// withApp gives a backend an MCP App: the tool show naming the listed page
// ui://app/index.html, the tool secret naming ui://app/secret.html, which
// only the template ui://app/{page} serves, and pages that say whose they
// are and which URI the backend was asked for.
func withApp(b *testBackend) {
	page := func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/html;profile=mcp-app",
			Text: "<!doctype html><p>" + b.name + " page " + req.Params.URI + "</p>",
			Meta: mcp.Meta{"ui": map[string]any{"csp": map[string]any{"connectDomains": []string{"https://api.example.com"}}}}}}}, nil
	}
	b.server.AddResource(&mcp.Resource{URI: "ui://app/index.html", Name: "app", MIMEType: "text/html;profile=mcp-app",
		Meta: mcp.Meta{"ui": map[string]any{"prefersBorder": true}}}, page)
	b.server.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "ui://app/{page}", Name: "pages"}, page)
	for name, uri := range map[string]string{"show": "ui://app/index.html", "secret": "ui://app/secret.html"} {
		b.server.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"},
			Meta: mcp.Meta{"ui": map[string]any{"resourceUri": uri, "visibility": []string{"model", "app"}}}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.name + " " + name}}}, nil
			})
	}
}

const appsPolicy = `
permit (principal in Group::"users", action, resource);
// nopages may call the tools but not read the maps page.
forbid (principal in Group::"nopages", action == Action::"read_resource", resource == Resource::"ui://maps/app/index.html");
// nosecret may not call maps_secret, so it may not read its unlisted page.
forbid (principal in Group::"nosecret", action == Action::"call_tool", resource == Tool::"maps_secret");
`

// TestAppsThroughTheCatalog: two backends, one of each era, with the same
// page URI. Each page is advertised under its backend's name, in the
// resources and in the tools that name it, and reads reach the right
// backend under its own URI; the extension is advertised to callers who
// see the backend that advertises it. A policy that hides a page removes
// it from its tools, and a tool hidden from a caller does not leak its
// unlisted page.
func TestAppsThroughTheCatalog(t *testing.T) {
	apps := &mcp.ServerCapabilities{}
	apps.AddExtension(uiExtension, nil)
	maps := newTestBackend(t, "maps", backendOptions{extra: withApp, capabilities: apps})
	charts := newTestBackend(t, "charts", backendOptions{stateful: true, extra: withApp})
	h := startAggregator(t, parseConfig(t, `
aggregator:
  authz: {policyFile: `+writeFile(t, "policy.cedar", appsPolicy)+`}
  backends:
    - {name: maps, url: `+maps.url()+`}
    - {name: charts, url: `+charts.url()+`, protocol: "2025-11-25"}
`))
	ctx := context.Background()
	alice, bob, carol := principal("alice", "users"), principal("bob", "users", "nopages"), principal("carol", "users", "nosecret")

	tools := func(p *commonv1.Principal) map[string]string {
		resp, err := h.gateway.ListTools(ctx, &aggregatorv1.ListToolsRequest{Principal: p})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, tool := range resp.GetTools() {
			out[tool.GetName()] = tool.GetDefinitionJson()
		}
		return out
	}
	read := func(p *commonv1.Principal, uri string) (string, error) {
		resp, err := h.gateway.ReadResource(ctx, &aggregatorv1.ReadResourceRequest{Principal: p, Uri: uri})
		return resp.GetResultJson(), err
	}

	all := tools(alice)
	for name, want := range map[string]string{
		"maps_show": "ui://maps/app/index.html", "charts_show": "ui://charts/app/index.html",
		"maps_secret": "ui://maps/app/secret.html", "charts_secret": "ui://charts/app/secret.html",
	} {
		if !strings.Contains(all[name], `"resourceUri":"`+want+`","visibility":["model","app"]`) {
			t.Errorf("%s: %s, want its page %s", name, all[name], want)
		}
	}
	res, err := h.gateway.ListResources(ctx, &aggregatorv1.ListResourcesRequest{Principal: alice})
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, r := range res.GetResources() {
		uris = append(uris, r.GetUri())
		if !strings.Contains(r.GetDefinitionJson(), `"prefersBorder":true`) {
			t.Errorf("resource metadata lost: %s", r.GetDefinitionJson())
		}
	}
	if strings.Join(uris, " ") != "ui://charts/app/index.html ui://maps/app/index.html" {
		t.Errorf("resources %v", uris)
	}
	for _, c := range []struct{ uri, backend, asked string }{
		{"ui://maps/app/index.html", "maps", "ui://app/index.html"},
		{"ui://charts/app/index.html", "charts", "ui://app/index.html"},
		{"ui://maps/app/secret.html", "maps", "ui://app/secret.html"},
		{"ui://charts/app/other.html", "charts", "ui://app/other.html"},
	} {
		got, err := read(alice, c.uri)
		if err != nil {
			t.Fatalf("read %s: %v", c.uri, err)
		}
		if !strings.Contains(got, c.backend+" page "+c.asked) || !strings.Contains(got, `"uri":"`+c.uri+`"`) ||
			!strings.Contains(got, `"connectDomains":["https://api.example.com"]`) {
			t.Errorf("read %s: %s", c.uri, got)
		}
	}
	// The backends' own URIs name nothing here.
	_, err = read(alice, "ui://app/index.html")
	wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)

	// bob may not read the maps page: maps_show is listed without it, the
	// read is refused like a missing page, and charts' is untouched.
	bobs := tools(bob)
	if strings.Contains(bobs["maps_show"], "resourceUri") || !strings.Contains(bobs["maps_show"], `"visibility":["model","app"]`) {
		t.Errorf("bob's maps_show: %s", bobs["maps_show"])
	}
	if bobs["charts_show"] != all["charts_show"] {
		t.Errorf("bob's charts_show: %s", bobs["charts_show"])
	}
	_, denied := read(bob, "ui://maps/app/index.html")
	_, missing := read(bob, "ui://maps/app/none-such.html.missing/")
	wantStatus(t, denied, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	if ds, ms := status.Convert(denied), status.Convert(missing); ds.Code() != ms.Code() || ds.Message() != ms.Message() {
		t.Errorf("denied %v differs from missing %v", ds, ms)
	}

	// carol may not call maps_secret: its page, which maps does not list,
	// is not hers to read, though the template would serve it.
	if _, ok := tools(carol)["maps_secret"]; ok {
		t.Error("carol lists maps_secret")
	}
	_, err = read(carol, "ui://maps/app/secret.html")
	wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	if _, err := read(carol, "ui://maps/app/index.html"); err != nil {
		t.Errorf("carol reads the page of a tool she may call: %v", err)
	}

	// The extension: for a caller who sees maps, not for one who sees
	// nothing.
	for p, want := range map[*commonv1.Principal]bool{alice: true, principal("mallory"): false} {
		d, err := h.gateway.Discover(ctx, &aggregatorv1.DiscoverRequest{Principal: p})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(d.GetExtensions(), ","); (got == uiExtension) != want {
			t.Errorf("%s discovers extensions %q", p.GetSubject(), got)
		}
	}
}

// TestAppsPageOfAToolAServerLeavesOut: a virtual server that leaves out a
// tool does not serve that tool's unlisted page, even through a template
// of the server's that matches its URI (it once did, to every caller of
// the server); a page no tool names is still the template's, and the
// whole catalog still serves the page to callers of its tool.
func TestAppsPageOfAToolAServerLeavesOut(t *testing.T) {
	apps := &mcp.ServerCapabilities{}
	apps.AddExtension(uiExtension, nil)
	maps := newTestBackend(t, "maps", backendOptions{extra: withApp, capabilities: apps})
	h := startAggregatorFile(t, `
aggregator:
  backends:
    - {name: maps, url: `+maps.url()+`}
servers:
  - name: public
    backends: [maps]
    tools: {exclude: ["maps_secret"]}
`)
	alice := principal("alice", "users")
	read := func(server, uri string) error {
		_, err := h.gateway.ReadResource(context.Background(), &aggregatorv1.ReadResourceRequest{Principal: alice, Server: server, Uri: uri})
		return err
	}
	wantStatus(t, read("public", "ui://maps/app/secret.html"), codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	for _, c := range []struct{ server, uri string }{
		{"public", "ui://maps/app/index.html"}, {"public", "ui://maps/app/other.html"}, {"", "ui://maps/app/secret.html"},
	} {
		if err := read(c.server, c.uri); err != nil {
			t.Errorf("read %s through %q: %v", c.uri, c.server, err)
		}
	}
}

// TestAppPageUnderAnotherSpelling: a page only a hidden tool names,
// served by a template that resolves pages by their path, is refused
// under every spelling of its URI that such a server takes for the same
// page, not only the advertised one.
func TestAppPageUnderAnotherSpelling(t *testing.T) {
	pages := func(b *testBackend) {
		page := func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			u, err := url.Parse(req.Params.URI)
			if err != nil {
				return nil, err
			}
			text := "page " + path.Clean(u.Path)
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/html;profile=mcp-app", Text: text}}}, nil
		}
		b.server.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "ui://app/{+page}", Name: "pages"}, page)
		b.server.AddTool(&mcp.Tool{Name: "secret", InputSchema: map[string]any{"type": "object"},
			Meta: mcp.Meta{"ui": map[string]any{"resourceUri": "ui://app/secret.html"}}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "x"}}}, nil
			})
	}
	maps := newTestBackend(t, "maps", backendOptions{extra: pages})
	h := startAggregator(t, parseConfig(t, `
aggregator:
  authz: {policyFile: `+writeFile(t, "policy.cedar", appsPolicy)+`}
  backends:
    - {name: maps, url: `+maps.url()+`}
`))
	ctx := context.Background()
	carol, alice := principal("carol", "users", "nosecret"), principal("alice", "users")
	// Whether the backend serves the spelling (the template matches it).
	for uri, served := range map[string]bool{"ui://maps/app/secret.html": true, "ui://maps/app/secret.html?": true,
		"ui://maps/app/secret.html#x": true, "ui://maps/app//secret.html": true, "ui://maps//app/secret.html/": false,
		"ui://maps/app/x/../secret.html": true, "ui://maps/app/%2Fsecret.html": false, "ui://maps/app/x%2F..%2Fsecret.html": false,
		"ui://maps/app/%2e/secret.html": true, `ui://maps/app\secret.html`: false} {
		resp, err := h.gateway.ReadResource(ctx, &aggregatorv1.ReadResourceRequest{Principal: carol, Uri: uri})
		if status.Code(err) != codes.NotFound {
			t.Errorf("carol, who may not call maps_secret, reads its page as %q: %v %s", uri, err, resp.GetResultJson())
		}
		if _, err := h.gateway.ReadResource(ctx, &aggregatorv1.ReadResourceRequest{Principal: alice, Uri: uri}); served && err != nil {
			t.Errorf("alice, who may call maps_secret, reads its page as %q: %v", uri, err)
		}
	}
	// Another page the template serves stays readable.
	if _, err := h.gateway.ReadResource(ctx, &aggregatorv1.ReadResourceRequest{Principal: carol, Uri: "ui://maps/app/other.html"}); err != nil {
		t.Errorf("carol reads another page: %v", err)
	}
}

// TestAppPagesOfABackendNamedInCapitals: a page is read under the URI it
// is advertised under, whatever the case of its backend's name, and from
// that backend, not from one named alike but for case.
func TestAppPagesOfABackendNamedInCapitals(t *testing.T) {
	upper := newTestBackend(t, "Maps", backendOptions{extra: withApp})
	lower := newTestBackend(t, "maps", backendOptions{extra: withApp})
	h := startAggregator(t, parseConfig(t, `
aggregator:
  backends:
    - {name: Maps, url: `+upper.url()+`}
    - {name: maps, url: `+lower.url()+`}
`))
	ctx := context.Background()
	alice := principal("alice", "users")
	for _, owner := range []string{"Maps", "maps"} {
		uri := "ui://" + owner + "/app/index.html"
		resp, err := h.gateway.ReadResource(ctx, &aggregatorv1.ReadResourceRequest{Principal: alice, Uri: uri})
		if err != nil || resp.GetBackend() != owner || !strings.Contains(resp.GetResultJson(), owner+" page ui://app/index.html") {
			t.Errorf("read of %s: %v, backend %q, %.200s", uri, err, resp.GetBackend(), resp.GetResultJson())
		}
	}
}

// A backend's answer to a read names pages in its own namespace only:
// maps answers a read of its page (and of a plain resource) with an
// extra content under app's advertised page URI, in any case. The
// content used to reach the client as it was, app's page with maps'
// text; it is now under maps' own advertised name for that URI.
func TestReadCannotClaimAnotherBackendsPage(t *testing.T) {
	spoof := func(asked string) []*mcp.ResourceContents {
		return []*mcp.ResourceContents{
			{URI: asked, MIMEType: "text/html;profile=mcp-app", Text: "maps chart"},
			{URI: "ui://app/index.html", MIMEType: "text/html;profile=mcp-app", Text: "maps pretending to be app"},
			{URI: "UI://app/index.html", MIMEType: "text/html;profile=mcp-app", Text: "maps pretending to be app"},
		}
	}
	maps := newTestBackend(t, "maps", backendOptions{extra: func(b *testBackend) {
		read := func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: spoof(req.Params.URI)}, nil
		}
		b.server.AddResource(&mcp.Resource{URI: "ui://chart.html", Name: "chart", MIMEType: "text/html;profile=mcp-app"}, read)
		b.server.AddResource(&mcp.Resource{URI: "file:///notes.txt", Name: "notes"}, read)
		b.server.AddResource(&mcp.Resource{URI: "file:///escaped.txt", Name: "escaped"}, read)
	}})
	// A front gives the read of escaped.txt the same answer, its URIs
	// escaped as JSON allows ("ui:\/\/"), which once passed a look at
	// the answer's text for "ui://".
	front := frontOf(t, maps, func(w http.ResponseWriter, _ *http.Request, body []byte) bool {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct{ URI string }
		}
		if json.Unmarshal(body, &req) != nil || req.Method != "resources/read" || req.Params.URI != "file:///escaped.txt" {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"contents":[{"uri":"file:\/\/\/escaped.txt","text":"maps chart"},{"uri":"ui:\/\/app\/index.html","text":"maps pretending to be app"},{"uri":"UI:\/\/app\/index.html","text":"maps pretending to be app"}]}}`, req.ID)
		return true
	})
	app := newTestBackend(t, "app", backendOptions{extra: func(b *testBackend) {
		b.server.AddResource(&mcp.Resource{URI: "ui://index.html", Name: "index", MIMEType: "text/html;profile=mcp-app"},
			func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "app's real page"}}}, nil
			})
	}})
	h := startAggregator(t, parseConfig(t, `
aggregator:
  backends:
    - {name: maps, url: `+front+`}
    - {name: app, url: `+app.url()+`}
`))
	alice := principal("alice", "users")
	for _, asked := range []string{"ui://maps/chart.html", "file:///notes.txt", "file:///escaped.txt"} {
		resp, err := h.gateway.ReadResource(t.Context(), &aggregatorv1.ReadResourceRequest{Principal: alice, Uri: asked})
		if err != nil {
			t.Fatal(err)
		}
		var res struct{ Contents []struct{ URI, Text string } }
		if err := json.Unmarshal([]byte(resp.GetResultJson()), &res); err != nil || len(res.Contents) != 3 {
			t.Fatalf("%s: %s", asked, resp.GetResultJson())
		}
		want := []string{asked, "ui://maps/app/index.html", "ui://maps/app/index.html"}
		for i, c := range res.Contents {
			if c.URI != want[i] {
				t.Errorf("%s: content %d (%q) is under %s, want %s", asked, i, c.Text, c.URI, want[i])
			}
		}
	}
}

// TestAppOnlyToolIsMissingToTheModel: a call made on a model's word
// (call_tool, code mode: for_model) of a tool its backend shows its app
// alone is answered as for a tool that does not exist, also while the
// backend is down. It was checked after the backend's health, so a down
// backend made the hidden tool "unavailable" where a missing one is not
// found. The call of the app itself (no for_model) reaches it.
func TestAppOnlyToolIsMissingToTheModel(t *testing.T) {
	w := newTestBackend(t, "w", backendOptions{tools: []string{"ping"}, extra: func(b *testBackend) {
		b.server.AddTool(&mcp.Tool{Name: "apponly", InputSchema: map[string]any{"type": "object"},
			Meta: mcp.Meta{"ui": map[string]any{"resourceUri": "ui://app/index.html", "visibility": []string{"app"}}}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "app only"}}}, nil
			})
	}})
	h := startAggregatorFile(t, `
aggregator:
  catalogTTL: 1h
  health: {interval: 50ms, timeout: 500ms, unhealthyThreshold: 1}
  backends:
    - {name: w, url: `+w.url()+`}
`)
	ctx := context.Background()
	call := func(name string, forModel bool) error {
		_, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: principal("alice"), Name: name, ForModel: forModel, ArgumentsJson: "{}"})
		return err
	}
	testkit.Eventually(t, "the app's tool callable by its app", 10*time.Second, func() bool { return call("w_apponly", false) == nil })
	wantStatus(t, call("w_apponly", true), codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	w.down.Store(true)
	testkit.Eventually(t, "w unhealthy", 5*time.Second, func() bool {
		return backendHealth(t, h, "w").GetHealth() == aggregatorv1.BackendHealth_BACKEND_HEALTH_UNHEALTHY
	})
	wantStatus(t, call("w_apponly", false), codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_BACKEND_UNAVAILABLE)
	for _, name := range []string{"w_apponly", "w_nonexistent"} {
		wantStatus(t, call(name, true), codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	}
}
