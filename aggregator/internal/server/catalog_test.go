package server_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

func TestToolAddedToRunningBackendListedWithin2s(t *testing.T) {
	h, modern, legacy := twoEras(t) // catalogTTL 1h: only list_changed can refresh
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch, err := h.gateway.WatchCatalog(ctx, &aggregatorv1.WatchCatalogRequest{Principal: principal("alice")})
	if err != nil {
		t.Fatal(err)
	}
	first, err := watch.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(first.GetChanged()) != 0 || first.GetCatalogVersion() == 0 || first.GetToolsDigest() == "" {
		t.Fatalf("first event %v", first)
	}

	for _, b := range []*testBackend{modern, legacy} {
		b.addEchoTool("added_later")
		name := b.name + "_added_later"
		took := testkit.Eventually(t, name+" listed", 2*time.Second, func() bool {
			return slices.Contains(listToolNames(t, h.gateway, principal("alice"), 0), name)
		})
		t.Logf("%s listed %s after the backend added it", name, took)
		resp, err := h.gateway.CallTool(context.Background(), &aggregatorv1.CallToolRequest{Name: name})
		if err != nil || !strings.Contains(resultText(t, resp.GetResultJson()), b.name+"/added_later") {
			t.Fatalf("calling %s: %v %v", name, resp, err)
		}
	}

	// The watcher heard of the change, with the kind that changed.
	ev, err := watch.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if ev.GetCatalogVersion() == first.GetCatalogVersion() || ev.GetCatalogVersion() == 0 || !slices.Equal(ev.GetChanged(), []aggregatorv1.CatalogKind{aggregatorv1.CatalogKind_CATALOG_KIND_TOOLS}) ||
		ev.GetToolsDigest() == first.GetToolsDigest() {
		t.Fatalf("change event %v after %v", ev, first)
	}
}

func TestHangingBackendDoesNotDelayAnotherBackendsChange(t *testing.T) {
	stuck := newTestBackend(t, "stuck", backendOptions{tools: []string{"ping"}})
	lively := newTestBackend(t, "lively", backendOptions{tools: []string{"ping"}})
	h := startAggregator(t, parseConfig(t, `
aggregator:
  catalogTTL: 1h
  backends:
    - {name: stuck, url: `+stuck.url()+`, timeout: 30s}
    - {name: lively, url: `+lively.url()+`}
`))
	// A full refresh starts and stuck's listing hangs for its 30s timeout.
	stuck.hangLists.Store(true)
	h.engine.Trigger()
	lively.addEchoTool("added")
	testkit.Eventually(t, "lively_added listed while stuck hangs", 2*time.Second, func() bool {
		return slices.Contains(listToolNames(t, h.gateway, nil, 0), "lively_added")
	})
	// stuck keeps its last lists meanwhile.
	if !slices.Contains(listToolNames(t, h.gateway, nil, 0), "stuck_ping") {
		t.Fatal("stuck backend's tools vanished while its listing hangs")
	}
}

func TestVersionChangesOnlyWithContent(t *testing.T) {
	h, _, _ := twoEras(t)
	d1, err := h.gateway.Discover(context.Background(), &aggregatorv1.DiscoverRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// A rebuild over unchanged backends keeps the version.
	if v := h.engine.Refresh(context.Background()).Version; v != d1.GetCatalogVersion() {
		t.Fatalf("version moved from %d to %d without a change", d1.GetCatalogVersion(), v)
	}
	d2, err := h.gateway.Discover(context.Background(), &aggregatorv1.DiscoverRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if d2.GetCatalogVersion() != d1.GetCatalogVersion() || d2.GetToolsDigest() != d1.GetToolsDigest() {
		t.Fatalf("version moved without a change: %v then %v", d1, d2)
	}
	// Every page names the view it was cut from, as Discover does.
	for cursor := ""; ; {
		page, err := h.gateway.ListTools(context.Background(), &aggregatorv1.ListToolsRequest{Cursor: cursor, PageSize: 3})
		if err != nil {
			t.Fatal(err)
		}
		if page.GetCatalogVersion() != d1.GetCatalogVersion() || page.GetToolsDigest() != d1.GetToolsDigest() {
			t.Fatalf("page version %d digest %q, discover %d %q", page.GetCatalogVersion(), page.GetToolsDigest(), d1.GetCatalogVersion(), d1.GetToolsDigest())
		}
		if cursor = page.GetNextCursor(); cursor == "" {
			break
		}
	}
	if d1.GetToolCount() != 8 || d1.GetPromptCount() != 2 || d1.GetResourceCount() != 2 || d1.GetResourceTemplateCount() != 2 || !d1.GetCompletions() {
		t.Fatalf("discover %v", d1)
	}
}

// manyTools is a stateful backend with n tools, paged by the SDK at 1000,
// so the aggregator must follow its cursor.
func TestPagingOverGRPC(t *testing.T) {
	var names []string
	for i := range 1100 {
		names = append(names, fmt.Sprintf("tool_%04d", i))
	}
	many := newTestBackend(t, "many-tools", backendOptions{stateful: true, tools: names, extra: func(b *testBackend) {
		withContent(b)
		b.server.AddPrompt(&mcp.Prompt{Name: "second"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{}, nil
		})
		b.server.AddResource(&mcp.Resource{URI: "mem://many-tools/second", Name: "second"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{}, nil
		})
		b.server.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "mem://many-tools/second/{x}", Name: "second"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{}, nil
		})
	}})
	h := startAggregator(t, parseConfig(t, `
aggregator:
  backends:
    - name: many-tools
      url: `+many.url()+`
`))
	ctx := context.Background()
	first, err := h.gateway.ListTools(ctx, &aggregatorv1.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.GetTools()) != 1000 || first.GetNextCursor() == "" {
		t.Fatalf("first page: %d tools, next %q", len(first.GetTools()), first.GetNextCursor())
	}
	got := listToolNames(t, h.gateway, nil, 0)
	var want []string
	for _, n := range append(names, "fail", "hang") {
		want = append(want, "many-tools_"+n)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("listed %d tools, want %d, sorted, each once", len(got), len(want))
	}
	if _, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Name: "many-tools_tool_1099"}); err != nil {
		t.Fatalf("calling a tool beyond the backend's first page: %v", err)
	}
	// Page size is clamped to the maximum.
	big, err := h.gateway.ListTools(ctx, &aggregatorv1.ListToolsRequest{PageSize: 5000})
	if err != nil || len(big.GetTools()) != 1000 {
		t.Fatalf("page_size 5000: %d tools, %v", len(big.GetTools()), err)
	}

	// A cursor minted by one list verb is rejected by the other three.
	lists := map[string]func(cursor string, size uint32) (string, error){
		"tools": func(c string, n uint32) (string, error) {
			r, err := h.gateway.ListTools(ctx, &aggregatorv1.ListToolsRequest{Cursor: c, PageSize: n})
			return r.GetNextCursor(), err
		},
		"resources": func(c string, n uint32) (string, error) {
			r, err := h.gateway.ListResources(ctx, &aggregatorv1.ListResourcesRequest{Cursor: c, PageSize: n})
			return r.GetNextCursor(), err
		},
		"templates": func(c string, n uint32) (string, error) {
			r, err := h.gateway.ListResourceTemplates(ctx, &aggregatorv1.ListResourceTemplatesRequest{Cursor: c, PageSize: n})
			return r.GetNextCursor(), err
		},
		"prompts": func(c string, n uint32) (string, error) {
			r, err := h.gateway.ListPrompts(ctx, &aggregatorv1.ListPromptsRequest{Cursor: c, PageSize: n})
			return r.GetNextCursor(), err
		},
	}
	cases := 0
	for minter, mint := range lists {
		cursor, err := mint("", 1)
		if err != nil || cursor == "" {
			t.Fatalf("%s: minting a cursor: %q, %v", minter, cursor, err)
		}
		for user, use := range lists {
			_, err := use(cursor, 1)
			if user == minter {
				if err != nil {
					t.Fatalf("%s cursor rejected by %s: %v", minter, user, err)
				}
				continue
			}
			cases++
			wantStatus(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_CURSOR)
		}
	}
	if cases != 12 {
		t.Fatalf("%d cross-verb cases, want 12", cases)
	}
	for _, bad := range []string{"%%%", "eyJrIjoidG9vbHMifQ", strings.Repeat("A", 513)} {
		_, err := h.gateway.ListTools(ctx, &aggregatorv1.ListToolsRequest{Cursor: bad})
		wantStatus(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_CURSOR)
	}
}

func TestManualStrategyUnresolvedConflictIsStartupError(t *testing.T) {
	a := newTestBackend(t, "a", backendOptions{tools: []string{"create", "delete"}})
	b := newTestBackend(t, "b", backendOptions{tools: []string{"create", "delete"}})
	cfg := parseConfig(t, `
aggregator:
  conflictResolution:
    strategy: manual
    overrides:
      a.create: a_create
  backends:
    - {name: a, url: `+a.url()+`}
    - {name: b, url: `+b.url()+`}
`)
	_, err := tryStartAggregator(t, cfg)
	// fail and hang are on both backends too: every conflict is named.
	for _, want := range []string{`"delete" claimed by backends a, b`, `"fail" claimed by backends a, b`, `"hang" claimed by backends a, b`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("startup error %v does not name %s", err, want)
		}
	}
	if strings.Contains(err.Error(), `"create"`) {
		t.Fatalf("startup error names a resolved conflict: %v", err)
	}
}
