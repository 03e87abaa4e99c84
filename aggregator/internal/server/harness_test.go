package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/codemode"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/engine"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/peer"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/server"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/traffic"
	"github.com/switchboard-mcp/switchboard/services/apierr"
	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/demobackend"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/svcauth"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestMain(m *testing.M) {
	// The test binary is code mode's runner, as the aggregator's is.
	if len(os.Args) > 1 && os.Args[1] == codemode.RunnerFlag {
		os.Exit(codemode.RunnerMain(os.Args[2:]))
	}
	if os.Getenv(stubbornStdioEnv) != "" {
		serveStubbornStdio()
	}
	// Production installs this in lifecycle.Main; the backend transport uses
	// the global propagator to forward W3C trace context.
	otel.SetTextMapPropagator(propagation.TraceContext{})
	os.Exit(m.Run())
}

// stubbornStdioEnv makes the test binary a stdio server (the demo
// backend's) that, as many Node servers, neither exits when its stdin
// ends nor on SIGTERM: stopping it takes the bridge its whole grace.
const stubbornStdioEnv = "SWITCHBOARD_SERVER_TEST_STUBBORN_STDIO"

func serveStubbornStdio() {
	signal.Ignore(syscall.SIGTERM)
	b, err := demobackend.New(demobackend.DefaultSpec(), demobackend.Options{Name: "stubborn"})
	if err != nil {
		panic(err)
	}
	_ = b.ServeStdio(context.Background())
	select {}
}

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// Service tokens: the gateway asserts principals, the internal client acts
// as itself.
const (
	gatewayToken  = "gateway-test-token"
	internalToken = "internal-test-token"
	operatorToken = "operator-test-token"
	indexerToken  = "indexer-test-token"
	// aggregatorToken is the peers' (aggregator.peers.token).
	aggregatorToken = "aggregator-test-token"
	// coderToken may run code mode's programs and call nothing else.
	coderToken = "coder-test-token"
)

// testBackend is a real go-sdk MCP server on a real HTTP listener.
type testBackend struct {
	name   string
	server *mcp.Server
	http   *httptest.Server
	// down makes the HTTP handler answer 503, as a crashed backend behind a
	// proxy would.
	down atomic.Bool
	// hangLists makes tools/list wait until release, as a stuck backend's.
	hangLists atomic.Bool
	// release unblocks tools that wait forever.
	release  chan struct{}
	stateful bool
	handler  atomic.Pointer[mcp.StreamableHTTPHandler]
	// wrap, if set, wraps every response writer (to alter the wire).
	wrap atomic.Pointer[func(http.ResponseWriter) http.ResponseWriter]

	mu       sync.Mutex
	requests []*http.Request // headers of every request seen
	conns    int             // TCP connections accepted
	methods  map[string]int  // MCP requests received, by method
}

type backendOptions struct {
	stateful bool // Legacy-only (sessions); otherwise stateless Modern
	tools    []string
	extra    func(*testBackend)
	pageSize int
	// subscribe advertises resources.subscribe (and accepts every
	// subscription).
	subscribe bool
	// capabilities, if set, are advertised (go-sdk infers the rest).
	capabilities *mcp.ServerCapabilities
}

func newTestBackend(t testing.TB, name string, o backendOptions) *testBackend {
	t.Helper()
	b := &testBackend{name: name, release: make(chan struct{}), methods: map[string]int{}}
	opts := &mcp.ServerOptions{
		Logger:   quietLog,
		PageSize: o.pageSize,
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{name + ":" + req.Params.Ref.Name + req.Params.Ref.URI + ":" + req.Params.Argument.Value}}}, nil
		},
	}
	opts.Capabilities = o.capabilities
	if o.subscribe {
		opts.SubscribeHandler = func(context.Context, *mcp.SubscribeRequest) error { return nil }
		opts.UnsubscribeHandler = func(context.Context, *mcp.UnsubscribeRequest) error { return nil }
	}
	b.server = mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, opts)
	for _, tool := range o.tools {
		b.addEchoTool(tool)
	}
	b.server.AddTool(&mcp.Tool{Name: "fail", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: name + " tool failed"}}}, nil
	})
	b.server.AddTool(&mcp.Tool{Name: "hang", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-ctx.Done():
		case <-b.release:
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "released"}}}, nil
	})
	if o.extra != nil {
		o.extra(b)
	}
	b.server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			b.mu.Lock()
			b.methods[method]++
			b.mu.Unlock()
			if method == "tools/list" && b.hangLists.Load() {
				select {
				case <-ctx.Done():
				case <-b.release:
				}
			}
			return next(ctx, method, req)
		}
	})
	b.stateful = o.stateful
	b.restart()
	b.http = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.requests = append(b.requests, r.Clone(context.Background()))
		b.mu.Unlock()
		if b.down.Load() {
			http.Error(w, "backend down", http.StatusServiceUnavailable)
			return
		}
		if wrap := b.wrap.Load(); wrap != nil {
			w = (*wrap)(w)
		}
		b.handler.Load().ServeHTTP(w, r)
	}))
	b.http.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			b.mu.Lock()
			b.conns++
			b.mu.Unlock()
		}
	}
	b.http.Start()
	t.Cleanup(b.http.Close)
	t.Cleanup(func() { close(b.release) })
	return b
}

func (b *testBackend) url() string { return b.http.URL }

// restart replaces the HTTP handler, as a restarted backend process would:
// Legacy sessions opened before are unknown afterwards.
func (b *testBackend) restart() {
	b.handler.Store(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return b.server }, &mcp.StreamableHTTPOptions{
		Stateless: !b.stateful,
		Logger:    quietLog,
		// A Modern request is cancelled by closing its stream (the demo
		// backend does the same); go-sdk's default lets the handler run on.
		PropagateRequestCancellation: true,
	}))
}

// withWhoami adds a tool that fails with a protocol error quoting the
// caller's credential, as careless servers do: the aggregator must keep it
// out of what it reports and logs.
func withWhoami(b *testBackend) {
	b.server.AddTool(&mcp.Tool{Name: "whoami", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, fmt.Errorf("credential %q not accepted", req.Extra.Header.Get("Authorization"))
	})
}

func (b *testBackend) addEchoTool(tool string) {
	b.server.AddTool(&mcp.Tool{Name: tool, Description: "echo from " + b.name, InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s/%s %s", b.name, req.Params.Name, req.Params.Arguments)}}}, nil
		})
}

// seen returns the requests whose header name has a value.
func (b *testBackend) headerValues(name string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, r := range b.requests {
		if v := r.Header.Get(name); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// received is how many requests of method the backend received.
func (b *testBackend) received(method string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.methods[method]
}

func (b *testBackend) connections() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.conns
}

// harness is an aggregator served over real gRPC with service-token auth.
type harness struct {
	engine   *engine.Engine
	gateway  aggregatorv1.AggregatorServiceClient // trusted: asserts principals
	internal aggregatorv1.AggregatorServiceClient // untrusted: acts as itself
	operator aggregatorv1.AggregatorServiceClient // an operator's: sees URLs, errors and conflicts
	indexer  aggregatorv1.AggregatorServiceClient // the indexer's: views only (config.IndexerMethods)
	coder    aggregatorv1.AggregatorServiceClient // allowed RunCode, not CallTool
	anon     aggregatorv1.AggregatorServiceClient // no credentials
	// audit is the trail of the configuration's audit section; nil: off.
	audit *audit.Writer
}

func startAggregator(t testing.TB, cfg config.Aggregator) *harness {
	t.Helper()
	h, err := tryStartAggregator(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func tryStartAggregator(t testing.TB, cfg config.Aggregator) (*harness, error) {
	return startAggregatorLogging(t, cfg, quietLog)
}

func startAggregatorLogging(t testing.TB, cfg config.Aggregator, log *slog.Logger) (*harness, error) {
	return startAggregatorWith(t, &config.Config{Aggregator: cfg}, log)
}

// startAggregatorWith starts an aggregator of a whole configuration (its
// aggregator section and its virtual servers); tune, if any, sets engine
// options the configuration does not (metrics).
func startAggregatorWith(t testing.TB, full *config.Config, log *slog.Logger, tune ...func(*engine.Options)) (*harness, error) {
	t.Helper()
	if err := full.ValidateServers(); err != nil {
		return nil, err
	}
	opts, err := engine.OptionsFromConfig(full.Aggregator.WithDefaults())
	if err != nil {
		return nil, err
	}
	opts.Log = log
	opts.Servers = full.Servers
	// With aggregator.peers, the replica serves at aggregator.listen, the
	// address its held calls name (held_forward.go); the peers' token must
	// be one of the credentials below.
	listen := "127.0.0.1:0"
	if full.Aggregator.Peers.Enabled() {
		listen, opts.HeldOwner = full.Aggregator.Listen, full.Aggregator.Listen
	}
	for _, f := range tune {
		f(&opts)
	}
	recorder := traffic.New()
	opts.Traffic = recorder
	e, err := engine.New(opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := e.Start(ctx); err != nil {
		cancel()
		return nil, err
	}
	auth := svcauth.NewAuthenticator([]config.ServiceCredential{
		{Name: "gateway", Token: gatewayToken, AssertPrincipals: true, Allow: []string{"switchboard.aggregator.v1.AggregatorService/*"}},
		{Name: "internal", Token: internalToken, Subject: "svc-reporter", Groups: []string{"ops"}, Allow: []string{"switchboard.aggregator.v1.AggregatorService/*"}},
		{Name: "operator", Token: operatorToken, AssertPrincipals: true, Operator: true, Allow: []string{"switchboard.aggregator.v1.AggregatorService/*"}},
		{Name: "indexer", Token: indexerToken, AssertPrincipals: true, Allow: config.IndexerMethods},
		{Name: "aggregator", Token: aggregatorToken, AssertPrincipals: true, Allow: config.AggregatorMethods},
		{Name: "coder", Token: coderToken, AssertPrincipals: true, Allow: []string{aggregatorv1.AggregatorService_RunCode_FullMethodName[1:]}},
	})
	srv, err := rpc.NewServer(auth, config.TLS{}, log)
	if err != nil {
		cancel()
		return nil, err
	}
	// The audit section starts the trail (audit_test.go, the benchmarks
	// with the trail on).
	trail, err := audit.New(audit.Options{Service: "aggregator", Config: full.Audit, Log: log})
	if err != nil {
		cancel()
		return nil, err
	}
	peers := peer.New(opts.HeldOwner, full.Aggregator.Peers, config.TLS{}, log)
	t.Cleanup(peers.Close)
	api := server.New(e).WithPeers(peers).WithLimiter(testLimiter(t, full.RateLimits)).WithAudit(trail).WithTraffic(recorder, "test-replica")
	if full.Aggregator.CodeMode.Enabled {
		api.WithCodeMode(full.Aggregator.CodeMode.WithDefaults(), []string{os.Args[0], codemode.RunnerFlag}, full.CodeModeIn)
		t.Cleanup(api.CloseCodeMode)
	}
	if full.Aggregator.Tasks != (config.Tasks{}) {
		// Tasks without a store: only what is refused before the store
		// is asked can be tested here (test/e2e has the store).
		api.WithTasks(nil, full.Aggregator.Tasks.WithDefaults(), "test-replica")
	}
	aggregatorv1.RegisterAggregatorServiceServer(srv, api)
	srv.SetServing()
	lis, err := net.Listen("tcp", listen)
	if err != nil {
		cancel()
		return nil, err
	}
	var wg sync.WaitGroup
	wg.Go(func() { e.Run(ctx) })
	wg.Go(func() { _ = srv.ServeListener(ctx, lis, time.Second) })
	t.Cleanup(func() { cancel(); wg.Wait(); trail.Close() })

	dial := func(token string) aggregatorv1.AggregatorServiceClient {
		conn, err := rpc.Dial(config.Endpoint{Address: lis.Addr().String(), Token: token}, config.TLS{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return aggregatorv1.NewAggregatorServiceClient(conn)
	}
	return &harness{engine: e, gateway: dial(gatewayToken), internal: dial(internalToken), operator: dial(operatorToken), indexer: dial(indexerToken), coder: dial(coderToken), anon: dial(""), audit: trail}, nil
}

func principal(subject string, groups ...string) *commonv1.Principal {
	return &commonv1.Principal{Subject: subject, Groups: groups}
}

// listToolNames walks every page of p's tools.
func listToolNames(t *testing.T, c aggregatorv1.AggregatorServiceClient, p *commonv1.Principal, pageSize uint32) []string {
	t.Helper()
	var names []string
	cursor := ""
	for range 10000 {
		resp, err := c.ListTools(context.Background(), &aggregatorv1.ListToolsRequest{Principal: p, Cursor: cursor, PageSize: pageSize})
		if err != nil {
			t.Fatalf("ListTools: %v", err)
		}
		for _, tool := range resp.GetTools() {
			names = append(names, tool.GetName())
		}
		if resp.GetNextCursor() == "" {
			return names
		}
		cursor = resp.GetNextCursor()
	}
	t.Fatal("ListTools paging does not end")
	return nil
}

// wantStatus checks a gRPC error's code and reason.
func wantStatus(t *testing.T, err error, code codes.Code, reason commonv1.ErrorReason) {
	t.Helper()
	if status.Code(err) != code || apierr.Reason(err) != reason {
		t.Fatalf("err = %v (reason %v), want %v with reason %v", err, apierr.Reason(err), code, reason)
	}
}

func resultText(t *testing.T, resultJSON string) string {
	t.Helper()
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal([]byte(resultJSON), &res); err != nil || len(res.Content) == 0 {
		t.Fatalf("result %s: %v", resultJSON, err)
	}
	return res.Content[0].Text
}

func writeFile(t testing.TB, name, content string) string {
	t.Helper()
	path := t.TempDir() + "/" + name
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startAggregatorFile starts an aggregator of the configuration file whose
// text is yaml (every section: servers, limits and audit included),
// logging nowhere.
func startAggregatorFile(t testing.TB, yaml string) *harness {
	t.Helper()
	full, err := config.Load(writeFile(t, "switchboard.yaml", yaml))
	if err != nil {
		t.Fatal(err)
	}
	h, err := startAggregatorWith(t, full, quietLog)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// startBeforeLegacy starts an aggregator in front of legacy, a backend
// named legacy that speaks 2025-11-25, with keys (", timeout: 5s") added
// to its entry.
func startBeforeLegacy(t testing.TB, legacy *testBackend, keys string) *harness {
	return startAggregator(t, parseConfig(t, `
aggregator:
  catalogTTL: 1h
  backends:
    - {name: legacy, url: `+legacy.url()+`, protocol: "2025-11-25"`+keys+`}
`))
}
