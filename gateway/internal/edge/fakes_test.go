package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboard-mcp/switchboard/gateway/internal/auth"
	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	"github.com/switchboard-mcp/switchboard/services/apierr"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// The test aggregator serves a fixed catalog over real gRPC. Tools whose
// name starts with "admin_" are visible only to the group "admins", so the
// tests can check per-principal views and that denied looks like missing.
const serviceToken = "gateway-service-token"

var testTools = []*aggregatorv1.Tool{
	tool("admin_reset", `{"type":"object"}`),
	tool("alpha_ask", `{"type":"object"}`),
	tool("alpha_echo", `{"type":"object","properties":{"text":{"type":"string"}}}`),
	tool("alpha_region", `{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"count":{"type":"integer","x-mcp-header":"Count"}},"required":["region"]}`),
	tool("beta_add", `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}}}`),
	tool("beta_slow", `{"type":"object"}`),
}

func tool(name, schema string) *aggregatorv1.Tool {
	backend, original, _ := strings.Cut(name, "_")
	def, _ := json.Marshal(map[string]any{"name": name, "description": "the " + original + " tool of " + backend, "inputSchema": json.RawMessage(schema)})
	return &aggregatorv1.Tool{Name: name, Description: "the " + original + " tool of " + backend, InputSchemaJson: schema,
		Backend: backend, OriginalName: original, DefinitionJson: string(def)}
}

type fakeAggregator struct {
	aggregatorv1.UnimplementedAggregatorServiceServer
	pageSize int

	mu       sync.Mutex
	watchers map[chan *aggregatorv1.WatchCatalogResponse]bool
	// subscribable are the resource URIs a watch subscribes to.
	subscribable map[string]bool
	// slowCancelled is closed when a beta_slow call sees its context end.
	slowStarted   chan struct{}
	slowCancelled chan struct{}
	calls         atomic.Int64
	listings      atomic.Int64
	// streamed are the request contexts of CallToolStream calls.
	streamed []*aggregatorv1.RequestContext
	// version is the catalog version (content-derived in a real
	// aggregator: it changes with the catalog only).
	version uint64
}

func newFakeAggregator() *fakeAggregator {
	return &fakeAggregator{pageSize: 2, watchers: map[chan *aggregatorv1.WatchCatalogResponse]bool{},
		slowStarted: make(chan struct{}, 1), slowCancelled: make(chan struct{}, 1), version: 1}
}

func visible(p *commonv1.Principal, name string) bool {
	return !strings.HasPrefix(name, "admin_") || slices.Contains(p.GetGroups(), "admins")
}

func (f *fakeAggregator) view(ctx context.Context) []*aggregatorv1.Tool {
	p := svcauth.PrincipalFrom(ctx)
	var out []*aggregatorv1.Tool
	for _, t := range testTools {
		if visible(p, t.Name) {
			out = append(out, t)
		}
	}
	return out
}

func (f *fakeAggregator) Discover(ctx context.Context, _ *aggregatorv1.DiscoverRequest) (*aggregatorv1.DiscoverResponse, error) {
	return &aggregatorv1.DiscoverResponse{CatalogVersion: 1, ToolCount: uint32(len(f.view(ctx))), ResourceCount: 2,
		ResourceTemplateCount: 1, PromptCount: 1, Completions: true, Instructions: "test catalog"}, nil
}

// pageOf serves keyset-like pages with cursors "<kind>:<offset>".
func pageOf[T any](kind string, items []T, cursor string, size int) ([]T, string, error) {
	start := 0
	if cursor != "" {
		k, off, ok := strings.Cut(cursor, ":")
		n, err := strconv.Atoi(off)
		if !ok || k != kind || err != nil || n < 0 || n > len(items) {
			return nil, "", apierr.New(codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_CURSOR, "invalid cursor")
		}
		start = n
	}
	end := min(start+size, len(items))
	next := ""
	if end < len(items) {
		next = kind + ":" + strconv.Itoa(end)
	}
	return items[start:end], next, nil
}

func (f *fakeAggregator) ListTools(ctx context.Context, req *aggregatorv1.ListToolsRequest) (*aggregatorv1.ListToolsResponse, error) {
	f.listings.Add(1)
	page, next, err := pageOf("tools", f.view(ctx), req.GetCursor(), f.pageSize)
	if err != nil {
		return nil, err
	}
	return &aggregatorv1.ListToolsResponse{Tools: page, NextCursor: next, CatalogVersion: 1}, nil
}

var testResources = []*aggregatorv1.Resource{
	{Uri: "file:///a.txt", Name: "a", MimeType: "text/plain", Backend: "alpha", DefinitionJson: `{"uri":"file:///a.txt","name":"a","mimeType":"text/plain"}`},
	{Uri: "file:///b.txt", Name: "b", MimeType: "text/plain", Backend: "beta"},
}

func (f *fakeAggregator) ListResources(_ context.Context, req *aggregatorv1.ListResourcesRequest) (*aggregatorv1.ListResourcesResponse, error) {
	page, next, err := pageOf("resources", testResources, req.GetCursor(), f.pageSize)
	if err != nil {
		return nil, err
	}
	return &aggregatorv1.ListResourcesResponse{Resources: page, NextCursor: next}, nil
}

func (f *fakeAggregator) ListResourceTemplates(_ context.Context, req *aggregatorv1.ListResourceTemplatesRequest) (*aggregatorv1.ListResourceTemplatesResponse, error) {
	items := []*aggregatorv1.ResourceTemplate{{UriTemplate: "file:///{name}", Name: "files", Backend: "alpha"}}
	page, next, err := pageOf("templates", items, req.GetCursor(), f.pageSize)
	if err != nil {
		return nil, err
	}
	return &aggregatorv1.ListResourceTemplatesResponse{ResourceTemplates: page, NextCursor: next}, nil
}

func (f *fakeAggregator) ListPrompts(_ context.Context, req *aggregatorv1.ListPromptsRequest) (*aggregatorv1.ListPromptsResponse, error) {
	items := []*aggregatorv1.Prompt{{Name: "alpha_greet", Description: "greets", Backend: "alpha", OriginalName: "greet",
		DefinitionJson: `{"name":"alpha_greet","description":"greets","arguments":[{"name":"who","required":true}]}`}}
	page, next, err := pageOf("prompts", items, req.GetCursor(), f.pageSize)
	if err != nil {
		return nil, err
	}
	return &aggregatorv1.ListPromptsResponse{Prompts: page, NextCursor: next}, nil
}

// textResult is a tool result as a Modern backend sends it, with its own
// serverInfo in _meta.
func textResult(text string) string {
	b, _ := json.Marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": text}},
		"_meta": map[string]any{mcpspec.MetaServerInfo: map[string]string{"name": "backend", "version": "1"}, "trace": "kept"}})
	return string(b)
}

func (f *fakeAggregator) CallTool(ctx context.Context, req *aggregatorv1.CallToolRequest) (*aggregatorv1.CallToolResponse, error) {
	f.calls.Add(1)
	p := svcauth.PrincipalFrom(ctx)
	if !visible(p, req.GetName()) || !slices.ContainsFunc(testTools, func(t *aggregatorv1.Tool) bool { return t.Name == req.GetName() }) {
		return nil, apierr.New(codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND, fmt.Sprintf("unknown tool %q", req.GetName()))
	}
	if req.GetCheckParamHeaders() {
		if err := checkRegionHeaders(req); err != nil {
			return nil, err
		}
	}
	switch req.GetName() {
	case "beta_slow":
		f.slowStarted <- struct{}{}
		<-ctx.Done()
		f.slowCancelled <- struct{}{}
		return nil, ctx.Err()
	case "alpha_ask":
		if req.GetRequestState() == "" {
			return &aggregatorv1.CallToolResponse{ResultType: "input_required",
				ResultJson: `{"content":null,"resultType":"input_required","requestState":"st-1","inputRequests":{"ok":{"method":"elicitation/create","params":{"mode":"form","message":"sure?","requestedSchema":{"type":"object","properties":{}}}}}}`}, nil
		}
		if req.GetRequestState() != "st-1" {
			// Only the state the backend issued is acceptable.
			return nil, apierr.New(codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "foreign request state")
		}
		return &aggregatorv1.CallToolResponse{ResultType: "complete", ResultJson: textResult("answered " + req.GetInputResponsesJson())}, nil
	case "beta_add":
		var args struct{ A, B int }
		if err := json.Unmarshal([]byte(req.GetArgumentsJson()), &args); err != nil {
			return &aggregatorv1.CallToolResponse{IsError: true, ResultType: "complete",
				ResultJson: `{"content":[{"type":"text","text":"bad arguments"}],"isError":true}`}, nil
		}
		return &aggregatorv1.CallToolResponse{ResultType: "complete", ResultJson: textResult(strconv.Itoa(args.A + args.B))}, nil
	}
	return &aggregatorv1.CallToolResponse{ResultType: "complete", ResultJson: textResult(p.GetSubject() + ":" + req.GetName() + ":" + req.GetArgumentsJson())}, nil
}

func (f *fakeAggregator) ReadResource(_ context.Context, req *aggregatorv1.ReadResourceRequest) (*aggregatorv1.ReadResourceResponse, error) {
	for _, r := range testResources {
		if r.Uri == req.GetUri() {
			b, _ := json.Marshal(map[string]any{"contents": []map[string]string{{"uri": r.Uri, "mimeType": "text/plain", "text": "content of " + r.Name}}})
			return &aggregatorv1.ReadResourceResponse{ResultJson: string(b), ResultType: "complete"}, nil
		}
	}
	return nil, apierr.New(codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND, "resource not found")
}

func (f *fakeAggregator) GetPrompt(_ context.Context, req *aggregatorv1.GetPromptRequest) (*aggregatorv1.GetPromptResponse, error) {
	if req.GetName() != "alpha_greet" {
		return nil, apierr.New(codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND, fmt.Sprintf("unknown prompt %q", req.GetName()))
	}
	b, _ := json.Marshal(map[string]any{"messages": []map[string]any{{"role": "user", "content": map[string]string{"type": "text", "text": "hello " + req.GetArguments()["who"]}}}})
	return &aggregatorv1.GetPromptResponse{ResultJson: string(b), ResultType: "complete"}, nil
}

func (f *fakeAggregator) Complete(_ context.Context, req *aggregatorv1.CompleteRequest) (*aggregatorv1.CompleteResponse, error) {
	return &aggregatorv1.CompleteResponse{ResultJson: `{"completion":{"values":["world"],"total":1}}`}, nil
}

func (f *fakeAggregator) WatchCatalog(req *aggregatorv1.WatchCatalogRequest, stream aggregatorv1.AggregatorService_WatchCatalogServer) error {
	// A nil event on ch ends the watch, as an aggregator restart would.
	ch := make(chan *aggregatorv1.WatchCatalogResponse, 8)
	f.mu.Lock()
	first := &aggregatorv1.WatchCatalogResponse{CatalogVersion: f.version}
	f.watchers[ch] = true
	for _, uri := range req.GetResourceUris() {
		if f.subscribable[uri] {
			first.SubscribedResourceUris = append(first.SubscribedResourceUris, uri)
		}
	}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.watchers, ch)
		f.mu.Unlock()
	}()
	if err := stream.Send(first); err != nil {
		return err
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case ev := <-ch:
			if ev == nil {
				return status.Error(codes.Unavailable, "the aggregator is shutting down")
			}
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
	}
}

// endWatches ends every open WatchCatalog stream.
func (f *fakeAggregator) endWatches() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.watchers {
		ch <- nil
		delete(f.watchers, ch)
	}
}

// setSubscribable sets the resource URIs later watches subscribe to.
func (f *fakeAggregator) setSubscribable(uris ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subscribable = map[string]bool{}
	for _, u := range uris {
		f.subscribable[u] = true
	}
}

// watcherCount reports open WatchCatalog streams.
func (f *fakeAggregator) watcherCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.watchers)
}

// notify sends a catalog change to every watcher.
func (f *fakeAggregator) notify(kinds ...aggregatorv1.CatalogKind) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.version++
	for ch := range f.watchers {
		ch <- &aggregatorv1.WatchCatalogResponse{CatalogVersion: f.version, Changed: kinds}
	}
}

// changeUnheard changes the catalog without telling the watchers, as a
// change made while their watches are down.
func (f *fakeAggregator) changeUnheard() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.version++
}

type fakeIndexer struct {
	indexerv1.UnimplementedIndexerServiceServer
	mu       sync.Mutex
	revoked  map[string]bool
	watchers map[chan string]struct{}
	down     atomic.Bool
	searches atomic.Int64
	// consumed are the request state digests used up.
	consumed map[string]bool
}

func (x *fakeIndexer) ConsumeRequestState(_ context.Context, req *indexerv1.ConsumeRequestStateRequest) (*indexerv1.ConsumeRequestStateResponse, error) {
	if x.down.Load() {
		return nil, status.Error(codes.Unavailable, "indexer down")
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.consumed == nil {
		x.consumed = map[string]bool{}
	}
	first := !x.consumed[req.GetStateDigest()]
	x.consumed[req.GetStateDigest()] = true
	return &indexerv1.ConsumeRequestStateResponse{FirstUse: first}, nil
}

func (x *fakeIndexer) Search(ctx context.Context, req *indexerv1.SearchRequest) (*indexerv1.SearchResponse, error) {
	x.searches.Add(1)
	if x.down.Load() {
		return nil, apierr.New(codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_INDEX_UNAVAILABLE, "index unavailable")
	}
	p := svcauth.PrincipalFrom(ctx)
	var hits []*indexerv1.SearchHit
	for _, t := range testTools {
		if visible(p, t.Name) && strings.Contains(t.Description, req.GetQuery()) {
			hits = append(hits, &indexerv1.SearchHit{Name: t.Name, Description: t.Description, InputSchemaJson: t.InputSchemaJson, Score: 1})
		}
	}
	return &indexerv1.SearchResponse{Hits: hits, ScopeSize: uint32(len(testTools)), BaselineTokens: 1000}, nil
}

func (x *fakeIndexer) RevokeSession(_ context.Context, req *indexerv1.RevokeSessionRequest) (*indexerv1.RevokeSessionResponse, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.revoked[req.GetSessionDigest()] = true
	for w := range x.watchers {
		w <- req.GetSessionDigest()
	}
	return &indexerv1.RevokeSessionResponse{}, nil
}

// WatchRevocations sends the revocations so far, then each new one, as the
// indexer does for every gateway replica.
func (x *fakeIndexer) WatchRevocations(_ *indexerv1.WatchRevocationsRequest, stream indexerv1.IndexerService_WatchRevocationsServer) error {
	expiry := timestamppb.New(time.Now().Add(time.Hour))
	ch := make(chan string, 64)
	x.mu.Lock()
	snapshot := &indexerv1.WatchRevocationsResponse{SnapshotComplete: true}
	for d := range x.revoked {
		snapshot.Revocations = append(snapshot.Revocations, &indexerv1.SessionRevocation{SessionDigest: d, ExpiresAt: expiry})
	}
	if x.watchers == nil {
		x.watchers = map[chan string]struct{}{}
	}
	x.watchers[ch] = struct{}{}
	x.mu.Unlock()
	defer func() {
		x.mu.Lock()
		delete(x.watchers, ch)
		x.mu.Unlock()
	}()
	if err := stream.Send(snapshot); err != nil {
		return err
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case d := <-ch:
			if err := stream.Send(&indexerv1.WatchRevocationsResponse{Revocations: []*indexerv1.SessionRevocation{{SessionDigest: d, ExpiresAt: expiry}}}); err != nil {
				return err
			}
		}
	}
}

func (x *fakeIndexer) CheckSession(_ context.Context, req *indexerv1.CheckSessionRequest) (*indexerv1.CheckSessionResponse, error) {
	if x.down.Load() {
		return nil, apierr.New(codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_INDEX_UNAVAILABLE, "index unavailable")
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return &indexerv1.CheckSessionResponse{Revoked: x.revoked[req.GetSessionDigest()]}, nil
}

// backends are the in-process aggregator and indexer, served over real gRPC
// with service authentication.
type backends struct {
	agg     *fakeAggregator
	idx     *fakeIndexer
	aggAddr string
	idxAddr string
}

func startBackends(t testing.TB) *backends {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	authn := svcauth.NewAuthenticator([]config.ServiceCredential{{Name: "gateway", Token: serviceToken, AssertPrincipals: true, Allow: []string{"switchboard.aggregator.v1.AggregatorService/*", "switchboard.indexer.v1.IndexerService/*"}}})
	b := &backends{agg: newFakeAggregator(), idx: &fakeIndexer{revoked: map[string]bool{}}}
	serve := func(register func(*rpc.Server)) string {
		srv, err := rpc.NewServer(authn, config.TLS{}, log)
		if err != nil {
			t.Fatal(err)
		}
		register(srv)
		srv.SetServing()
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = srv.ServeListener(ctx, lis, time.Second); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
		return lis.Addr().String()
	}
	b.aggAddr = serve(func(s *rpc.Server) { aggregatorv1.RegisterAggregatorServiceServer(s, b.agg) })
	b.idxAddr = serve(func(s *rpc.Server) { indexerv1.RegisterIndexerServiceServer(s, b.idx) })
	return b
}

// testKey is a fixed session key, shared by the gateways of one test.
const testKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

// testGatewayConfig is an apiKeys gateway: alice is a plain user, bob an
// admin.
func testGatewayConfig(b *backends) config.Gateway {
	return config.Gateway{
		Aggregator: config.Endpoint{Address: b.aggAddr, Token: serviceToken},
		Indexer:    config.Endpoint{Address: b.idxAddr, Token: serviceToken},
		Auth: config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{
			{Key: "alice-key", Subject: "alice", Groups: []string{"users"}},
			{Key: "bob-key", Subject: "bob", Groups: []string{"admins"}},
		}},
		Sessions:   config.Sessions{Key: testKey},
		ServerInfo: config.ServerInfo{Name: "switchboard-test", Version: "1.0.0"},
		HTTP:       config.GatewayHTTP{KeepAlive: config.Duration(50 * time.Millisecond)},
	}
}

// startGateway serves a gateway over real HTTP in front of b.
func startGateway(t testing.TB, b *backends, cfg config.Gateway) (*Gateway, *httptest.Server) {
	t.Helper()
	return startGatewayWith(t, b, cfg, nil)
}

// startGatewayWith is startGateway with deps adjusted by adjust (nil: as
// they are), e.g. to add an audit writer.
func startGatewayWith(t testing.TB, b *backends, cfg config.Gateway, adjust func(*Deps)) (*Gateway, *httptest.Server) {
	t.Helper()
	aggConn, err := rpc.Dial(cfg.Aggregator, config.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { aggConn.Close() })
	deps := Deps{
		Aggregator:       aggregatorv1.NewAggregatorServiceClient(aggConn),
		AggregatorHealth: healthpb.NewHealthClient(aggConn),
		Log:              slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if cfg.Indexer.Address != "" {
		idxConn, err := rpc.Dial(cfg.Indexer, config.TLS{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { idxConn.Close() })
		deps.Indexer = indexerv1.NewIndexerServiceClient(idxConn)
	}
	if deps.Auth, err = auth.New(cfg.Auth, nil); err != nil {
		t.Fatal(err)
	}
	if adjust != nil {
		adjust(&deps)
	}
	gw, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(gw.Handler())
	srv.Config.RegisterOnShutdown(gw.Close)
	srv.Start()
	t.Cleanup(func() { gw.Close(); srv.Close() })
	return gw, srv
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// checkRegionHeaders plays the aggregator's part of the Mcp-Param-*
// contract for alpha_region (region and count mirror Region and Count):
// the rule itself is tested in the aggregator; here it shows that the
// gateway forwards the headers as sent and maps the refusal to -32020.
func checkRegionHeaders(req *aggregatorv1.CallToolRequest) error {
	if req.GetName() != "alpha_region" {
		return nil
	}
	var args map[string]any
	_ = json.Unmarshal([]byte(req.GetArgumentsJson()), &args)
	for arg, header := range map[string]string{"region": "region", "count": "count"} {
		sent, has := req.GetParamHeaders()[header]
		v, present := args[arg]
		want := fmt.Sprint(v)
		if decoded, ok := wire.DecodeHeaderValue(sent); has && (!ok || !present || decoded != want) {
			return apierr.New(codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_HEADER_MISMATCH, "Mcp-Param-"+header+" does not match the argument", "header", "Mcp-Param-"+header)
		}
		if !has && present {
			return apierr.New(codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_HEADER_MISMATCH, "missing Mcp-Param-Region header", "header", "Mcp-Param-"+header)
		}
	}
	return nil
}
