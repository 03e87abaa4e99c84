package edge

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
)

// CallToolStream of the fake aggregator: for what the request context asks,
// two progress notifications carrying the caller's token and a warning log
// message, then CallTool's result.
func (f *fakeAggregator) CallToolStream(req *aggregatorv1.CallToolStreamRequest, stream aggregatorv1.AggregatorService_CallToolStreamServer) error {
	rc := req.GetCall().GetContext()
	f.mu.Lock()
	f.streamed = append(f.streamed, rc)
	f.mu.Unlock()
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
	res, err := f.CallTool(stream.Context(), req.GetCall())
	if err != nil {
		return err
	}
	return stream.Send(&aggregatorv1.CallToolStreamResponse{Event: &aggregatorv1.CallToolStreamResponse_Result{Result: res}})
}

func (f *fakeAggregator) streamedContexts() []*aggregatorv1.RequestContext {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*aggregatorv1.RequestContext(nil), f.streamed...)
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
	eventually(t, fmt.Sprintf("notifications %q", want), func() bool { return len(n.list()) >= len(want) })
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
		params.Meta[metaLogLevel] = "info"
		res, err := cs.CallTool(ctx, params)
		if err != nil || res.IsError {
			t.Fatalf("call: %v %v", res, err)
		}
		waitNotes(t, n, "progress p-modern 1/2", "progress p-modern 2/2", "log warning at least info")
		rc := b.agg.streamedContexts()
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
		if rc := b.agg.streamedContexts(); rc[len(rc)-1].GetLogLevel() != "" {
			t.Fatalf("log level sent without one in _meta: %v", rc[len(rc)-1])
		}

		// A call that asks for nothing is not streamed.
		before := len(b.agg.streamedContexts())
		if _, err := cs2.CallTool(ctx, &mcp.CallToolParams{Name: "alpha_echo", Arguments: map[string]any{"text": "hi"}}); err != nil {
			t.Fatal(err)
		}
		if after := len(b.agg.streamedContexts()); after != before {
			t.Fatalf("a call without progressToken or logLevel was streamed")
		}
	})

	t.Run("legacy", func(t *testing.T) {
		n := &notes{}
		cs := connect(t, ctx, srv.URL+"/mcp", "alice-key", versionLegacy, n.options())
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
