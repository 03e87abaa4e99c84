package console

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// The kit's fake services answer over real gRPC behind the real service
// authentication, with the console's credential allowed exactly
// config.ConsoleMethods. Tools named "admin_*" are visible to the group
// "admins" only; a backend's name is hostile markup, to check escaping.
const (
	testServiceToken = "console-service-token"
	testOperatorKey  = "operator-key-0123456789"
	hostileName      = `<script>alert("x")</script>`
)

var testToolNames = []string{"admin_reset", "alpha_echo", "alpha_time", "beta_add"}

// consoleTools are the tools of testToolNames.
func consoleTools() []*aggregatorv1.Tool {
	var tools []*aggregatorv1.Tool
	for _, n := range testToolNames {
		backend, original, _ := strings.Cut(n, "_")
		tools = append(tools, &aggregatorv1.Tool{Name: n, Backend: backend, OriginalName: original, Description: "the " + original + " tool"})
	}
	return tools
}

// view is what p sees of tools on server: "forecast" has alpha's tools,
// and no other server exists.
func view(p *commonv1.Principal, server string, tools []*aggregatorv1.Tool) ([]*aggregatorv1.Tool, error) {
	if server != "" && server != "forecast" {
		return nil, status.Error(codes.NotFound, "no such server")
	}
	return slices.DeleteFunc(slices.Clone(tools), func(t *aggregatorv1.Tool) bool {
		return strings.HasPrefix(t.GetName(), "admin_") && !slices.Contains(p.GetGroups(), "admins") ||
			server == "forecast" && !strings.HasPrefix(t.GetName(), "alpha_")
	}), nil
}

// newAggregator is the kit's fake aggregator with the console's catalog
// at version 42, paging one tool at a time so that the pager is
// exercised. Only an operator may list the backends, and the console
// watches every change.
func newAggregator() *testkit.FakeAggregator {
	agg := &testkit.FakeAggregator{
		PageSize: 1,
		View:     view,
		Prompts:  []*aggregatorv1.Prompt{{Name: "alpha_greet", Backend: "alpha", Description: `says <i>hi</i>`}},
		Check: func(_ context.Context, method string, req any) error {
			if method == "WatchCatalog" && !req.(*aggregatorv1.WatchCatalogRequest).GetAllChanges() {
				return status.Error(codes.InvalidArgument, "the console watches every change")
			}
			return nil
		},
		ListBackendsFunc: func(ctx context.Context, _ *aggregatorv1.ListBackendsRequest) (*aggregatorv1.ListBackendsResponse, error) {
			if c, _ := svcauth.CallerFrom(ctx); !c.Operator {
				return nil, status.Error(codes.Internal, "the console's credential is not an operator's")
			}
			return &aggregatorv1.ListBackendsResponse{CatalogVersion: 42, Backends: []*aggregatorv1.Backend{
				{Name: "alpha", Url: "http://alpha.internal/mcp", Health: aggregatorv1.BackendHealth_BACKEND_HEALTH_HEALTHY, ProtocolVersion: "2026-07-28",
					ToolCount: 2, LastLatency: durationpb.New(3 * time.Millisecond), LastCheck: timestamppb.Now()},
				{Name: hostileName, Health: aggregatorv1.BackendHealth_BACKEND_HEALTH_UNHEALTHY, ProtocolVersion: "2025-11-25",
					LastError: "dial tcp 10.0.0.9:80: connection refused <b>"},
			}, Conflicts: []*aggregatorv1.CatalogConflict{
				{Kind: "resourceTemplates", Name: "notes://{id}", Backends: []string{"alpha", hostileName}, Winner: "alpha", Overlaps: "notes://{+id}"},
				{Kind: "resources", Name: "shared://<i>x</i>", Backends: []string{"alpha", hostileName}},
			}}, nil
		},
		GetTrafficFunc: func(ctx context.Context, _ *aggregatorv1.GetTrafficRequest) (*aggregatorv1.GetTrafficResponse, error) {
			if c, _ := svcauth.CallerFrom(ctx); !c.Operator {
				return nil, status.Error(codes.PermissionDenied, "operators only")
			}
			// Two replicas answer in turn, as a balanced channel's calls
			// reach them, and the gateway's other calls take every third
			// turn: the first replica answers twice before the second
			// does. Both hours end in the same minute.
			if trafficReads.Add(1)%3 == 0 {
				return otherReplicaTraffic(trafficNow), nil
			}
			return testTraffic(trafficNow), nil
		},
	}
	agg.SetTools(consoleTools())
	agg.SetVersion(42)
	return agg
}

// trafficReads counts GetTraffic calls, for the replicas' turns.
var trafficReads atomic.Int64

// trafficNow is when the replicas' hours end: one moment for both, as a
// minute turning between their answers would move one hour apart.
var trafficNow = time.Now()

// otherReplicaTraffic is a second replica's hour: alpha_echo called 5
// times in the last minute, and the reload every replica saw.
func otherReplicaTraffic(now time.Time) *aggregatorv1.GetTrafficResponse {
	resp := testTraffic(now)
	resp.Replica = "aggregator-1"
	for i, m := range resp.Minutes {
		m.Cells = nil
		if i == 59 {
			m.Cells = []*aggregatorv1.TrafficCell{
				{Dimension: "total", Calls: 5, LatencyHistogram: []int64{0, 0, 0, 0, 5}},
				{Dimension: "backend", Name: "alpha", Calls: 5, LatencyHistogram: []int64{0, 0, 0, 0, 5}},
				{Dimension: "tool", Name: "alpha_echo", Calls: 5, LatencyHistogram: []int64{0, 0, 0, 0, 5}},
			}
		}
	}
	resp.HealthEvents = resp.HealthEvents[:1]
	return resp
}

// testTraffic is an hour of traffic ending at now: alpha_echo called 10
// times a minute (but one) at about 4 ms (1 error), the hostile backend's tool
// twice in the last minute and refused once by a rate limit; alpha went
// unhealthy 10 minutes ago and back 5 minutes later; a reload.
func testTraffic(now time.Time) *aggregatorv1.GetTrafficResponse {
	start := now.Truncate(time.Minute).Add(-59 * time.Minute)
	hist := func(n int64) []int64 { return []int64{0, 0, 0, 0, n, 0, 0, 0} } // ≤ 4 ms
	resp := &aggregatorv1.GetTrafficResponse{Replica: "aggregator-0", LatencyBucketMs: []float64{0.25, 0.5, 1, 2, 4, 8, 16, 32}}
	for i := range 60 {
		m := &aggregatorv1.TrafficMinute{Start: timestamppb.New(start.Add(time.Duration(i) * time.Minute))}
		cell := func(dim, name string, calls, errors, limited int64) *aggregatorv1.TrafficCell {
			return &aggregatorv1.TrafficCell{Dimension: dim, Name: name, Calls: calls, Errors: errors, RateLimited: limited, LatencyHistogram: hist(calls)}
		}
		if i == 10 { // a minute without calls
			resp.Minutes = append(resp.Minutes, m)
			continue
		}
		var errs int64
		if i == 30 {
			errs = 1
		}
		m.Cells = []*aggregatorv1.TrafficCell{cell("total", "", 10, errs, 0), cell("backend", "alpha", 10, errs, 0),
			cell("tool", "alpha_echo", 10, errs, 0), cell("server", "/mcp", 10, errs, 0)}
		if i == 59 {
			m.Cells = append(m.Cells, cell("backend", hostileName, 3, 0, 1), cell("tool", hostileName+"_x", 3, 0, 1))
		}
		resp.Minutes = append(resp.Minutes, m)
	}
	at := func(m int) *timestamppb.Timestamp { return timestamppb.New(start.Add(time.Duration(m) * time.Minute)) }
	resp.HealthEvents = []*aggregatorv1.HealthEvent{
		{Time: at(40), Backend: "", State: "reload", Detail: "the configuration was reloaded"},
		{Time: at(50), Backend: "alpha", State: "unhealthy", PreviousState: "healthy", Detail: "was healthy"},
		{Time: at(55), Backend: "alpha", State: "healthy", PreviousState: "unhealthy", Detail: "was unhealthy"},
	}
	return resp
}

// testIndexer is what the console's tests set and read of the fake
// indexer.
type testIndexer struct {
	*testkit.FakeIndexer

	mu sync.Mutex
	// pending is what ListToolDefinitions lists; more makes it say there
	// is another page.
	pending []*indexerv1.ToolDefinition
	more    bool
	// keywords are the last search's.
	keywords []string
}

func newIndexer() *testIndexer {
	x := &testIndexer{}
	x.FakeIndexer = &testkit.FakeIndexer{
		StatsFunc: func(context.Context, *indexerv1.StatsRequest) (*indexerv1.StatsResponse, error) {
			return &indexerv1.StatsResponse{Documents: 7, Scopes: 2, ScopeBuilds: 3}, nil
		},
		SearchFunc:              x.search,
		ListToolDefinitionsFunc: x.listToolDefinitions,
		QueryAuditEventsFunc:    queryAuditEvents,
	}
	return x
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

// search ranks the visible tools holding the query, with the parts an
// operator's explained search carries.
func (x *testIndexer) search(ctx context.Context, req *indexerv1.SearchRequest) (*indexerv1.SearchResponse, error) {
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
	tools, err := view(svcauth.PrincipalFrom(ctx), req.GetServer(), consoleTools())
	if err != nil {
		return nil, err
	}
	resp := &indexerv1.SearchResponse{ScopeSize: uint32(len(tools)), CatalogVersion: 42}
	for _, t := range tools {
		n := t.GetName()
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

func (x *testIndexer) listToolDefinitions(context.Context, *indexerv1.ListToolDefinitionsRequest) (*indexerv1.ListToolDefinitionsResponse, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	resp := &indexerv1.ListToolDefinitionsResponse{Definitions: x.pending}
	if x.more {
		resp.NextPageToken = "more"
	}
	return resp, nil
}

func queryAuditEvents(_ context.Context, req *indexerv1.QueryAuditEventsRequest) (*indexerv1.QueryAuditEventsResponse, error) {
	all := []*indexerv1.AuditEvent{
		{Time: timestamppb.Now(), Service: "aggregator", Kind: "tool_call", Outcome: "ok", Subject: "alice", Tool: "alpha_echo", Backend: "alpha",
			RecordedBy: "aggregator", RecordedByIdentity: "uriSAN spiffe://switchboard/aggregator"},
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

// testConsole is a console over the test services, served over HTTP.
type testConsole struct {
	*Console
	srv   *httptest.Server
	agg   *testkit.FakeAggregator
	idx   *testIndexer
	tasks *testTasks
	log   *testkit.LogBuffer
}

func startConsole(t *testing.T, rl RateLimitState, change func(*config.Config)) *testConsole {
	t.Helper()
	return startConsoleOIDC(t, rl, change, nil)
}

// startConsoleOIDC also logs operators in through the provider oidc
// makes, given the console's base URL.
func startConsoleOIDC(t *testing.T, rl RateLimitState, change func(*config.Config), oidc func(base string) *OIDCLogin) *testConsole {
	t.Helper()
	return startConsoleServing(t, rl, change, oidc, nil)
}

// startConsoleServing also lets prepare set the aggregator's answers
// before it serves (its fields are not to change once it does).
func startConsoleServing(t *testing.T, rl RateLimitState, change func(*config.Config), oidc func(base string) *OIDCLogin, prepare func(*testkit.FakeAggregator)) *testConsole {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	var login *OIDCLogin
	if oidc != nil {
		login = oidc(srv.URL)
	}
	agg, idx, tasks := newAggregator(), newIndexer(), newTestTasks()
	tasks.serve(agg)
	if prepare != nil {
		prepare(agg)
	}
	idx.setPending(false, &indexerv1.ToolDefinition{Backend: "alpha", Tool: "echo", ApprovedDigest: "aaaa", SeenDigest: "bbbb", Pending: true, LastSeen: timestamppb.Now()})
	creds := []config.ServiceCredential{{Name: "console", Token: testServiceToken, Operator: true, AssertPrincipals: true, Allow: config.ConsoleMethods}}
	aggAddr, idxAddr := testkit.Serve(t, creds, agg.Register).Addr, testkit.Serve(t, creds, idx.Register).Addr
	cfg := &config.Config{
		Servers: []config.Server{{Name: "forecast", Backends: []string{"alpha"}}},
		RateLimits: config.RateLimits{Limits: []config.RateLimit{{Name: "per-user", Per: "principal", Rate: "10/s", Burst: 20,
			Match: config.RateLimitMatch{Groups: []string{"<users>"}}}, {Name: "hourly", Per: "principal", Rate: "1/h", Burst: 2},
			{Name: "slow-tool", Per: "tool", Rate: "1/s"}}},
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
	logs := &testkit.LogBuffer{}
	c, err := New(cfg, Deps{
		Aggregator: aggregatorv1.NewAggregatorServiceClient(aggConn), Indexer: indexerv1.NewIndexerServiceClient(idxConn),
		RateLimits: rl, OIDC: login, Log: slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	mux.Handle("/console/", c.Handler())
	// Once the console watches, an approval: alpha/time at cccc.
	testkit.Eventually(t, "the console's watches open", 10*time.Second, func() bool { return agg.Watchers() == 1 && idx.DefinitionWatchers() == 1 })
	idx.SendToolDefinitions(&indexerv1.WatchToolDefinitionsResponse{Approvals: []*indexerv1.ToolDefinitionDigest{{Backend: "alpha", Tool: "time", Digest: "cccc"}}})
	return &testConsole{Console: c, srv: srv, agg: agg, idx: idx, tasks: tasks, log: logs}
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
