package edge

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// callToolStream is the fake aggregator's CallToolStream: for what the
// request context asks, two progress notifications carrying the caller's
// token and a warning log message, then CallTool's result.
func (b *backends) callToolStream(req *aggregatorv1.CallToolStreamRequest, stream aggregatorv1.AggregatorService_CallToolStreamServer) error {
	rc := req.GetCall().GetContext()
	b.mu.Lock()
	b.streamed = append(b.streamed, rc)
	b.mu.Unlock()
	send := func(method, params string) error {
		return stream.Send(&aggregatorv1.CallToolStreamResponse{Event: &aggregatorv1.CallToolStreamResponse_Notification{
			Notification: &aggregatorv1.Notification{Method: method, ParamsJson: params}}})
	}
	if tok := rc.GetProgressTokenJson(); tok != "" {
		for i := 1; i <= 2; i++ {
			if err := send("notifications/progress", fmt.Sprintf(`{"progressToken":%s,"progress":%d,"total":2}`, tok, i)); err != nil {
				return err
			}
		}
	}
	if level := rc.GetLogLevel(); level != "" {
		if err := send("notifications/message", `{"level":"warning","data":"at least `+level+`"}`); err != nil {
			return err
		}
	}
	res, err := b.agg.CallTool(stream.Context(), req.GetCall())
	if err != nil {
		return err
	}
	return stream.Send(&aggregatorv1.CallToolStreamResponse{Event: &aggregatorv1.CallToolStreamResponse_Result{Result: res}})
}

func (b *backends) streamedContexts() []*aggregatorv1.RequestContext {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*aggregatorv1.RequestContext(nil), b.streamed...)
}

// notes collects what a go-sdk client's notification handlers receive.
type notes struct {
	mu  sync.Mutex
	got []string
}

func (n *notes) add(s string) {
	n.mu.Lock()
	n.got = append(n.got, s)
	n.mu.Unlock()
}

func (n *notes) list() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.got...)
}

func (n *notes) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			n.add(fmt.Sprintf("progress %v %g/%g", r.Params.ProgressToken, r.Params.Progress, r.Params.Total))
		},
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			n.add(fmt.Sprintf("log %s %v", r.Params.Level, r.Params.Data))
		},
	}
}

func waitNotes(t *testing.T, n *notes, want ...string) {
	t.Helper()
	testkit.Eventually(t, fmt.Sprintf("notifications %q", want), 10*time.Second, func() bool { return len(n.list()) >= len(want) })
	if got := n.list(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("notifications %q, want %q", got, want)
	}
}

// Real go-sdk clients of both eras receive their call's progress and log
// notifications through the gateway: Modern asks per request (progressToken,
// _meta logLevel), Legacy with its progressToken and logging/setLevel.
func TestCallNotificationsReachSDKClients(t *testing.T) {
	b := startBackends(t)
	_, srv := startGateway(t, b, testGatewayConfig(b))
	ctx := context.Background()

	t.Run("modern", func(t *testing.T) {
		n := &notes{}
		cs := connect(t, ctx, srv.URL+"/mcp", "alice-key", "", n.options())
		params := &mcp.CallToolParams{Name: "alpha_echo", Arguments: map[string]any{"text": "hi"}}
		params.SetProgressToken("p-modern")
		params.Meta[mcpspec.MetaLogLevel] = "info"
		res, err := cs.CallTool(ctx, params)
		if err != nil || res.IsError {
			t.Fatalf("call: %v %v", res, err)
		}
		waitNotes(t, n, "progress p-modern 1/2", "progress p-modern 2/2", "log warning at least info")
		rc := b.streamedContexts()
		if last := rc[len(rc)-1]; last.GetLogLevel() != "info" || last.GetProgressTokenJson() != `"p-modern"` || last.GetClientCapabilitiesJson() == "" {
			t.Fatalf("request context %v", last)
		}

		// Without a log level no notifications/message may be sent: the
		// call streams progress only.
		n2 := &notes{}
		cs2 := connect(t, ctx, srv.URL+"/mcp", "alice-key", "", n2.options())
		params = &mcp.CallToolParams{Name: "alpha_echo", Arguments: map[string]any{"text": "hi"}}
		params.SetProgressToken(7)
		if _, err := cs2.CallTool(ctx, params); err != nil {
			t.Fatal(err)
		}
		waitNotes(t, n2, "progress 7 1/2", "progress 7 2/2")
		if rc := b.streamedContexts(); rc[len(rc)-1].GetLogLevel() != "" {
			t.Fatalf("log level sent without one in _meta: %v", rc[len(rc)-1])
		}

		// A call that asks for nothing is not streamed.
		before := len(b.streamedContexts())
		if _, err := cs2.CallTool(ctx, &mcp.CallToolParams{Name: "alpha_echo", Arguments: map[string]any{"text": "hi"}}); err != nil {
			t.Fatal(err)
		}
		if after := len(b.streamedContexts()); after != before {
			t.Fatalf("a call without progressToken or logLevel was streamed")
		}
	})

	t.Run("legacy", func(t *testing.T) {
		n := &notes{}
		cs := connect(t, ctx, srv.URL+"/mcp", "alice-key", mcpspec.Legacy, n.options())
		params := &mcp.CallToolParams{Name: "alpha_echo", Arguments: map[string]any{"text": "hi"}}
		params.SetProgressToken("p-legacy")
		if _, err := cs.CallTool(ctx, params); err != nil {
			t.Fatal(err)
		}
		waitNotes(t, n, "progress p-legacy 1/2", "progress p-legacy 2/2")

		if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "notice"}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha_echo", Arguments: map[string]any{"text": "hi"}}); err != nil {
			t.Fatal(err)
		}
		waitNotes(t, n, "progress p-legacy 1/2", "progress p-legacy 2/2", "log warning at least notice")

		if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "loud"}); err == nil {
			t.Fatal("logging/setLevel accepted an unknown level")
		}
	})
}

// startReportBackend serves a go-sdk backend (Legacy-only when stateful)
// whose report tool sends two progress notifications and logs at debug and
// warning, all tagged with its "who" argument.
func startReportBackend(t *testing.T, stateful bool) string {
	server := mcp.NewServer(&mcp.Implementation{Name: "reporter", Version: "1"}, nil)
	type args struct {
		Who string `json:"who"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "report"}, func(ctx context.Context, req *mcp.CallToolRequest, in args) (*mcp.CallToolResult, any, error) {
		if tok := req.Params.GetProgressToken(); tok != nil {
			for i := 1; i <= 2; i++ {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 2, Message: in.Who})
			}
		}
		_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "debug", Data: in.Who})
		_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Data: in.Who})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done " + in.Who}}}, nil, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: !stateful}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Real go-sdk clients of both eras, through the gateway and a real
// aggregator process, each receive exactly their own call's progress and
// log notifications from Modern and Legacy backends, while other clients
// call the same tools at the same time.
func TestCallNotificationsEndToEnd(t *testing.T) {
	_, srv := startGatewayOverAggregator(t, `
    - name: modern
      url: `+startReportBackend(t, false)+`
      timeout: 10s
    - name: legacy
      url: `+startReportBackend(t, true)+`
      protocol: "2025-11-25"
      timeout: 10s
`)
	ctx := context.Background()
	var wg sync.WaitGroup
	for _, era := range eras {
		for _, tool := range []string{"modern_report", "legacy_report"} {
			for i := range 3 {
				wg.Go(func() {
					who := fmt.Sprintf("%s-%s-%d", era.name, tool, i)
					n := &notes{}
					cs := connect(t, ctx, srv.URL+"/mcp", "alice-key", era.version, n.options())
					params := &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"who": who}}
					params.SetProgressToken(who)
					if era.version == "" {
						params.Meta[mcpspec.MetaLogLevel] = "info"
					} else if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
						t.Error(err)
						return
					}
					res, err := cs.CallTool(ctx, params)
					if err != nil {
						t.Error(err)
						return
					}
					if got := toolText(t, res); got != "done "+who {
						t.Errorf("result %q", got)
					}
					want := []string{"progress " + who + " 1/2", "progress " + who + " 2/2", "log warning " + who}
					// The SDK client may run its handlers after CallTool
					// returned; poll (from this goroutine, so no t.Fatal).
					tick := time.NewTicker(5 * time.Millisecond)
					defer tick.Stop()
					deadline := time.After(10 * time.Second)
				wait:
					for len(n.list()) < len(want) {
						select {
						case <-tick.C:
						case <-deadline:
							break wait
						}
					}
					if got := n.list(); fmt.Sprint(got) != fmt.Sprint(want) {
						t.Errorf("%s: notifications %q, want %q", who, got, want)
					}
				})
			}
		}
	}
	wg.Wait()
}
