package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
	"github.com/switchboard-mcp/switchboard/test/mcpraw"
)

// askingBackend is a 2025-11-25 backend whose tool "ask" asks its client
// by elicitation mid-call, so that Switchboard holds the call for the
// answers; each call's end ("<id> answered" or "<id> cancelled") goes to
// ends.
func askingBackend(t *testing.T) (url string, ends <-chan string) {
	out := make(chan string, 16)
	server := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1.0.0"}, nil)
	type args struct {
		ID string `json:"id"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "ask", Description: "Ask the client, then answer."},
		func(ctx context.Context, req *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
			_, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Go on?", RequestedSchema: map[string]any{"type": "object"}})
			switch {
			case ctx.Err() != nil:
				out <- a.ID + " cancelled"
			case err == nil:
				out <- a.ID + " answered"
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, err
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(srv.Close)
	return srv.URL, out
}

// TestTaskHeldForItsAnswers: a task whose round a Legacy backend's
// question holds (input_required, the backend's call waiting for the
// answers) ends with that call. Cancelled, the backend's tool is
// cancelled at once, as a cancelled retry's is, where it once waited for
// its inputWait; and once the call stops waiting (inputWait), the task
// fails saying so, where it once stayed input_required until it expired
// and then failed the answers with advice for a plain call's retry.
func TestTaskHeldForItsAnswers(t *testing.T) {
	patientURL, patientEnds := askingBackend(t)
	hastyURL, hastyEnds := askingBackend(t)
	const hastyWait = 2 * time.Second
	c := harness.Start(t, harness.Options{Configure: func(cfg *config.Config) {
		withAggregatorIndexer(t, cfg)
		cfg.Aggregator.Backends = append(cfg.Aggregator.Backends,
			config.Backend{Name: "patient", URL: patientURL, Protocol: "2025-11-25", InputWait: config.Duration(time.Hour)},
			config.Backend{Name: "hasty", URL: hastyURL, Protocol: "2025-11-25", InputWait: config.Duration(hastyWait)})
		cfg.Aggregator.ToolOverrides = []config.ToolOverride{
			{Backend: "patient", Tool: "ask", TaskSupport: config.TaskSupportOptional},
			{Backend: "hasty", Tool: "ask", TaskSupport: config.TaskSupportOptional}}
		cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: "alice-key", Subject: "alice"}}}
	}})
	alice := &mcpraw.Client{URL: c.MCPURL, Authorization: "Bearer alice-key", Capabilities: mcpraw.AskableTasksCapabilities}
	get := func(id string) map[string]any {
		return taskResult(t)(alice.Send(t.Context(), "tasks/get", id, map[string]any{"taskId": id}))
	}
	waiting := func(id string) {
		testkit.Eventually(t, "the task waits for its answers", 20*time.Second, func() bool { return get(id)["status"] == "input_required" })
	}
	end := func(ends <-chan string, within time.Duration) string {
		select {
		case e := <-ends:
			return e
		case <-time.After(within):
			return "none within " + within.String()
		}
	}

	cancelled := createTask(t, alice, "patient_ask", map[string]any{"id": "cancelled"})
	waiting(cancelled)
	taskResult(t)(alice.Send(t.Context(), "tasks/cancel", cancelled, map[string]any{"taskId": cancelled}))
	if got := get(cancelled); got["status"] != "cancelled" {
		t.Fatalf("the task after tasks/cancel: %v", got)
	}
	if e := end(patientEnds, 20*time.Second); e != "cancelled cancelled" {
		t.Fatalf("the backend's tool after tasks/cancel (its inputWait an hour): %s, want cancelled", e)
	}

	unanswered := createTask(t, alice, "hasty_ask", map[string]any{"id": "unanswered"})
	waiting(unanswered)
	if e := end(hastyEnds, 20*time.Second); e != "unanswered cancelled" {
		t.Fatalf("the backend's tool once its inputWait (%s) passed: %s, want cancelled", hastyWait, e)
	}
	var got map[string]any
	testkit.Eventually(t, "the task failed", 20*time.Second, func() bool {
		got = get(unanswered)
		return got["status"] == "failed"
	})
	if e, _ := got["error"].(map[string]any); !strings.Contains(fmt.Sprint(e["message"]), "waited "+hastyWait.String()+" for the answers") {
		t.Fatalf("the failed task: %v", got)
	}
}
