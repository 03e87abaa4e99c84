package testkit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// FakeAggregator is an AggregatorService whose catalog the test sets: the
// tools (SetTools), what each caller sees of them (View, SetView), the
// resources, templates and prompts. Discover, the lists and WatchCatalog
// answer from it; the calls and the task RPCs answer with the functions
// the test sets.
// Its zero value is an empty catalog at version 1; set the fields before
// it serves.
type FakeAggregator struct {
	aggregatorv1.UnimplementedAggregatorServiceServer

	// PageSize is the most items a page of a list holds (0: 1000), fewer
	// when the request asks for fewer.
	PageSize int
	// View, when set, picks the tools the principal p sees on the virtual
	// server named server ("" for every backend) from the catalog's (a
	// slice it must not change); an error is the answer of the RPC.
	// Unset, a subject given a view by SetView sees those tools and any
	// other caller every tool.
	View func(p *commonv1.Principal, server string, tools []*aggregatorv1.Tool) ([]*aggregatorv1.Tool, error)
	// Resources, ResourceTemplates and Prompts are listed to every caller.
	// A nil one is not served: its list answers UNIMPLEMENTED.
	Resources         []*aggregatorv1.Resource
	ResourceTemplates []*aggregatorv1.ResourceTemplate
	Prompts           []*aggregatorv1.Prompt
	// Discovery, when set, is the rest of each Discover answer (the
	// instructions, the completions capability): Discover fills in the
	// version, the counts and the tools digest on a copy.
	Discovery *aggregatorv1.DiscoverResponse
	// Check, when set, runs first in every RPC, with the RPC's name
	// ("WatchCatalog") and its request; an error is the RPC's answer.
	Check func(ctx context.Context, method string, req any) error

	// The RPCs the test answers itself; those it leaves unset answer
	// UNIMPLEMENTED.
	CallToolFunc       func(context.Context, *aggregatorv1.CallToolRequest) (*aggregatorv1.CallToolResponse, error)
	CallToolStreamFunc func(*aggregatorv1.CallToolStreamRequest, aggregatorv1.AggregatorService_CallToolStreamServer) error
	ReadResourceFunc   func(context.Context, *aggregatorv1.ReadResourceRequest) (*aggregatorv1.ReadResourceResponse, error)
	GetPromptFunc      func(context.Context, *aggregatorv1.GetPromptRequest) (*aggregatorv1.GetPromptResponse, error)
	CompleteFunc       func(context.Context, *aggregatorv1.CompleteRequest) (*aggregatorv1.CompleteResponse, error)
	ListBackendsFunc   func(context.Context, *aggregatorv1.ListBackendsRequest) (*aggregatorv1.ListBackendsResponse, error)
	GetTrafficFunc     func(context.Context, *aggregatorv1.GetTrafficRequest) (*aggregatorv1.GetTrafficResponse, error)
	GetTaskFunc        func(context.Context, *aggregatorv1.GetTaskRequest) (*aggregatorv1.GetTaskResponse, error)
	UpdateTaskFunc     func(context.Context, *aggregatorv1.UpdateTaskRequest) (*aggregatorv1.UpdateTaskResponse, error)
	CancelTaskFunc     func(context.Context, *aggregatorv1.CancelTaskRequest) (*aggregatorv1.CancelTaskResponse, error)
	ListTasksFunc      func(context.Context, *aggregatorv1.ListTasksRequest) (*aggregatorv1.ListTasksResponse, error)

	calls calls

	mu sync.Mutex
	// changes is the catalog version less one.
	changes      uint64
	tools        []*aggregatorv1.Tool // by name
	views        map[string][]string  // subject → tool names
	subscribable map[string]bool
	watches      watches[*aggregatorv1.WatchCatalogResponse]
}

// Register registers f on a gRPC server (see Serve).
func (f *FakeAggregator) Register(s grpc.ServiceRegistrar) {
	aggregatorv1.RegisterAggregatorServiceServer(s, f)
}

// Calls reports how many calls of method ("ListTools") f has had.
func (f *FakeAggregator) Calls(method string) int { return f.calls.count(method) }

// SetTools replaces the catalog's tools (their names are unique) and
// tells the watchers that the tools changed.
func (f *FakeAggregator) SetTools(tools []*aggregatorv1.Tool) {
	sorted := slices.SortedFunc(slices.Values(tools), func(a, b *aggregatorv1.Tool) int { return strings.Compare(a.GetName(), b.GetName()) })
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tools = sorted
	f.changedLocked(aggregatorv1.CatalogKind_CATALOG_KIND_TOOLS)
}

// SetView limits subject to the named tools of the catalog (a policy
// change) and tells the watchers that the tools changed.
func (f *FakeAggregator) SetView(subject string, names []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.views == nil {
		f.views = map[string][]string{}
	}
	f.views[subject] = slices.Clone(names)
	f.changedLocked(aggregatorv1.CatalogKind_CATALOG_KIND_TOOLS)
}

// Notify makes a new catalog version and tells the watchers that the
// kinds changed.
func (f *FakeAggregator) Notify(kinds ...aggregatorv1.CatalogKind) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.changedLocked(kinds...)
}

func (f *FakeAggregator) changedLocked(kinds ...aggregatorv1.CatalogKind) {
	f.changes++
	f.watches.send(&aggregatorv1.WatchCatalogResponse{CatalogVersion: f.changes + 1, Changed: kinds})
}

// Version reports the catalog version.
func (f *FakeAggregator) Version() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changes + 1
}

// SetVersion sets the catalog version without telling the watchers, as a
// change made while their watches were down.
func (f *FakeAggregator) SetVersion(v uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.changes = v - 1
}

// SetSubscribable sets the resource URIs that later watches asking for
// them subscribe to.
func (f *FakeAggregator) SetSubscribable(uris ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subscribable = map[string]bool{}
	for _, u := range uris {
		f.subscribable[u] = true
	}
}

// Watchers reports the open WatchCatalog streams.
func (f *FakeAggregator) Watchers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.watches)
}

// EndWatches ends every open WatchCatalog stream with UNAVAILABLE, as an
// aggregator that shuts down does.
func (f *FakeAggregator) EndWatches() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watches.endAll()
}

// view is what the caller sees of the catalog on server, and the version.
func (f *FakeAggregator) view(ctx context.Context, server string) ([]*aggregatorv1.Tool, uint64, error) {
	p := svcauth.PrincipalFrom(ctx)
	f.mu.Lock()
	tools, version := f.tools, f.changes+1
	names, limited := f.views[p.GetSubject()]
	f.mu.Unlock()
	if f.View != nil {
		seen, err := f.View(p, server, tools)
		return seen, version, err
	}
	if limited {
		tools = slices.DeleteFunc(slices.Clone(tools), func(t *aggregatorv1.Tool) bool { return !slices.Contains(names, t.GetName()) })
	}
	return tools, version, nil
}

// pageSize is the size of a page asked for with asked (0: any).
func (f *FakeAggregator) pageSize(asked uint32) int {
	size := f.PageSize
	if size <= 0 {
		size = 1000
	}
	if asked > 0 {
		size = min(size, int(asked))
	}
	return size
}

// Discover reports the caller's tool count and digest, and the counts of
// the other lists.
func (f *FakeAggregator) Discover(ctx context.Context, req *aggregatorv1.DiscoverRequest) (*aggregatorv1.DiscoverResponse, error) {
	if err := f.calls.begin(ctx, f.Check, "Discover", req); err != nil {
		return nil, err
	}
	tools, version, err := f.view(ctx, req.GetServer())
	if err != nil {
		return nil, err
	}
	resp := &aggregatorv1.DiscoverResponse{}
	if f.Discovery != nil {
		resp = proto.CloneOf(f.Discovery)
	}
	h := sha256.New()
	for _, t := range tools {
		h.Write([]byte(t.GetName() + "\x00" + t.GetDescription() + "\x00" + t.GetInputSchemaJson() + "\x00"))
	}
	resp.CatalogVersion, resp.ToolCount, resp.ToolsDigest = version, uint32(len(tools)), hex.EncodeToString(h.Sum(nil))
	resp.ResourceCount, resp.ResourceTemplateCount, resp.PromptCount = uint32(len(f.Resources)), uint32(len(f.ResourceTemplates)), uint32(len(f.Prompts))
	return resp, nil
}

// ListTools serves a page of the caller's tools.
func (f *FakeAggregator) ListTools(ctx context.Context, req *aggregatorv1.ListToolsRequest) (*aggregatorv1.ListToolsResponse, error) {
	if err := f.calls.begin(ctx, f.Check, "ListTools", req); err != nil {
		return nil, err
	}
	tools, version, err := f.view(ctx, req.GetServer())
	if err != nil {
		return nil, err
	}
	items, next, err := page("tools", tools, req.GetCursor(), f.pageSize(req.GetPageSize()))
	if err != nil {
		return nil, err
	}
	return &aggregatorv1.ListToolsResponse{Tools: items, NextCursor: next, CatalogVersion: version}, nil
}

// ListResources serves a page of Resources.
func (f *FakeAggregator) ListResources(ctx context.Context, req *aggregatorv1.ListResourcesRequest) (*aggregatorv1.ListResourcesResponse, error) {
	if err := f.calls.begin(ctx, f.Check, "ListResources", req); err != nil {
		return nil, err
	}
	if f.Resources == nil {
		return f.UnimplementedAggregatorServiceServer.ListResources(ctx, req)
	}
	items, next, err := page("resources", f.Resources, req.GetCursor(), f.pageSize(req.GetPageSize()))
	if err != nil {
		return nil, err
	}
	return &aggregatorv1.ListResourcesResponse{Resources: items, NextCursor: next}, nil
}

// ListResourceTemplates serves a page of ResourceTemplates.
func (f *FakeAggregator) ListResourceTemplates(ctx context.Context, req *aggregatorv1.ListResourceTemplatesRequest) (*aggregatorv1.ListResourceTemplatesResponse, error) {
	if err := f.calls.begin(ctx, f.Check, "ListResourceTemplates", req); err != nil {
		return nil, err
	}
	if f.ResourceTemplates == nil {
		return f.UnimplementedAggregatorServiceServer.ListResourceTemplates(ctx, req)
	}
	items, next, err := page("templates", f.ResourceTemplates, req.GetCursor(), f.pageSize(req.GetPageSize()))
	if err != nil {
		return nil, err
	}
	return &aggregatorv1.ListResourceTemplatesResponse{ResourceTemplates: items, NextCursor: next}, nil
}

// ListPrompts serves a page of Prompts.
func (f *FakeAggregator) ListPrompts(ctx context.Context, req *aggregatorv1.ListPromptsRequest) (*aggregatorv1.ListPromptsResponse, error) {
	if err := f.calls.begin(ctx, f.Check, "ListPrompts", req); err != nil {
		return nil, err
	}
	if f.Prompts == nil {
		return f.UnimplementedAggregatorServiceServer.ListPrompts(ctx, req)
	}
	items, next, err := page("prompts", f.Prompts, req.GetCursor(), f.pageSize(req.GetPageSize()))
	if err != nil {
		return nil, err
	}
	return &aggregatorv1.ListPromptsResponse{Prompts: items, NextCursor: next}, nil
}

// WatchCatalog sends the catalog version with the resource URIs the watch
// subscribes to, then one event per change, until the caller goes away or
// EndWatches.
func (f *FakeAggregator) WatchCatalog(req *aggregatorv1.WatchCatalogRequest, stream aggregatorv1.AggregatorService_WatchCatalogServer) error {
	if err := f.calls.begin(stream.Context(), f.Check, "WatchCatalog", req); err != nil {
		return err
	}
	f.mu.Lock()
	first := &aggregatorv1.WatchCatalogResponse{CatalogVersion: f.changes + 1}
	for _, uri := range req.GetResourceUris() {
		if f.subscribable[uri] {
			first.SubscribedResourceUris = append(first.SubscribedResourceUris, uri)
		}
	}
	w := open(&f.watches)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.watches, w)
		f.mu.Unlock()
	}()
	return w.serve(stream.Context(), first, stream.Send)
}

// CallTool answers with CallToolFunc.
func (f *FakeAggregator) CallTool(ctx context.Context, req *aggregatorv1.CallToolRequest) (*aggregatorv1.CallToolResponse, error) {
	return answer(f.calls.begin(ctx, f.Check, "CallTool", req), f.CallToolFunc, f.UnimplementedAggregatorServiceServer.CallTool, ctx, req)
}

// CallToolStream answers with CallToolStreamFunc.
func (f *FakeAggregator) CallToolStream(req *aggregatorv1.CallToolStreamRequest, stream aggregatorv1.AggregatorService_CallToolStreamServer) error {
	if err := f.calls.begin(stream.Context(), f.Check, "CallToolStream", req); err != nil {
		return err
	}
	if f.CallToolStreamFunc == nil {
		return f.UnimplementedAggregatorServiceServer.CallToolStream(req, stream)
	}
	return f.CallToolStreamFunc(req, stream)
}

// ReadResource answers with ReadResourceFunc.
func (f *FakeAggregator) ReadResource(ctx context.Context, req *aggregatorv1.ReadResourceRequest) (*aggregatorv1.ReadResourceResponse, error) {
	return answer(f.calls.begin(ctx, f.Check, "ReadResource", req), f.ReadResourceFunc, f.UnimplementedAggregatorServiceServer.ReadResource, ctx, req)
}

// GetPrompt answers with GetPromptFunc.
func (f *FakeAggregator) GetPrompt(ctx context.Context, req *aggregatorv1.GetPromptRequest) (*aggregatorv1.GetPromptResponse, error) {
	return answer(f.calls.begin(ctx, f.Check, "GetPrompt", req), f.GetPromptFunc, f.UnimplementedAggregatorServiceServer.GetPrompt, ctx, req)
}

// Complete answers with CompleteFunc.
func (f *FakeAggregator) Complete(ctx context.Context, req *aggregatorv1.CompleteRequest) (*aggregatorv1.CompleteResponse, error) {
	return answer(f.calls.begin(ctx, f.Check, "Complete", req), f.CompleteFunc, f.UnimplementedAggregatorServiceServer.Complete, ctx, req)
}

// ListBackends answers with ListBackendsFunc.
func (f *FakeAggregator) ListBackends(ctx context.Context, req *aggregatorv1.ListBackendsRequest) (*aggregatorv1.ListBackendsResponse, error) {
	return answer(f.calls.begin(ctx, f.Check, "ListBackends", req), f.ListBackendsFunc, f.UnimplementedAggregatorServiceServer.ListBackends, ctx, req)
}

// GetTraffic answers with GetTrafficFunc.
func (f *FakeAggregator) GetTraffic(ctx context.Context, req *aggregatorv1.GetTrafficRequest) (*aggregatorv1.GetTrafficResponse, error) {
	return answer(f.calls.begin(ctx, f.Check, "GetTraffic", req), f.GetTrafficFunc, f.UnimplementedAggregatorServiceServer.GetTraffic, ctx, req)
}

// GetTask answers with GetTaskFunc.
func (f *FakeAggregator) GetTask(ctx context.Context, req *aggregatorv1.GetTaskRequest) (*aggregatorv1.GetTaskResponse, error) {
	return answer(f.calls.begin(ctx, f.Check, "GetTask", req), f.GetTaskFunc, f.UnimplementedAggregatorServiceServer.GetTask, ctx, req)
}

// UpdateTask answers with UpdateTaskFunc.
func (f *FakeAggregator) UpdateTask(ctx context.Context, req *aggregatorv1.UpdateTaskRequest) (*aggregatorv1.UpdateTaskResponse, error) {
	return answer(f.calls.begin(ctx, f.Check, "UpdateTask", req), f.UpdateTaskFunc, f.UnimplementedAggregatorServiceServer.UpdateTask, ctx, req)
}

// CancelTask answers with CancelTaskFunc.
func (f *FakeAggregator) CancelTask(ctx context.Context, req *aggregatorv1.CancelTaskRequest) (*aggregatorv1.CancelTaskResponse, error) {
	return answer(f.calls.begin(ctx, f.Check, "CancelTask", req), f.CancelTaskFunc, f.UnimplementedAggregatorServiceServer.CancelTask, ctx, req)
}

// ListTasks answers with ListTasksFunc.
func (f *FakeAggregator) ListTasks(ctx context.Context, req *aggregatorv1.ListTasksRequest) (*aggregatorv1.ListTasksResponse, error) {
	return answer(f.calls.begin(ctx, f.Check, "ListTasks", req), f.ListTasksFunc, f.UnimplementedAggregatorServiceServer.ListTasks, ctx, req)
}
