package console

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// The test services answer over real gRPC behind the real service
// authentication, with the console's credential allowed exactly
// config.ConsoleMethods. Tools named "admin_*" are visible to the group
// "admins" only; a backend's name is hostile markup, to check escaping.
const (
	testServiceToken = "console-service-token"
	testOperatorKey  = "operator-key-0123456789"
	hostileName      = `<script>alert("x")</script>`
)

type testAggregator struct {
	aggregatorv1.UnimplementedAggregatorServiceServer
	changes chan *aggregatorv1.WatchCatalogResponse
}

var testToolNames = []string{"admin_reset", "alpha_echo", "alpha_time", "beta_add"}

func (a *testAggregator) visibleTools(ctx context.Context, server string) ([]string, error) {
	if server != "" && server != "forecast" {
		return nil, status.Error(codes.NotFound, "no such server")
	}
	p := svcauth.PrincipalFrom(ctx)
	var out []string
	for _, n := range testToolNames {
		if strings.HasPrefix(n, "admin_") && !slices.Contains(p.GetGroups(), "admins") {
			continue
		}
		if server == "forecast" && !strings.HasPrefix(n, "alpha_") {
			continue
		}
		out = append(out, n)
	}
	return out, nil
}

func (a *testAggregator) ListBackends(ctx context.Context, _ *aggregatorv1.ListBackendsRequest) (*aggregatorv1.ListBackendsResponse, error) {
	if c, _ := svcauth.CallerFrom(ctx); !c.Operator {
		return nil, status.Error(codes.Internal, "the console's credential is not an operator's")
	}
	return &aggregatorv1.ListBackendsResponse{CatalogVersion: 42, Backends: []*aggregatorv1.Backend{
		{Name: "alpha", Url: "http://alpha.internal/mcp", Health: aggregatorv1.BackendHealth_BACKEND_HEALTH_HEALTHY, ProtocolVersion: "2026-07-28",
			ToolCount: 2, LastLatency: durationpb.New(3 * time.Millisecond), LastCheck: timestamppb.Now()},
		{Name: hostileName, Health: aggregatorv1.BackendHealth_BACKEND_HEALTH_UNHEALTHY, ProtocolVersion: "2025-11-25",
			LastError: "dial tcp 10.0.0.9:80: connection refused <b>"},
	}}, nil
}

func (a *testAggregator) Discover(ctx context.Context, req *aggregatorv1.DiscoverRequest) (*aggregatorv1.DiscoverResponse, error) {
	tools, err := a.visibleTools(ctx, req.GetServer())
	if err != nil {
		return nil, err
	}
	return &aggregatorv1.DiscoverResponse{CatalogVersion: 42, ToolCount: uint32(len(tools))}, nil
}

// ListTools pages one tool at a time, so the pager is exercised.
func (a *testAggregator) ListTools(ctx context.Context, req *aggregatorv1.ListToolsRequest) (*aggregatorv1.ListToolsResponse, error) {
	tools, err := a.visibleTools(ctx, req.GetServer())
	if err != nil {
		return nil, err
	}
	start := 0
	if req.GetCursor() != "" {
		if start, err = strconv.Atoi(req.GetCursor()); err != nil || start >= len(tools) {
			return nil, status.Error(codes.InvalidArgument, "bad cursor")
		}
	}
	resp := &aggregatorv1.ListToolsResponse{CatalogVersion: 42}
	backend, original, _ := strings.Cut(tools[start], "_")
	resp.Tools = []*aggregatorv1.Tool{{Name: tools[start], Backend: backend, OriginalName: original, Description: "the " + original + " tool"}}
	if start+1 < len(tools) {
		resp.NextCursor = strconv.Itoa(start + 1)
	}
	return resp, nil
}

func (a *testAggregator) ListPrompts(context.Context, *aggregatorv1.ListPromptsRequest) (*aggregatorv1.ListPromptsResponse, error) {
	return &aggregatorv1.ListPromptsResponse{Prompts: []*aggregatorv1.Prompt{{Name: "alpha_greet", Backend: "alpha", Description: `says <i>hi</i>`}}}, nil
}

func (a *testAggregator) WatchCatalog(req *aggregatorv1.WatchCatalogRequest, stream aggregatorv1.AggregatorService_WatchCatalogServer) error {
	if !req.GetAllChanges() {
		return status.Error(codes.InvalidArgument, "the console watches every change")
	}
	if err := stream.Send(&aggregatorv1.WatchCatalogResponse{CatalogVersion: 42}); err != nil {
		return err
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case ev := <-a.changes:
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
	}
}

type testIndexer struct {
	indexerv1.UnimplementedIndexerServiceServer
	noAudit bool
	// approvals are sent on the definitions watch after its first message.
	approvals chan *indexerv1.WatchToolDefinitionsResponse

	mu sync.Mutex
	// pending is what ListToolDefinitions lists; more makes it say there
	// is another page.
	pending []*indexerv1.ToolDefinition
	more    bool
	// keywords are the last search's.
	keywords []string
}

func (x *testIndexer) lastKeywords() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.keywords
}

func (x *testIndexer) setPending(more bool, defs ...*indexerv1.ToolDefinition) {
	x.mu.Lock()
	x.pending, x.more = defs, more
	x.mu.Unlock()
}

func (x *testIndexer) Stats(context.Context, *indexerv1.StatsRequest) (*indexerv1.StatsResponse, error) {
	return &indexerv1.StatsResponse{Documents: 7, Scopes: 2, ScopeBuilds: 3}, nil
}

// Search ranks the visible tools holding the query, with the parts an
// operator's explained search carries.
func (x *testIndexer) Search(ctx context.Context, req *indexerv1.SearchRequest) (*indexerv1.SearchResponse, error) {
	if c, _ := svcauth.CallerFrom(ctx); req.GetExplain() && !c.Operator {
		return nil, status.Error(codes.PermissionDenied, "explain is for operators")
	}
	x.mu.Lock()
	x.keywords = req.GetKeywords()
	x.mu.Unlock()
	switch req.GetQuery() {
	case "limited":
		return nil, apierr.New(codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_RATE_LIMITED, "rate limited", "retryAfterSeconds", "7")
	case "forbidden":
		return nil, status.Error(codes.PermissionDenied, "not for this credential")
	}
	agg := &testAggregator{}
	tools, err := agg.visibleTools(ctx, req.GetServer())
	if err != nil {
		return nil, err
	}
	resp := &indexerv1.SearchResponse{ScopeSize: uint32(len(tools)), CatalogVersion: 42}
	for _, n := range tools {
		if !strings.Contains(n, req.GetQuery()) {
			continue
		}
		hit := &indexerv1.SearchHit{Name: n, Score: 0.75}
		if req.GetExplain() {
			hit.Explanation = []*indexerv1.ScorePart{
				{Kind: indexerv1.ScorePartKind_SCORE_PART_KIND_EXACT, Contribution: 0.5, Lexeme: req.GetQuery(), Boost: 1, Idf: 0.5},
				{Kind: indexerv1.ScorePartKind_SCORE_PART_KIND_TRIGRAM, Contribution: 0.25, NameKey: strings.ReplaceAll(n, "_", ""), Similarity: 0.5, TrigramWeight: 0.5},
			}
		}
		resp.Hits = append(resp.Hits, hit)
	}
	if req.GetExplain() {
		resp.Terms = []*indexerv1.QueryTerm{{Word: req.GetQuery(), Weight: 1, Source: indexerv1.TermSource_TERM_SOURCE_QUERY, Lexemes: []string{req.GetQuery()}}}
	}
	return resp, nil
}

func (x *testIndexer) ListToolDefinitions(context.Context, *indexerv1.ListToolDefinitionsRequest) (*indexerv1.ListToolDefinitionsResponse, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	resp := &indexerv1.ListToolDefinitionsResponse{Definitions: x.pending}
	if x.more {
		resp.NextPageToken = "more"
	}
	return resp, nil
}

func (x *testIndexer) QueryAuditEvents(_ context.Context, req *indexerv1.QueryAuditEventsRequest) (*indexerv1.QueryAuditEventsResponse, error) {
	if x.noAudit {
		return nil, status.Error(codes.FailedPrecondition, "audit.database is not enabled")
	}
	all := []*indexerv1.AuditEvent{
		{Time: timestamppb.Now(), Service: "aggregator", Kind: "tool_call", Outcome: "ok", Subject: "alice", Tool: "alpha_echo", Backend: "alpha"},
		{Time: timestamppb.Now(), Service: "aggregator", Kind: "tool_call", Outcome: "denied", Subject: "mallory", Tool: "admin_reset"},
	}
	resp := &indexerv1.QueryAuditEventsResponse{}
	for _, e := range all {
		if (req.GetOutcome() == "" || e.Outcome == req.GetOutcome()) && (req.GetSubject() == "" || e.Subject == req.GetSubject()) {
			resp.Events = append(resp.Events, e)
		}
	}
	return resp, nil
}

func (x *testIndexer) WatchToolDefinitions(_ *indexerv1.WatchToolDefinitionsRequest, stream indexerv1.IndexerService_WatchToolDefinitionsServer) error {
	if err := stream.Send(&indexerv1.WatchToolDefinitionsResponse{Resync: true, Approvals: []*indexerv1.ToolDefinitionDigest{{Backend: "alpha", Tool: "time", Digest: "cccc"}}}); err != nil {
		return err
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case m := <-x.approvals:
			if err := stream.Send(m); err != nil {
				return err
			}
		}
	}
}

// serveGRPC serves register's services with the console's credential.
func serveGRPC(t *testing.T, register func(*rpc.Server)) string {
	t.Helper()
	authn := svcauth.NewAuthenticator([]config.ServiceCredential{{Name: "console", Token: testServiceToken, Operator: true, AssertPrincipals: true, Allow: config.ConsoleMethods}})
	srv, err := rpc.NewServer(authn, config.TLS{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
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

// testConsole is a console over the test services, served over HTTP.
type testConsole struct {
	*Console
	srv *httptest.Server
	agg *testAggregator
	idx *testIndexer
	log *syncBuffer
}

// syncBuffer is the console's log, read by tests while it writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func startConsole(t *testing.T, rl RateLimitState, change func(*config.Config)) *testConsole {
	t.Helper()
	return startConsoleOIDC(t, rl, change, nil)
}

// startConsoleOIDC also logs operators in through the provider oidc
// makes, given the console's base URL.
func startConsoleOIDC(t *testing.T, rl RateLimitState, change func(*config.Config), oidc func(base string) *OIDCLogin) *testConsole {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	var login *OIDCLogin
	if oidc != nil {
		login = oidc(srv.URL)
	}
	agg := &testAggregator{changes: make(chan *aggregatorv1.WatchCatalogResponse, 4)}
	idx := &testIndexer{approvals: make(chan *indexerv1.WatchToolDefinitionsResponse, 1)}
	idx.setPending(false, &indexerv1.ToolDefinition{Backend: "alpha", Tool: "echo", ApprovedDigest: "aaaa", SeenDigest: "bbbb", Pending: true, LastSeen: timestamppb.Now()})
	aggAddr := serveGRPC(t, func(s *rpc.Server) { aggregatorv1.RegisterAggregatorServiceServer(s, agg) })
	idxAddr := serveGRPC(t, func(s *rpc.Server) { indexerv1.RegisterIndexerServiceServer(s, idx) })
	cfg := &config.Config{
		Servers: []config.Server{{Name: "forecast", Backends: []string{"alpha"}}},
		RateLimits: config.RateLimits{Limits: []config.RateLimit{{Name: "per-user", Per: "principal", Rate: "10/s", Burst: 20,
			Match: config.RateLimitMatch{Groups: []string{"<users>"}}}, {Name: "hourly", Per: "principal", Rate: "1/h", Burst: 2}}},
	}
	cfg.Gateway.Console = config.Console{Enabled: true, OperatorKeys: []string{"another-operator-key", testOperatorKey}, ServiceToken: testServiceToken}
	if change != nil {
		change(cfg)
	}
	aggConn, err := rpc.Dial(config.Endpoint{Address: aggAddr, Token: testServiceToken}, config.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	idxConn, err := rpc.Dial(config.Endpoint{Address: idxAddr, Token: testServiceToken}, config.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { aggConn.Close(); idxConn.Close() })
	logs := &syncBuffer{}
	c, err := New(cfg, Deps{
		Aggregator: aggregatorv1.NewAggregatorServiceClient(aggConn), Indexer: indexerv1.NewIndexerServiceClient(idxConn),
		RateLimits: rl, OIDC: login, Log: slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	mux.Handle("/console/", c.Handler())
	return &testConsole{Console: c, srv: srv, agg: agg, idx: idx, log: logs}
}

// client is a browser-like client: a cookie jar, no redirects followed.
func (tc *testConsole) client(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// get fetches a console path and returns the status and body.
func get(t *testing.T, c *http.Client, u string) (int, string, http.Header) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body), resp.Header
}

func post(t *testing.T, c *http.Client, u string, form url.Values) (int, string, http.Header) {
	t.Helper()
	resp, err := c.PostForm(u, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body), resp.Header
}

// formValue finds the value of the hidden input name in a page.
func formValue(t *testing.T, body, name string) string {
	t.Helper()
	marker := `name="` + name + `" value="`
	i := strings.Index(body, marker)
	if i < 0 {
		t.Fatalf("no %s field in:\n%s", name, body)
	}
	rest := body[i+len(marker):]
	return rest[:strings.IndexByte(rest, '"')]
}

// login logs c in with key and returns the landing status and location.
func (tc *testConsole) login(t *testing.T, c *http.Client, key string) (int, string) {
	t.Helper()
	_, body, _ := get(t, c, tc.srv.URL+"/console/login")
	code, _, h := post(t, c, tc.srv.URL+"/console/login", url.Values{"csrf": {formValue(t, body, "csrf")}, "key": {key}})
	return code, h.Get("Location")
}
