package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
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
	"github.com/switchboard-mcp/switchboard/services/testkit"
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

// backends are the kit's fake aggregator and indexer as these tests set
// them up, served over real gRPC with service authentication; the
// aggregator also serves tasks (taskAggregator).
type backends struct {
	agg     *testkit.FakeAggregator
	idx     *testkit.FakeIndexer
	aggAddr string
	idxAddr string
	// down makes the indexer unavailable (indexerDown).
	down atomic.Bool
	// slowStarted and slowEnded are told when a beta_slow call starts
	// and when it sees its context end, and why.
	slowStarted chan struct{}
	slowEnded   chan error

	mu sync.Mutex
	// streamed are the request contexts of CallToolStream calls.
	streamed []*aggregatorv1.RequestContext

	// tasks are the aggregator's tasks (tasks_fakes_test.go).
	tasks taskState
}

// newBackends sets the fakes up: testTools with a view per principal,
// two items a page, and the calls of this file; the indexer's Search
// finds the caller's tools by description.
func newBackends() *backends {
	b := &backends{slowStarted: make(chan struct{}, 1), slowEnded: make(chan error, 1)}
	b.agg = &testkit.FakeAggregator{
		PageSize:          2,
		View:              view,
		Resources:         testResources,
		ResourceTemplates: []*aggregatorv1.ResourceTemplate{{UriTemplate: "file:///{name}", Name: "files", Backend: "alpha"}},
		Prompts: []*aggregatorv1.Prompt{{Name: "alpha_greet", Description: "greets", Backend: "alpha", OriginalName: "greet",
			DefinitionJson: `{"name":"alpha_greet","description":"greets","arguments":[{"name":"who","required":true}]}`}},
		Discovery:          &aggregatorv1.DiscoverResponse{Completions: true, Instructions: "test catalog"},
		CallToolFunc:       b.callTool,
		CallToolStreamFunc: b.callToolStream,
		ReadResourceFunc:   readResource,
		GetPromptFunc:      getPrompt,
		CompleteFunc: func(context.Context, *aggregatorv1.CompleteRequest) (*aggregatorv1.CompleteResponse, error) {
			return &aggregatorv1.CompleteResponse{ResultJson: `{"completion":{"values":["world"],"total":1}}`}, nil
		},
	}
	b.agg.SetTools(testTools)
	b.idx = &testkit.FakeIndexer{Check: b.indexerDown, SearchFunc: search}
	return b
}

// startBackends serves new backends until the test ends.
func startBackends(t testing.TB) *backends {
	t.Helper()
	b := newBackends()
	b.serve(t)
	return b
}

// serve serves b's fakes until the test ends.
func (b *backends) serve(t testing.TB) {
	t.Helper()
	creds := []config.ServiceCredential{{Name: "gateway", Token: serviceToken, AssertPrincipals: true, Allow: []string{"switchboard.aggregator.v1.AggregatorService/*", "switchboard.indexer.v1.IndexerService/*"}}}
	b.aggAddr = testkit.Serve(t, creds, b.registerTasks).Addr
	b.idxAddr = testkit.Serve(t, creds, b.idx.Register).Addr
}

func visible(p *commonv1.Principal, name string) bool {
	return !strings.HasPrefix(name, "admin_") || slices.Contains(p.GetGroups(), "admins")
}

// view is the tools p may see.
func view(p *commonv1.Principal, _ string, tools []*aggregatorv1.Tool) ([]*aggregatorv1.Tool, error) {
	return slices.DeleteFunc(slices.Clone(tools), func(t *aggregatorv1.Tool) bool { return !visible(p, t.GetName()) }), nil
}

var testResources = []*aggregatorv1.Resource{
	{Uri: "file:///a.txt", Name: "a", MimeType: "text/plain", Backend: "alpha", DefinitionJson: `{"uri":"file:///a.txt","name":"a","mimeType":"text/plain"}`},
	{Uri: "file:///b.txt", Name: "b", MimeType: "text/plain", Backend: "beta"},
}

// textResult is a tool result as a Modern backend sends it, with its own
// serverInfo in _meta.
func textResult(text string) string {
	b, _ := json.Marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": text}},
		"_meta": map[string]any{mcpspec.MetaServerInfo: map[string]string{"name": "backend", "version": "1"}, "trace": "kept"}})
	return string(b)
}

func (b *backends) callTool(ctx context.Context, req *aggregatorv1.CallToolRequest) (*aggregatorv1.CallToolResponse, error) {
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
		b.slowStarted <- struct{}{}
		<-ctx.Done()
		b.slowEnded <- ctx.Err()
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

func readResource(_ context.Context, req *aggregatorv1.ReadResourceRequest) (*aggregatorv1.ReadResourceResponse, error) {
	for _, r := range testResources {
		if r.Uri == req.GetUri() {
			b, _ := json.Marshal(map[string]any{"contents": []map[string]string{{"uri": r.Uri, "mimeType": "text/plain", "text": "content of " + r.Name}}})
			return &aggregatorv1.ReadResourceResponse{ResultJson: string(b), ResultType: "complete"}, nil
		}
	}
	return nil, apierr.New(codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND, "resource not found")
}

func getPrompt(_ context.Context, req *aggregatorv1.GetPromptRequest) (*aggregatorv1.GetPromptResponse, error) {
	if req.GetName() != "alpha_greet" {
		return nil, apierr.New(codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND, fmt.Sprintf("unknown prompt %q", req.GetName()))
	}
	b, _ := json.Marshal(map[string]any{"messages": []map[string]any{{"role": "user", "content": map[string]string{"type": "text", "text": "hello " + req.GetArguments()["who"]}}}})
	return &aggregatorv1.GetPromptResponse{ResultJson: string(b), ResultType: "complete"}, nil
}

// indexerDown answers for the indexer while down is set: Search and
// CheckSession as an index that cannot answer, ConsumeRequestState as an
// indexer out of reach.
func (b *backends) indexerDown(_ context.Context, method string, _ any) error {
	if !b.down.Load() {
		return nil
	}
	switch method {
	case "Search", "CheckSession":
		return apierr.New(codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_INDEX_UNAVAILABLE, "index unavailable")
	case "ConsumeRequestState":
		return status.Error(codes.Unavailable, "indexer down")
	}
	return nil
}

// search finds the caller's tools whose description holds the query.
func search(ctx context.Context, req *indexerv1.SearchRequest) (*indexerv1.SearchResponse, error) {
	p := svcauth.PrincipalFrom(ctx)
	var hits []*indexerv1.SearchHit
	for _, t := range testTools {
		if visible(p, t.Name) && strings.Contains(t.Description, req.GetQuery()) {
			hits = append(hits, &indexerv1.SearchHit{Name: t.Name, Description: t.Description, InputSchemaJson: t.InputSchemaJson, Score: 1})
		}
	}
	return &indexerv1.SearchResponse{Hits: hits, ScopeSize: uint32(len(testTools)), BaselineTokens: 1000}, nil
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
		deps.ClusterState = indexerv1.NewClusterStateServiceClient(idxConn)
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
	t.Cleanup(func() { gw.Stop(); srv.Close() })
	return gw, srv
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
