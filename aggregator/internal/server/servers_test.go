package server_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/engine"
	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/demobackend"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

const serversPolicy = `
// support may use the support server, and nothing else.
permit (principal in Group::"support", action, resource in Server::"support");
// eng may use everything, everywhere, except deleting through support.
permit (principal in Group::"eng", action, resource);
forbid (principal, action == Action::"call_tool", resource in Server::"support") when { resource == Tool::"tickets_delete" };
`

// startServers serves two backends, the whole catalog and two virtual
// servers over them.
func startServers(t *testing.T) (h *harness, tickets, docs *testBackend) {
	t.Helper()
	tickets = newTestBackend(t, "tickets", backendOptions{tools: []string{"get", "search", "delete"}})
	docs = newTestBackend(t, "docs", backendOptions{tools: []string{"read", "write"}})
	full, err := config.Load(writeFile(t, "switchboard.yaml", `
aggregator:
  instructions: the whole catalog
  authz: {policyFile: `+writeFile(t, "policy.cedar", serversPolicy)+`}
  backends:
    - {name: tickets, url: `+tickets.url()+`}
    - {name: docs, url: `+docs.url()+`}
servers:
  - name: support
    backends: [tickets, docs]
    tools: {include: ["tickets_*", "docs_read"], exclude: ["*_search"]}
    instructions: help customers
  - name: writers
    backends: [docs]
`))
	if err != nil {
		t.Fatal(err)
	}
	if h, err = startAggregatorWith(t, full, quietLog); err != nil {
		t.Fatal(err)
	}
	return h, tickets, docs
}

func listServerTools(t *testing.T, c aggregatorv1.AggregatorServiceClient, p *commonv1.Principal, server string) []string {
	t.Helper()
	var names []string
	cursor := ""
	for range 100 {
		resp, err := c.ListTools(context.Background(), &aggregatorv1.ListToolsRequest{Principal: p, Server: server, Cursor: cursor, PageSize: 2})
		if err != nil {
			t.Fatalf("ListTools(%q): %v", server, err)
		}
		for _, tool := range resp.GetTools() {
			names = append(names, tool.GetName())
		}
		if cursor = resp.GetNextCursor(); cursor == "" {
			return names
		}
	}
	t.Fatal("paging does not end")
	return nil
}

func TestServersFilterBackendsAndTools(t *testing.T) {
	h, _, _ := startServers(t)
	eng := principal("erin", "eng")
	for server, want := range map[string][]string{
		"": {"docs_fail", "docs_hang", "docs_read", "docs_write", "tickets_delete", "tickets_fail", "tickets_get", "tickets_hang", "tickets_search"},
		// tickets_delete is forbidden through support (the policy).
		"support": {"docs_read", "tickets_fail", "tickets_get", "tickets_hang"},
		"writers": {"docs_fail", "docs_hang", "docs_read", "docs_write"},
	} {
		if got := listServerTools(t, h.gateway, eng, server); !slices.Equal(got, want) {
			t.Errorf("server %q lists %v, want %v", server, got, want)
		}
	}
	ctx := context.Background()
	// A tool the server leaves out answers exactly like a missing one.
	for _, name := range []string{"tickets_search", "docs_write", "nope"} {
		_, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: eng, Server: "support", Name: name})
		wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	}
	if _, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: eng, Server: "support", Name: "tickets_get"}); err != nil {
		t.Fatalf("support calls tickets_get: %v", err)
	}
	// An unknown server is missing too, for every RPC.
	_, err := h.gateway.ListTools(ctx, &aggregatorv1.ListToolsRequest{Principal: eng, Server: "nope"})
	wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	_, err = h.gateway.Discover(ctx, &aggregatorv1.DiscoverRequest{Principal: eng, Server: "nope"})
	wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	_, err = h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: eng, Server: "nope", Name: "tickets_get"})
	wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)

	// Instructions and digests are the server's own.
	whole, err := h.gateway.Discover(ctx, &aggregatorv1.DiscoverRequest{Principal: eng})
	if err != nil {
		t.Fatal(err)
	}
	support, err := h.gateway.Discover(ctx, &aggregatorv1.DiscoverRequest{Principal: eng, Server: "support"})
	if err != nil {
		t.Fatal(err)
	}
	writers, err := h.gateway.Discover(ctx, &aggregatorv1.DiscoverRequest{Principal: eng, Server: "writers"})
	if err != nil {
		t.Fatal(err)
	}
	if whole.GetInstructions() != "the whole catalog" || support.GetInstructions() != "help customers" || writers.GetInstructions() != "the whole catalog" {
		t.Errorf("instructions %q, %q, %q", whole.GetInstructions(), support.GetInstructions(), writers.GetInstructions())
	}
	if support.GetToolCount() != 4 || whole.GetToolsDigest() == support.GetToolsDigest() || support.GetToolsDigest() == writers.GetToolsDigest() {
		t.Errorf("digests not per server: whole %s support %s (%d tools) writers %s", whole.GetToolsDigest(), support.GetToolsDigest(), support.GetToolCount(), writers.GetToolsDigest())
	}
}

// Server::"<name>" is the parent of its backends in Cedar: who may use a
// server is a policy, and it holds only through that server.
func TestServerIsACedarEntity(t *testing.T) {
	h, _, _ := startServers(t)
	ctx := context.Background()
	sue, eng := principal("sue", "support"), principal("erin", "eng")
	if got := listServerTools(t, h.gateway, sue, ""); len(got) != 0 {
		t.Errorf("support sees %v in the whole catalog, want nothing", got)
	}
	if got := listServerTools(t, h.gateway, sue, "writers"); len(got) != 0 {
		t.Errorf("support sees %v in writers, want nothing", got)
	}
	if got, want := listServerTools(t, h.gateway, sue, "support"), []string{"docs_read", "tickets_fail", "tickets_get", "tickets_hang"}; !slices.Equal(got, want) {
		t.Errorf("support sees %v in support, want %v", got, want)
	}
	// The forbid names the tool through the server: eng may delete through
	// the whole catalog, not through support.
	_, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: eng, Server: "support", Name: "tickets_delete"})
	wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	if _, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: eng, Name: "tickets_delete"}); err != nil {
		t.Errorf("eng deletes through the whole catalog: %v", err)
	}
	// The forbid holds for every principal in support, whatever permits.
	_, err = h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: sue, Server: "support", Name: "tickets_delete"})
	wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
}

// A watch of one server reports that server's changes; the indexer's
// watch of all changes reports a change of any catalog.
func TestServerWatches(t *testing.T) {
	h, tickets, docs := startServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eng := principal("erin", "eng")
	writers, err := h.gateway.WatchCatalog(ctx, &aggregatorv1.WatchCatalogRequest{Principal: eng, Server: "writers"})
	if err != nil {
		t.Fatal(err)
	}
	all, err := h.gateway.WatchCatalog(ctx, &aggregatorv1.WatchCatalogRequest{AllChanges: true})
	if err != nil {
		t.Fatal(err)
	}
	first, err := writers.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := all.Recv(); err != nil {
		t.Fatal(err)
	}
	nope, err := h.gateway.WatchCatalog(ctx, &aggregatorv1.WatchCatalogRequest{Principal: eng, Server: "nope"})
	if err == nil {
		_, err = nope.Recv()
	}
	wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)

	// A new tickets tool changes the whole catalog and support, not
	// writers: the all-changes watch sees it, the writers watch does not.
	tickets.addEchoTool("close")
	h.engine.Trigger()
	ev, err := all.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(ev.GetChanged(), aggregatorv1.CatalogKind_CATALOG_KIND_TOOLS) {
		t.Errorf("all-changes event %v lacks tools", ev)
	}
	// Then a docs change reaches the writers watch; had the tickets change
	// reached it, that event would come first.
	docs.addEchoTool("append")
	h.engine.Trigger()
	ev, err = writers.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if ev.GetToolsDigest() == first.GetToolsDigest() || !slices.Contains(ev.GetChanged(), aggregatorv1.CatalogKind_CATALOG_KIND_TOOLS) {
		t.Errorf("writers event %v after a docs change", ev)
	}
	if got := listServerTools(t, h.gateway, eng, "writers"); !slices.Contains(got, "docs_append") || slices.Contains(got, "tickets_close") {
		t.Errorf("writers lists %v", got)
	}
}

// Reconfigure changes backends, servers and naming of a running engine:
// every request after it sees the new setup, watchers hear of it, and a
// removed server's watch ends as missing.
func TestReconfigureLive(t *testing.T) {
	h, tickets, docs := startServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eng := principal("erin", "eng")
	writers, err := h.gateway.WatchCatalog(ctx, &aggregatorv1.WatchCatalogRequest{Principal: eng, Server: "writers"})
	if err != nil {
		t.Fatal(err)
	}
	whole, err := h.gateway.WatchCatalog(ctx, &aggregatorv1.WatchCatalogRequest{Principal: eng})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []aggregatorv1.AggregatorService_WatchCatalogClient{writers, whole} {
		if _, err := s.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	clientsBefore := h.engine.Backends()

	full, err := config.Load(writeFile(t, "switchboard2.yaml", `
aggregator:
  instructions: reconfigured
  authz: {policyFile: `+writeFile(t, "policy2.cedar", serversPolicy)+`}
  conflictResolution: {strategy: prefix, prefixFormat: "{backend}-"}
  backends:
    - {name: tickets, url: `+tickets.url()+`}
servers:
  - name: support
    backends: [tickets]
    tools: {include: ["tickets-get"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	opts := reconfigure(t, h, full)
	// The whole catalog: docs gone, the new prefix.
	ev, err := whole.Recv()
	if err != nil || !slices.Contains(ev.GetChanged(), aggregatorv1.CatalogKind_CATALOG_KIND_TOOLS) {
		t.Fatalf("whole-catalog watch after reconfiguring: %v, %v", ev, err)
	}
	if got, want := listServerTools(t, h.gateway, eng, ""), []string{"tickets-delete", "tickets-fail", "tickets-get", "tickets-hang", "tickets-search"}; !slices.Equal(got, want) {
		t.Errorf("after reconfiguring, the whole catalog lists %v, want %v", got, want)
	}
	if got := listServerTools(t, h.gateway, eng, "support"); !slices.Equal(got, []string{"tickets-get"}) {
		t.Errorf("after reconfiguring, support lists %v", got)
	}
	// writers is gone: its watch ends as missing, and so does every RPC.
	_, err = writers.Recv()
	wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	_, err = h.gateway.ListTools(ctx, &aggregatorv1.ListToolsRequest{Principal: eng, Server: "writers"})
	wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	d, err := h.gateway.Discover(ctx, &aggregatorv1.DiscoverRequest{Principal: eng})
	if err != nil || d.GetInstructions() != "reconfigured" {
		t.Errorf("instructions after reconfiguring: %v, %v", d, err)
	}
	// tickets' configuration did not change: same client, same session.
	after := h.engine.Backends()
	if len(after) != 1 || after[0] != clientsBefore[slices.IndexFunc(clientsBefore, func(b *backend.Client) bool { return b.Name() == "tickets" })] {
		t.Errorf("tickets' client was replaced although its configuration did not change")
	}
	if _, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: eng, Name: "tickets-get"}); err != nil {
		t.Errorf("call after reconfiguring: %v", err)
	}
	_, err = h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: eng, Name: "docs-read"})
	wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)

	// A backend added back is listed at once.
	full.Aggregator.Backends = append(full.Aggregator.Backends, config.Backend{Name: "docs", URL: docs.url()})
	opts = reconfigure(t, h, full)
	testkit.Eventually(t, "docs listed again", 10*time.Second, func() bool {
		return slices.Contains(listServerTools(t, h.gateway, eng, ""), "docs-read")
	})

	// Options whose overrides do not compile change nothing (a server
	// naming an unknown backend is refused before, by
	// config.ValidateAggregator).
	bad := opts
	bad.Servers = []config.Server{{Name: "x", Backends: []string{"tickets"}, ToolOverrides: []config.ToolOverride{{Tool: "get"}}}}
	if _, err := h.engine.Reconfigure(bad); err == nil {
		t.Fatal("a tool override without a backend was accepted")
	}
	if got := listServerTools(t, h.gateway, eng, "support"); !slices.Equal(got, []string{"tickets-get"}) {
		t.Errorf("after a refused reconfiguration, support lists %v", got)
	}
}

// reconfigure applies full to the running engine as a reload does, and
// returns the options it was given.
func reconfigure(t *testing.T, h *harness, full *config.Config) engine.Options {
	t.Helper()
	opts, err := engine.OptionsFromConfig(full.Aggregator.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	opts.Servers = full.Servers
	if _, err := h.engine.Reconfigure(opts); err != nil {
		t.Fatal(err)
	}
	return opts
}

// TestReloadIsNotHeldByStoppingStdioServers: stdio servers a reload
// removed are stopped beside the next reload, not in front of it: each
// may take its whole grace (stdin closed, then SIGTERM, then SIGKILL),
// and they once were stopped one after another under the lock every
// reload takes, so the next waited for all of them.
func TestReloadIsNotHeldByStoppingStdioServers(t *testing.T) {
	full := &config.Config{}
	for _, name := range []string{"s1", "s2", "s3"} {
		full.Aggregator.Backends = append(full.Aggregator.Backends, config.Backend{Name: name,
			Command: []string{os.Args[0], "-test.run=^$"}, Env: map[string]string{stubbornStdioEnv: "1"}})
	}
	h, err := startAggregatorWith(t, full, quietLog)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the three servers listed", 20*time.Second, func() bool {
		return len(listToolNames(t, h.gateway, principal("alice"), 0)) == 3*len(demobackend.DefaultSpec().Tools)
	})
	full.Aggregator.Backends = nil
	reconfigure(t, h, full)
	other := newTestBackend(t, "other", backendOptions{tools: []string{"echo"}})
	full.Aggregator.Backends = []config.Backend{{Name: "other", URL: other.url()}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		reconfigure(t, h, full)
	}()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		// One server's stop takes 4 s: the reload waited for one at least.
		t.Fatal("the next reload waited for the removed stdio servers to stop")
	}
}
