package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
)

// withReporter adds a tool that reports progress twice and logs at two
// levels before answering, tagging everything with its "who" argument.
func withReporter(b *testBackend) {
	b.server.AddTool(&mcp.Tool{Name: "report", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct{ Who string }
		_ = json.Unmarshal(req.Params.Arguments, &args)
		if tok := req.Params.GetProgressToken(); tok != nil {
			for i := 1; i <= 2; i++ {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 2, Message: args.Who}); err != nil {
					return nil, err
				}
			}
		}
		_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "debug", Data: args.Who + " debug"})
		_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Data: args.Who + " warning"})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done " + args.Who}}}, nil
	})
}

func streamCall(t *testing.T, c aggregatorv1.AggregatorServiceClient, req *aggregatorv1.CallToolRequest) ([]*aggregatorv1.Notification, *aggregatorv1.CallToolResponse) {
	t.Helper()
	stream, err := c.CallToolStream(context.Background(), &aggregatorv1.CallToolStreamRequest{Call: req})
	if err != nil {
		t.Fatal(err)
	}
	var notes []*aggregatorv1.Notification
	var result *aggregatorv1.CallToolResponse
	for {
		ev, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if result != nil {
			t.Fatalf("event after the result: %v", ev)
		}
		if n := ev.GetNotification(); n != nil {
			notes = append(notes, n)
		} else {
			result = ev.GetResult()
		}
	}
	if result == nil {
		t.Fatal("stream ended without a result")
	}
	return notes, result
}

// Concurrent streamed calls, in both eras, each get exactly their own
// progress (with their own token, of their own JSON type) and their own
// log messages at or above their level, in order, before their result.
func TestCallToolStreamRelaysOwnNotificationsInOrder(t *testing.T) {
	modern := newTestBackend(t, "modern", backendOptions{extra: withReporter})
	legacy := newTestBackend(t, "legacy", backendOptions{stateful: true, extra: withReporter})
	h := startAggregator(t, parseConfig(t, `
aggregator:
  catalogTTL: 1h
  backends:
    - name: modern
      url: `+modern.url()+`
      timeout: 5s
    - name: legacy
      url: `+legacy.url()+`
      protocol: "2025-11-25"
      timeout: 5s
`))
	var wg sync.WaitGroup
	for _, name := range []string{"modern_report", "legacy_report"} {
		for i := range 4 {
			wg.Go(func() {
				who := fmt.Sprintf("%s-%d", name, i)
				token := fmt.Sprintf("%d", 1000+i) // a number token
				if i%2 == 1 {
					token = `"tok-` + who + `"`
				}
				level := "warning"
				if i == 3 {
					level = "" // progress only
				}
				notes, result := streamCall(t, h.gateway, &aggregatorv1.CallToolRequest{
					Name: name, ArgumentsJson: `{"who":"` + who + `"}`,
					Context: &aggregatorv1.RequestContext{ProgressTokenJson: token, LogLevel: level},
				})
				var got []string
				for _, n := range notes {
					var p struct {
						ProgressToken json.RawMessage `json:"progressToken"`
						Progress      float64         `json:"progress"`
						Message       string          `json:"message"`
						Level         string          `json:"level"`
						Data          string          `json:"data"`
						Meta          any             `json:"_meta"`
					}
					if err := json.Unmarshal([]byte(n.GetParamsJson()), &p); err != nil || p.Meta != nil {
						t.Errorf("%s: params %s", who, n.GetParamsJson())
					}
					switch n.GetMethod() {
					case "notifications/progress":
						got = append(got, fmt.Sprintf("progress %s %g %s", p.ProgressToken, p.Progress, p.Message))
					case "notifications/message":
						got = append(got, fmt.Sprintf("log %s %s", p.Level, p.Data))
					default:
						t.Errorf("%s: method %q", who, n.GetMethod())
					}
				}
				want := []string{
					fmt.Sprintf("progress %s 1 %s", token, who),
					fmt.Sprintf("progress %s 2 %s", token, who),
				}
				if level != "" {
					want = append(want, "log warning "+who+" warning")
				}
				if strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Errorf("%s: notifications\n%s\nwant\n%s", who, strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
				if text := resultText(t, result.GetResultJson()); text != "done "+who {
					t.Errorf("%s: result %q", who, text)
				}
			})
		}
	}
	wg.Wait()
}
