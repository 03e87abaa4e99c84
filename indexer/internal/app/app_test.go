package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/lifecycle"
	"github.com/switchboard-mcp/switchboard/services/pgcluster"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
	"github.com/switchboard-mcp/switchboard/services/testkit"

	"github.com/switchboard-mcp/switchboard/indexer/internal/app"
	"github.com/switchboard-mcp/switchboard/indexer/internal/storetest/pgtest"
)

var env *pgtest.Env

func TestMain(m *testing.M) { pgtest.Main(m, &env) }

const gatewayToken = "gateway-test-token"

// fakeAggregatorToken is the indexer's credential at the fake aggregator.
const fakeAggregatorToken = "fake-aggregator-token"

// logBuffer collects the indexer's log lines.
type logBuffer struct{ testkit.LogBuffer }

// count is how many times s was logged.
func (b *logBuffer) count(s string) int { return strings.Count(b.String(), s) }

type harness struct {
	addr     string
	httpAddr string
	// The aggregator is served apart so that a test can restart it.
	aggAddr string
	aggSrv  *testkit.Server
	agg     *testkit.FakeAggregator
	client  indexerv1.IndexerServiceClient
	health  healthpb.HealthClient
	logs    *logBuffer
	// rateLimits is the configuration's rateLimits section.
	rateLimits config.RateLimits
}

func listen(t testing.TB) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return lis
}

// start runs the fake aggregator and the indexer (through app.Run, as the
// binary does) against databaseURL.
func start(t testing.TB, databaseURL string, configure ...func(*config.Config)) *harness {
	t.Helper()
	return startLimited(t, databaseURL, config.RateLimits{}, configure...)
}

// startLimited is start with rate limits.
func startLimited(t testing.TB, databaseURL string, limits config.RateLimits, configure ...func(*config.Config)) *harness {
	t.Helper()
	h := &harness{agg: &testkit.FakeAggregator{}, rateLimits: limits}
	h.aggSrv = testkit.Serve(t, []config.ServiceCredential{{Name: "indexer", Token: fakeAggregatorToken, AssertPrincipals: true, Allow: config.IndexerMethods}}, h.agg.Register)
	h.aggAddr = h.aggSrv.Addr
	h.startIndexer(t, databaseURL, configure...)
	return h
}

// replica starts another indexer on the same database and aggregator.
func (h *harness) replica(t testing.TB, databaseURL string) *harness {
	t.Helper()
	r := &harness{agg: h.agg, aggAddr: h.aggAddr, rateLimits: h.rateLimits}
	r.startIndexer(t, databaseURL)
	return r
}

// startIndexer runs the indexer through app.Run, as the binary does.
func (h *harness) startIndexer(t testing.TB, databaseURL string, configure ...func(*config.Config)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h.logs = &logBuffer{}
	idxLis, httpLis := listen(t), listen(t)
	h.httpAddr = httpLis.Addr().String()
	cfg := &config.Config{
		ServiceAuth: config.ServiceAuth{Credentials: []config.ServiceCredential{
			{Name: "gateway", Token: gatewayToken, AssertPrincipals: true, Allow: []string{"switchboard.indexer.v1.IndexerService/*"}},
			{Name: "aggregator", Token: aggregatorToken, AssertPrincipals: true, Allow: config.AggregatorMethods},
			// An operator that opens the gateways' streams (past their
			// per-caller bounds) asserts principals, as the console's does:
			// they reach every principal's sessions.
			{Name: "operator", Token: operatorToken, Operator: true, AssertPrincipals: true, Allow: []string{"switchboard.indexer.v1.IndexerService/*"}},
			{Name: "console", Token: consoleToken, Operator: true, AssertPrincipals: true, Allow: config.ConsoleMethods},
		}},
		Indexer: config.Indexer{
			Database:   databaseURL,
			Aggregator: config.Endpoint{Address: h.aggAddr, Token: fakeAggregatorToken},
			ScopeTTL:   config.Duration(time.Hour), // invalidation must come from the watch
		},
		RateLimits: h.rateLimits,
	}
	for _, c := range configure {
		c(cfg)
	}
	log := slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	runErr := make(chan error, 1)
	go func() { runErr <- app.Run(ctx, cfg, log, app.Listeners{GRPC: idxLis, HTTP: httpLis}) }()
	conn, err := grpc.NewClient(idxLis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(svcauth.TokenCredentials{Token: gatewayToken}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		cancel()
		if err := <-runErr; err != nil {
			t.Errorf("app.Run: %v", err)
		}
		if t.Failed() {
			t.Logf("indexer log:\n%s", h.logs.String())
		}
	})
	h.addr = idxLis.Addr().String()
	h.client = indexerv1.NewIndexerServiceClient(conn)
	h.health = healthpb.NewHealthClient(conn)
}

// writeConfig writes the configuration file at path whole, under another
// name renamed over it, so that a watch never reads half of it.
func writeConfig(t *testing.T, path, raw string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// startWatching runs the indexer through app.RunEnv on the configuration
// file at path, which it watches and reloads as the binary does. The
// harness has no client: a test makes one with the token it calls with
// (as).
func startWatching(t *testing.T, path string) *harness {
	t.Helper()
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{logs: &logBuffer{}}
	lis := listen(t)
	h.addr = lis.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() {
		runErr <- app.RunEnv(ctx, lifecycle.Env{Config: cfg, Log: slog.New(slog.NewTextHandler(h.logs, nil)), ConfigPath: path}, app.Listeners{GRPC: lis})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-runErr; err != nil {
			t.Errorf("app.RunEnv: %v", err)
		}
		if t.Failed() {
			t.Logf("indexer log:\n%s", h.logs.String())
		}
	})
	return h
}

// get fetches path from the indexer's HTTP port.
func (h *harness) get(t testing.TB, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + h.httpAddr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(body)
}

func (h *harness) serving(t testing.TB) healthpb.HealthCheckResponse_ServingStatus {
	resp, err := h.health.Check(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil {
		return healthpb.HealthCheckResponse_UNKNOWN
	}
	return resp.GetStatus()
}

func (h *harness) waitServing(t testing.TB) {
	t.Helper()
	testkit.Eventually(t, "health SERVING", 30*time.Second, func() bool { return h.serving(t) == healthpb.HealthCheckResponse_SERVING })
}

func (h *harness) search(t *testing.T, subject, query string, limit uint32) (*indexerv1.SearchResponse, error) {
	return h.client.Search(t.Context(), &indexerv1.SearchRequest{
		Principal: &commonv1.Principal{Subject: subject}, Query: query, Limit: limit,
	})
}

func hitNames(resp *indexerv1.SearchResponse) []string {
	var out []string
	for _, hit := range resp.GetHits() {
		out = append(out, hit.GetName())
	}
	slices.Sort(out)
	return out
}

// tools returns n tools named prefix_0.. that all match the query "report".
func tools(names ...string) []*aggregatorv1.Tool {
	var out []*aggregatorv1.Tool
	for _, n := range names {
		out = append(out, &aggregatorv1.Tool{
			Name:            n,
			Description:     "Produce the " + strings.ReplaceAll(n, "_", " ") + " report.",
			InputSchemaJson: `{"type":"object","properties":{"period":{"type":"string","description":"Reporting period"}}}`,
		})
	}
	return out
}

func wantReason(t *testing.T, err error, code codes.Code, reason commonv1.ErrorReason) {
	t.Helper()
	if status.Code(err) != code || apierr.Reason(err) != reason {
		t.Fatalf("error %v: want %s / %s", err, code, reason)
	}
}

// The indexer reports SERVING only after its migrations ran against real
// PostgreSQL; while the database is unreachable it keeps retrying and
// stays NOT_SERVING. Once serving, a database outage turns searches into
// UNAVAILABLE / INDEX_UNAVAILABLE, and they recover without a restart.
func TestHealthFollowsMigrationsAndRecoversFromOutage(t *testing.T) {
	ctx := t.Context()
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Stop() })
	if err := cluster.CreateDatabase(ctx, "indexer"); err != nil {
		t.Fatal(err)
	}
	if err := cluster.StopServer(ctx); err != nil {
		t.Fatal(err)
	}

	h := start(t, cluster.URL("indexer"))
	h.agg.SetTools(tools("sales_summary", "cost_breakdown"))
	testkit.Eventually(t, "two failed migration attempts", 30*time.Second, func() bool { return h.logs.count("retrying migrations") >= 2 })
	if got := h.serving(t); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health before migrations: %s, want NOT_SERVING", got)
	}
	_, err = h.search(t, "alice", "sales report", 0)
	wantReason(t, err, codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_NOT_READY)
	if code, _ := h.get(t, "/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz before migrations: %d", code)
	}
	if code, body := h.get(t, "/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}

	if err := cluster.StartServer(ctx); err != nil {
		t.Fatal(err)
	}
	h.waitServing(t)
	if h.logs.count("schema migrated") != 1 {
		t.Fatalf("want one successful migration run in the log")
	}
	resp, err := h.search(t, "alice", "sales summary report", 0)
	if err != nil || len(resp.GetHits()) == 0 || resp.GetHits()[0].GetName() != "sales_summary" {
		t.Fatalf("search after migrations: %v, %v", resp, err)
	}
	if code, _ := h.get(t, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz after migrations: %d", code)
	}
	_, metrics := h.get(t, "/metrics")
	for _, want := range []string{"switchboard_indexer_ready 1", `switchboard_indexer_search_seconds_count{outcome="ok"} 1`,
		`switchboard_indexer_search_seconds_count{outcome="Unavailable"} 1`, "switchboard_indexer_scope_builds_total 1"} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("/metrics lacks %q:\n%s", want, metrics)
		}
	}

	// carol shares alice's view, so her first search finds its scope.
	if resp, err := h.search(t, "carol", "sales summary report", 0); err != nil || len(resp.GetHits()) == 0 {
		t.Fatalf("carol's search: %v, %v", resp, err)
	}

	if err := cluster.StopServer(ctx); err != nil {
		t.Fatal(err)
	}
	// What the indexer holds already (alice's scope, these words) it
	// still answers from memory.
	resp, err = h.search(t, "alice", "sales summary report", 0)
	if err != nil || len(resp.GetHits()) == 0 || resp.GetHits()[0].GetName() != "sales_summary" {
		t.Fatalf("search held in memory, database down: %v, %v", resp, err)
	}
	// A catalog change drops every principal's mapping. carol's view
	// changed, so her next search needs the database (that it fails shows
	// the change has arrived); alice's did not, and her scope is found
	// again in memory by its digest.
	h.agg.SetView("carol", []string{"sales_summary"})
	testkit.Eventually(t, "the catalog change to reach the indexer", 30*time.Second, func() bool {
		_, err := h.search(t, "carol", "sales summary report", 0)
		return status.Code(err) == codes.Unavailable
	})
	resp, err = h.search(t, "alice", "sales summary report", 0)
	if err != nil || len(resp.GetHits()) == 0 || resp.GetHits()[0].GetName() != "sales_summary" {
		t.Fatalf("search of an unchanged view after a catalog change, database down: %v, %v", resp, err)
	}
	// Words it has not seen need the database to be stemmed, and a new
	// principal's view needs it to find or build its scope.
	_, err = h.search(t, "alice", "quarterly cost breakdown", 0)
	wantReason(t, err, codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_INDEX_UNAVAILABLE)
	if !strings.Contains(status.Convert(err).Message(), "database") {
		t.Fatalf("message does not say what is wrong: %q", status.Convert(err).Message())
	}
	// bob's view is alice's, so it is found in memory too; once it is a
	// view of its own, it needs the database.
	if resp, err := h.search(t, "bob", "sales summary report", 0); err != nil || len(resp.GetHits()) == 0 {
		t.Fatalf("a new principal with a known view, database down: %v, %v", resp, err)
	}
	h.agg.SetView("bob", []string{"cost_breakdown"})
	testkit.Eventually(t, "bob's own view to need the database", 30*time.Second, func() bool {
		_, err := h.search(t, "bob", "sales summary report", 0)
		return status.Code(err) == codes.Unavailable
	})
	_, err = h.search(t, "bob", "sales summary report", 0)
	wantReason(t, err, codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_INDEX_UNAVAILABLE)

	if err := cluster.StartServer(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "search to recover", 30*time.Second, func() bool {
		resp, err := h.search(t, "alice", "quarterly cost breakdown", 0)
		return err == nil && len(resp.GetHits()) > 0 && resp.GetHits()[0].GetName() == "cost_breakdown"
	})
}

// Two principals with overlapping views each find only their own tools,
// also after a policy change, which reaches the indexer through the
// aggregator's WatchCatalog stream (the scope TTL is an hour here).
func TestPrincipalsSeeOnlyTheirViews(t *testing.T) {
	h := start(t, env.NewDatabase(t))
	h.agg.SetTools(tools("alpha_sales", "shared_sales", "shared_costs", "beta_costs", "gamma_hidden"))
	h.agg.SetView("alice", []string{"alpha_sales", "shared_sales", "shared_costs"})
	h.agg.SetView("bob", []string{"shared_sales", "shared_costs", "beta_costs"})
	h.waitServing(t)

	check := func(subject string, want []string) {
		t.Helper()
		resp, err := h.search(t, subject, "report on sales and costs alpha beta gamma hidden shared", 50)
		if err != nil {
			t.Fatalf("%s: %v", subject, err)
		}
		if got := hitNames(resp); !slices.Equal(got, want) {
			t.Fatalf("%s found %v, want exactly %v", subject, got, want)
		}
		if int(resp.GetScopeSize()) != len(want) || resp.GetBaselineTokens() == 0 {
			t.Fatalf("%s: scope size %d, baseline %d", subject, resp.GetScopeSize(), resp.GetBaselineTokens())
		}
	}
	check("alice", []string{"alpha_sales", "shared_costs", "shared_sales"})
	check("bob", []string{"beta_costs", "shared_costs", "shared_sales"})

	// Policy change: alice loses shared_sales and gains gamma_hidden.
	h.agg.SetView("alice", []string{"alpha_sales", "shared_costs", "gamma_hidden"})
	testkit.Eventually(t, "alice's new view", 30*time.Second, func() bool {
		resp, err := h.search(t, "alice", "report on sales and costs alpha beta gamma hidden shared", 50)
		if err != nil {
			return false
		}
		got := hitNames(resp)
		// Whatever the moment, alice sees her old view or her new one,
		// never a mix and never bob's tools.
		if !slices.Equal(got, []string{"alpha_sales", "shared_costs", "shared_sales"}) &&
			!slices.Equal(got, []string{"alpha_sales", "gamma_hidden", "shared_costs"}) {
			t.Fatalf("alice saw %v during the change", got)
		}
		return slices.Contains(got, "gamma_hidden")
	})
	check("alice", []string{"alpha_sales", "gamma_hidden", "shared_costs"})
	check("bob", []string{"beta_costs", "shared_costs", "shared_sales"})
}

// Concurrent first searches of one view build its scope once, even across
// principals whose views are identical.
func TestConcurrentFirstSearchesBuildOnce(t *testing.T) {
	h := start(t, env.NewDatabase(t))
	h.agg.SetTools(tools("sales_summary", "cost_breakdown", "revenue_forecast"))
	h.agg.SetView("carol", []string{"sales_summary", "cost_breakdown"})
	h.agg.SetView("dave", []string{"sales_summary", "cost_breakdown"})
	h.waitServing(t)

	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		subject := []string{"carol", "dave"}[i%2]
		wg.Go(func() {
			resp, err := h.search(t, subject, "sales summary", 0)
			if err == nil && (len(resp.GetHits()) == 0 || resp.GetScopeSize() != 2) {
				err = fmt.Errorf("%s: %v", subject, resp)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	stats, err := h.client.Stats(t.Context(), &indexerv1.StatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if stats.GetScopeBuilds() != 1 || stats.GetScopes() != 1 || stats.GetDocuments() != 2 {
		t.Fatalf("stats %v: want 1 build, 1 scope, 2 documents", stats)
	}
	if calls := h.agg.Calls("ListTools"); calls != 1 {
		t.Fatalf("%d ListTools calls, want 1", calls)
	}
	// RefreshScope for a third principal with a new view builds it; a second
	// call finds it built.
	refresh := func() *indexerv1.RefreshScopeResponse {
		resp, err := h.client.RefreshScope(t.Context(), &indexerv1.RefreshScopeRequest{Principal: &commonv1.Principal{Subject: "erin"}})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if first, second := refresh(), refresh(); !first.GetBuilt() || second.GetBuilt() || first.GetScopeSize() != 3 {
		t.Fatalf("refresh: first %v, second %v", first, second)
	}
}

func TestRequestValidationLimitsAndSessions(t *testing.T) {
	h := start(t, env.NewDatabase(t))
	var names []string
	for i := range 60 {
		names = append(names, fmt.Sprintf("sales_report_%02d", i))
	}
	h.agg.SetTools(tools(names...))
	h.waitServing(t)

	for limit, want := range map[uint32]int{0: 8, 3: 3, 50: 50, 1000: 50} {
		resp, err := h.search(t, "alice", "sales report", limit)
		if err != nil || len(resp.GetHits()) != want {
			t.Fatalf("limit %d: %d hits (%v), want %d", limit, len(resp.GetHits()), err, want)
		}
	}
	_, err := h.search(t, "alice", "   ", 0)
	wantReason(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	_, err = h.search(t, "alice", strings.Repeat("sales ", 1000), 0)
	wantReason(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)

	// No service credential: Unauthenticated.
	anon, err := grpc.NewClient(h.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	_, err = indexerv1.NewIndexerServiceClient(anon).Search(t.Context(), &indexerv1.SearchRequest{Query: "sales"})
	wantReason(t, err, codes.Unauthenticated, commonv1.ErrorReason_ERROR_REASON_UNAUTHENTICATED)

	digest := strings.Repeat("ab", 32)
	check := func() bool {
		resp, err := h.client.CheckSession(t.Context(), &indexerv1.CheckSessionRequest{SessionDigest: digest})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetRevoked()
	}
	if check() {
		t.Fatal("session revoked before RevokeSession")
	}
	if _, err := h.client.RevokeSession(t.Context(), &indexerv1.RevokeSessionRequest{SessionDigest: digest, ExpiresAt: timestamppb.New(time.Now().Add(time.Hour))}); err != nil {
		t.Fatal(err)
	}
	if !check() {
		t.Fatal("session not revoked after RevokeSession")
	}
	_, err = h.client.RevokeSession(t.Context(), &indexerv1.RevokeSessionRequest{SessionDigest: "not-a-digest", ExpiresAt: timestamppb.Now()})
	wantReason(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	_, err = h.client.RevokeSession(t.Context(), &indexerv1.RevokeSessionRequest{SessionDigest: digest})
	wantReason(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
}

// The catalog watch reconnects after the aggregator restarts and keeps
// invalidating scopes from the new stream.
func TestWatchReconnectsAfterAggregatorRestart(t *testing.T) {
	h := start(t, env.NewDatabase(t))
	h.agg.SetTools(tools("alpha_sales", "beta_sales", "gamma_sales"))
	h.agg.SetView("alice", []string{"alpha_sales", "beta_sales"})
	h.waitServing(t)
	view := func() []string {
		resp, err := h.search(t, "alice", "sales report", 50)
		if err != nil {
			return nil
		}
		return hitNames(resp)
	}
	if got := view(); !slices.Equal(got, []string{"alpha_sales", "beta_sales"}) {
		t.Fatalf("initial view %v", got)
	}

	h.aggSrv.Stop()
	testkit.Eventually(t, "the watch to notice the restart", 30*time.Second, func() bool { return h.logs.count("catalog watch interrupted") > 0 })
	// Without the aggregator no view can be resolved: a clear, retryable
	// error, not an empty answer.
	_, err := h.search(t, "newcomer", "sales report", 0)
	wantReason(t, err, codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_NOT_READY)
	h.aggSrv.Start()
	// Cache alice's view again, then change it: only an event on the new
	// stream can invalidate it now (the scope TTL is an hour).
	testkit.Eventually(t, "search after the restart", 30*time.Second, func() bool { return slices.Equal(view(), []string{"alpha_sales", "beta_sales"}) })
	h.agg.SetView("alice", []string{"alpha_sales", "gamma_sales"})
	testkit.Eventually(t, "alice's new view", 30*time.Second, func() bool { return slices.Equal(view(), []string{"alpha_sales", "gamma_sales"}) })
}

// Replicas sharing one database build a view's scope once between them:
// the store's advisory lock makes the later builder find it built.
func TestReplicasBuildOnce(t *testing.T) {
	db := env.NewDatabase(t)
	a := start(t, db)
	b := a.replica(t, db)
	a.agg.SetTools(tools("sales_summary", "cost_breakdown", "revenue_forecast"))
	a.waitServing(t)
	b.waitServing(t)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		h := []*harness{a, b}[i%2]
		wg.Go(func() {
			resp, err := h.search(t, "carol", "sales summary", 0)
			if err == nil && resp.GetScopeSize() != 3 {
				err = fmt.Errorf("scope size %d", resp.GetScopeSize())
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	stats, err := b.client.Stats(t.Context(), &indexerv1.StatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if stats.GetScopeBuilds() != 1 || stats.GetScopes() != 1 {
		t.Fatalf("stats %v: want 1 build and 1 scope across both replicas", stats)
	}
}
