package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/demobackend"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
	"github.com/switchboard-mcp/switchboard/test/mcpraw"
)

// tasksSpec is a backend whose sleep runs as a task Switchboard runs.
const tasksSpec = `
tools:
  - {name: sleep, description: Wait for a duration., behaviour: sleep}
  - {name: echo, description: Echo the arguments back., behaviour: echo}
`

// startTasks starts a cluster whose ops_sleep runs as a task, with API
// keys for alice and bob and a virtual server "ops".
func startTasks(t *testing.T, policyPath string) *harness.Cluster {
	return harness.Start(t, harness.Options{Backends: []harness.Backend{{Name: "ops", Spec: tasksSpec}},
		Configure: func(cfg *config.Config) {
			withAggregatorIndexer(t, cfg)
			cfg.Aggregator.ToolOverrides = []config.ToolOverride{{Backend: "ops", Tool: "sleep", TaskSupport: config.TaskSupportOptional}}
			cfg.Servers = []config.Server{{Name: "ops", Backends: []string{"ops"}}}
			cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{
				{Key: "alice-key", Subject: "alice"}, {Key: "bob-key", Subject: "bob"}}}
			cfg.Aggregator.Authz.PolicyFile = policyPath
			cfg.Reload.Interval = config.Duration(200 * time.Millisecond)
		}})
}

// withAggregatorIndexer gives the aggregator of cfg the indexer (its task
// store, the shared rate-limit buckets), with a credential of its own
// that may act for the principals it serves.
func withAggregatorIndexer(t *testing.T, cfg *config.Config) {
	token := "aggregator-" + t.Name()
	cfg.ServiceAuth.Credentials = append(cfg.ServiceAuth.Credentials, config.ServiceCredential{
		Name: "aggregator", Token: token, AssertPrincipals: true, Allow: config.AggregatorMethods})
	cfg.Aggregator.Indexer = config.Endpoint{Address: cfg.Indexer.Listen, Token: token}
}

// createTask calls tool with arguments as client, which must get a task
// for an answer; it returns the task's id.
func createTask(t *testing.T, client *mcpraw.Client, tool string, arguments map[string]any) string {
	t.Helper()
	created := taskResult(t)(client.Send(t.Context(), "tools/call", tool, map[string]any{"name": tool, "arguments": arguments}))
	id, _ := created["taskId"].(string)
	if created["resultType"] != "task" || id == "" {
		t.Fatalf("no task: %v", created)
	}
	return id
}

// rawTasks is a tasks client of a principal on one endpoint.
func rawTasks(url, key string) *mcpraw.Client {
	return &mcpraw.Client{URL: url, Authorization: "Bearer " + key, Capabilities: mcpraw.TasksCapabilities}
}

// taskResult decodes an answer's result, failing on an error.
func taskResult(t *testing.T) func(mcpraw.Answer, error) map[string]any {
	return func(a mcpraw.Answer, err error) map[string]any {
		t.Helper()
		if err != nil || a.Error != nil {
			t.Fatalf("answer: %v %v", err, a.Error)
		}
		var m map[string]any
		if err := json.Unmarshal(a.Result, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
}

// TestTaskIsolation: a task is its creator's, through the server it was
// made at: another principal, and its creator through another virtual
// server, get -32602 exactly as for an id that never
// existed, for tasks/get, tasks/update and tasks/cancel, and cannot end
// it. Every route makes tasks: /mcp, /mcp/raw, /mcp/<server> and the
// optimizer's call_tool.
func TestTaskIsolation(t *testing.T) {
	policyPath := filepath.Join(t.TempDir(), "policy.cedar")
	writeAtomically(t, policyPath, []byte(permitAll))
	c := startTasks(t, policyPath)
	base := c.MCPURL
	alice := rawTasks(base, "alice-key")
	id := createTask(t, alice, "ops_sleep", map[string]any{"duration": "30s"})
	unknown := func(who *mcpraw.Client, method, id string) {
		t.Helper()
		params := map[string]any{"taskId": id}
		if method == "tasks/update" {
			params["inputResponses"] = map[string]any{"x": map[string]any{"action": "accept"}}
		}
		a, err := who.Send(t.Context(), method, id, params)
		if err != nil || a.Error == nil || a.Error.Code != -32602 {
			t.Fatalf("%s of %s through %s: %+v %v, want -32602", method, id, who.URL, a.Error, err)
		}
	}
	never := "t1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	for _, who := range []*mcpraw.Client{rawTasks(base, "bob-key"), rawTasks(base+"/ops", "alice-key"), rawTasks(base+"/ops/raw", "alice-key")} {
		for _, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
			unknown(who, method, id)
			unknown(who, method, never)
		}
	}
	// /mcp/raw is /mcp's server: the same task.
	for _, url := range []string{base, base + "/raw"} {
		if got := taskResult(t)(rawTasks(url, "alice-key").Send(t.Context(), "tasks/get", id, map[string]any{"taskId": id})); got["status"] != "working" {
			t.Fatalf("alice's task through %s after the others' attempts: %v", url, got)
		}
	}
	alice.Send(t.Context(), "tasks/cancel", id, map[string]any{"taskId": id})
	if got := taskResult(t)(alice.Send(t.Context(), "tasks/get", id, map[string]any{"taskId": id})); got["status"] != "cancelled" {
		t.Fatalf("alice's cancelled task: %v", got)
	}

	// Every route makes tasks of the tool, and answers for them.
	for _, route := range []struct{ path, tool string }{{"/raw", "ops_sleep"}, {"/ops", "ops_sleep"}, {"/optimized", "call_tool"}} {
		client := rawTasks(base+route.path, "alice-key")
		params := map[string]any{"name": route.tool, "arguments": map[string]any{"duration": "10ms"}}
		if route.tool == "call_tool" {
			params["arguments"] = map[string]any{"tool_name": "ops_sleep", "parameters": map[string]any{"duration": "10ms"}}
		}
		made := taskResult(t)(client.Send(t.Context(), "tools/call", route.tool, params))
		id, _ := made["taskId"].(string)
		if id == "" {
			t.Fatalf("%s: no task: %v", route.path, made)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			got := taskResult(t)(client.Send(t.Context(), "tasks/get", id, map[string]any{"taskId": id}))
			if got["status"] == "completed" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: task %v", route.path, got)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// TestTaskStaysWithTheBackendThatRanIt: under the priority strategy a
// tool's name moves to the next backend when the first stops listing it.
// A task that the first backend runs is then as missing (-32602): its id,
// and the caller's credentials, are not sent to the other backend, which
// would not know it (and the task once failed for it); once the first
// backend lists the tool again the task is there, still working.
func TestTaskStaysWithTheBackendThatRanIt(t *testing.T) {
	const spec = "tasks: true\ntools:\n  - {name: sleep, description: %s, behaviour: sleep}\n"
	c := harness.Start(t, harness.Options{Backends: []harness.Backend{
		{Name: "ops", Spec: fmt.Sprintf(spec, "The first's wait.")}, {Name: "spare", Spec: fmt.Sprintf(spec, "The spare's wait.")}},
		Configure: func(cfg *config.Config) {
			withAggregatorIndexer(t, cfg)
			cfg.Aggregator.ConflictResolution = config.ConflictResolution{Strategy: config.StrategyPriority, PriorityOrder: []string{"ops", "spare"}}
			cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: "alice-key", Subject: "alice"}}}
		}})
	alice := rawTasks(c.MCPURL, "alice-key")
	id := createTask(t, alice, "sleep", map[string]any{"duration": "60s"})
	listedAs := func(description string) {
		t.Helper()
		testkit.Eventually(t, "sleep listed as "+description, 10*time.Second, func() bool {
			a, err := alice.Send(t.Context(), "tools/list", "", nil)
			return err == nil && a.Error == nil && strings.Contains(string(a.Result), description)
		})
	}
	c.RemoveTool(t, "ops", "sleep")
	listedAs("The spare's wait.")
	for _, method := range []string{"tasks/get", "tasks/cancel"} {
		a, err := alice.Send(t.Context(), method, id, map[string]any{"taskId": id})
		if err != nil || a.Error == nil || a.Error.Code != -32602 {
			t.Fatalf("%s once the spare owns the tool: %+v %v %s, want -32602", method, a.Error, err, a.Result)
		}
		// In the words of a task that never was ("not found" once told
		// the two apart).
		missing, err := alice.Send(t.Context(), method, "never", map[string]any{"taskId": "never"})
		if err != nil || missing.Error == nil || missing.Error.Message != a.Error.Message {
			t.Fatalf("%s: %+v for the task whose tool is gone, %+v for one that never was", method, a.Error, missing.Error)
		}
	}
	c.AddTool(t, "ops", demobackend.ToolSpec{Name: "sleep", Description: "The first's wait.", Behaviour: "sleep"})
	listedAs("The first's wait.")
	if got := taskResult(t)(alice.Send(t.Context(), "tasks/get", id, map[string]any{"taskId": id})); got["status"] != "working" {
		t.Fatalf("the task once its backend lists the tool again: %v", got)
	}
}

// TestEndedBackendTaskWithoutItsBackend: a task its backend ran that has
// ended is answered from Switchboard's record while the backend is down,
// as docs/operations.md says (tasks/get once failed, "unavailable"), and
// cancelling it is acknowledged without the backend.
func TestEndedBackendTaskWithoutItsBackend(t *testing.T) {
	c := harness.Start(t, harness.Options{Backends: []harness.Backend{{Name: "ops", Spec: "tasks: true\ntools:\n  - {name: sleep, behaviour: sleep}\n"}},
		Configure: func(cfg *config.Config) {
			withAggregatorIndexer(t, cfg)
			cfg.Aggregator.Health = config.HealthCheck{Interval: config.Duration(100 * time.Millisecond), UnhealthyThreshold: 1}
			cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: "alice-key", Subject: "alice"}}}
		}})
	alice := rawTasks(c.MCPURL, "alice-key")
	id := createTask(t, alice, "ops_sleep", map[string]any{"duration": "10ms"})
	testkit.Eventually(t, "the task completed", 20*time.Second, func() bool {
		got := taskResult(t)(alice.Send(t.Context(), "tasks/get", id, map[string]any{"taskId": id}))
		return got["status"] == "completed"
	})
	c.Backends["ops"].Kill()
	testkit.Eventually(t, "ops down: its tool unlisted", 20*time.Second, func() bool {
		a, err := alice.Send(t.Context(), "tools/list", "", nil)
		return err == nil && a.Error == nil && !strings.Contains(string(a.Result), "ops_sleep")
	})
	if got := taskResult(t)(alice.Send(t.Context(), "tasks/get", id, map[string]any{"taskId": id})); got["status"] != "completed" {
		t.Fatalf("the ended task while its backend is down: %v", got)
	}
	taskResult(t)(alice.Send(t.Context(), "tasks/cancel", id, map[string]any{"taskId": id}))
}

// TestBackendLimitCountsItsTasks: a limit per backend counts the
// requests about a task its backend runs, each of which is sent there
// (configuration.md, limits[].methods): past the burst they are refused
// with 429 like the backend's calls.
func TestBackendLimitCountsItsTasks(t *testing.T) {
	c := harness.Start(t, harness.Options{Backends: []harness.Backend{{Name: "ops", Spec: "tasks: true\ntools:\n  - {name: sleep, behaviour: sleep}\n"}},
		Configure: func(cfg *config.Config) {
			withAggregatorIndexer(t, cfg)
			cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: "alice-key", Subject: "alice"}}}
			cfg.RateLimits = config.RateLimits{Limits: []config.RateLimit{{Name: "ops-flood", Per: config.RatePerBackend,
				Match: config.RateLimitMatch{Backends: []string{"ops"}}, Rate: "1/h", Burst: 4}}}
		}})
	alice := rawTasks(c.MCPURL, "alice-key")
	id := createTask(t, alice, "ops_sleep", map[string]any{"duration": "60s"}) // the first token
	var answered int
	for range 5 {
		a, err := alice.Send(t.Context(), "tasks/get", id, map[string]any{"taskId": id})
		if err != nil {
			t.Fatal(err)
		}
		if a.Error == nil {
			answered++
		} else if a.HTTPStatus != http.StatusTooManyRequests {
			t.Fatalf("tasks/get: %+v (HTTP %d), want an answer or 429", a.Error, a.HTTPStatus)
		}
	}
	if answered != 3 {
		t.Fatalf("%d of 5 tasks/get answered under a limit of 4 with one spent on the call, want 3", answered)
	}
}

// TestTaskProbesAreLimited: a request about a task that is not the
// caller's is refused as missing, and takes a token from the caller's
// limits like any refused request, so that a client probing task ids is
// held to its limit.
func TestTaskProbesAreLimited(t *testing.T) {
	c := harness.Start(t, harness.Options{Backends: []harness.Backend{{Name: "ops", Spec: tasksSpec}},
		Configure: func(cfg *config.Config) {
			withAggregatorIndexer(t, cfg)
			cfg.Aggregator.ToolOverrides = []config.ToolOverride{{Backend: "ops", Tool: "sleep", TaskSupport: config.TaskSupportOptional}}
			cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{
				{Key: "alice-key", Subject: "alice"}, {Key: "bob-key", Subject: "bob"}}}
			cfg.RateLimits = config.RateLimits{Limits: []config.RateLimit{{Name: "bob", Per: config.RatePerPrincipal,
				Match: config.RateLimitMatch{Principals: []string{"bob"}}, Rate: "1/h", Burst: 3}}}
		}})
	id := createTask(t, rawTasks(c.MCPURL, "alice-key"), "ops_sleep", map[string]any{"duration": "30s"})
	bob := rawTasks(c.MCPURL, "bob-key")
	var got []string
	for _, method := range []string{"tasks/get", "tasks/cancel", "tasks/update", "tasks/get"} {
		params := map[string]any{"taskId": id}
		if method == "tasks/update" {
			params["inputResponses"] = map[string]any{"q": map[string]any{"action": "accept"}}
		}
		a, err := bob.Send(t.Context(), method, id, params)
		if err != nil || a.Error == nil {
			t.Fatalf("bob's %s of alice's task: %+v %v", method, a, err)
		}
		got = append(got, fmt.Sprintf("%d/%d", a.HTTPStatus, a.Error.Code))
	}
	if want := "[400/-32602 400/-32602 400/-32602 429/429]"; fmt.Sprint(got) != want {
		t.Fatalf("bob's probes of alice's task: %v, want %s", got, want)
	}
}

// TestTaskAfterInput: a tool whose override sets taskAfterInput starts
// its call first. A call that asks for input within the first wait is
// answered input_required, no task made; one that ends within it is a
// task already completed; a longer one is a task, working. A client
// that goes away during the wait does not end the call (it once did).
func TestTaskAfterInput(t *testing.T) {
	c := harness.Start(t, harness.Options{Backends: []harness.Backend{{Name: "ops", Spec: `
tools:
  - {name: sleep, behaviour: sleep}
  - {name: ask, behaviour: ask, text: "Proceed?"}
`}},
		Configure: func(cfg *config.Config) {
			withAggregatorIndexer(t, cfg)
			cfg.Aggregator.ToolOverrides = []config.ToolOverride{
				{Backend: "ops", Tool: "sleep", TaskSupport: config.TaskSupportOptional, TaskAfterInput: true},
				{Backend: "ops", Tool: "ask", TaskSupport: config.TaskSupportOptional, TaskAfterInput: true}}
			cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: "alice-key", Subject: "alice"}}}
		}})
	alice := &mcpraw.Client{URL: c.MCPURL, Authorization: "Bearer alice-key", Capabilities: mcpraw.AskableTasksCapabilities}
	sleep := func(d string) map[string]any {
		return taskResult(t)(alice.Send(t.Context(), "tools/call", "ops_sleep", map[string]any{"name": "ops_sleep", "arguments": map[string]any{"duration": d}}))
	}
	if got := taskResult(t)(alice.Send(t.Context(), "tools/call", "ops_ask", map[string]any{"name": "ops_ask", "arguments": map[string]any{}})); got["resultType"] != "input_required" {
		t.Fatalf("a call that asks at once: %v, want input_required", got)
	}
	if got := sleep("10ms"); got["resultType"] != "task" || got["status"] != "completed" {
		t.Fatalf("a call that ends within the wait: %v, want a completed task", got)
	}
	long := sleep("1s")
	id, _ := long["taskId"].(string)
	if long["resultType"] != "task" || long["status"] != "working" || id == "" {
		t.Fatalf("a longer call: %v, want a working task", long)
	}
	testkit.Eventually(t, "the task completed", 20*time.Second, func() bool {
		return taskResult(t)(alice.Send(t.Context(), "tasks/get", id, map[string]any{"taskId": id}))["status"] == "completed"
	})

	before := c.Sleeps(t, "ops")
	impatient := &mcpraw.Client{URL: alice.URL, Authorization: alice.Authorization, Capabilities: alice.Capabilities,
		HTTP: &http.Client{Timeout: 100 * time.Millisecond}}
	if _, err := impatient.Send(t.Context(), "tools/call", "ops_sleep", map[string]any{"name": "ops_sleep", "arguments": map[string]any{"duration": "1s"}}); err == nil {
		t.Fatal("the impatient client got an answer within 100ms")
	}
	testkit.Eventually(t, "the abandoned call completed", 20*time.Second, func() bool {
		now := c.Sleeps(t, "ops")
		if now.Cancelled != before.Cancelled {
			t.Fatalf("the abandoned call was cancelled: %+v, before %+v", now, before)
		}
		return now.Completed == before.Completed+1
	})
}

// TestTaskWhoseQuestionsATaskCannotKeep: a round that asks questions larger
// than a task keeps fails the task at once, saying so, where the store's
// refusal once left it working until its lease lapsed (with a message
// blaming a replica that stopped).
func TestTaskWhoseQuestionsATaskCannotKeep(t *testing.T) {
	question := strings.Repeat("Proceed? ", config.MaxTaskInputBytes/9+1)
	c := harness.Start(t, harness.Options{Backends: []harness.Backend{{Name: "ops", Spec: "tools:\n  - {name: ask, behaviour: ask, text: \"" + question + "\"}\n"}},
		Configure: func(cfg *config.Config) {
			withAggregatorIndexer(t, cfg)
			cfg.Aggregator.ToolOverrides = []config.ToolOverride{{Backend: "ops", Tool: "ask", TaskSupport: config.TaskSupportOptional}}
			cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: "alice-key", Subject: "alice"}}}
		}})
	alice := &mcpraw.Client{URL: c.MCPURL, Authorization: "Bearer alice-key", Capabilities: mcpraw.AskableTasksCapabilities}
	id := createTask(t, alice, "ops_ask", map[string]any{})
	var got map[string]any
	testkit.Eventually(t, "the task failed", 10*time.Second, func() bool {
		got = taskResult(t)(alice.Send(t.Context(), "tasks/get", id, map[string]any{"taskId": id}))
		return got["status"] == "failed"
	})
	if e, _ := got["error"].(map[string]any); !strings.Contains(fmt.Sprint(e["message"]), "larger than a task keeps") {
		t.Fatalf("the failed task: %v", got)
	}
}

// TestTaskRefusalsAreTheClients: requests a task cannot keep are the
// client's to fix, -32602 before anything runs, not an outage to retry
// (they were -32603 "retry later", from the task store's refusal):
// arguments past what a task keeps, and answers that answer nothing.
func TestTaskRefusalsAreTheClients(t *testing.T) {
	policyPath := filepath.Join(t.TempDir(), "policy.cedar")
	writeAtomically(t, policyPath, []byte(permitAll))
	c := startTasks(t, policyPath)
	alice := rawTasks(c.MCPURL, "alice-key")
	big := strings.Repeat("x", config.MaxTaskCallBytes)
	a, err := alice.Send(t.Context(), "tools/call", "ops_sleep", map[string]any{"name": "ops_sleep", "arguments": map[string]any{"duration": "10ms", "pad": big}})
	if err != nil || a.Error == nil || a.Error.Code != -32602 || !strings.Contains(a.Error.Message, "KiB") {
		t.Fatalf("a task with %d bytes of arguments: %+v %v, want -32602", len(big), a.Error, err)
	}
	// Without the tasks extension the same call runs plainly.
	plain := &mcpraw.Client{URL: c.MCPURL, Authorization: "Bearer alice-key"}
	if a, err := plain.Send(t.Context(), "tools/call", "ops_sleep", map[string]any{"name": "ops_sleep", "arguments": map[string]any{"duration": "10ms", "pad": big}}); err != nil || a.Error != nil {
		t.Fatalf("the plain call: %+v %v", a.Error, err)
	}
	id := createTask(t, alice, "ops_sleep", map[string]any{"duration": "30s"})
	a, err = alice.Send(t.Context(), "tasks/update", id, map[string]any{"taskId": id, "inputResponses": map[string]any{}})
	if err != nil || a.Error == nil || a.Error.Code != -32602 || !strings.Contains(a.Error.Message, "at least one") {
		t.Fatalf("tasks/update answering nothing: %+v %v, want -32602 saying it answers nothing", a.Error, err)
	}
}

// TestTaskFollowsThePolicy: a task is admitted as a call of its tool, so
// once the policy forbids its owner the tool, tasks/get answers -32602 as
// for an unknown task and tasks/list (2025-11-25) no longer lists it; a
// policy that permits the tool again shows it again.
func TestTaskFollowsThePolicy(t *testing.T) {
	policyPath := filepath.Join(t.TempDir(), "policy.cedar")
	writeAtomically(t, policyPath, []byte(permitAll))
	c := startTasks(t, policyPath)
	alice := rawTasks(c.MCPURL, "alice-key")
	made := taskResult(t)(alice.Send(t.Context(), "tools/call", "ops_sleep", map[string]any{"name": "ops_sleep", "arguments": map[string]any{"duration": "1ms"}}))
	id, _ := made["taskId"].(string)
	if id == "" {
		t.Fatalf("no task: %v", made)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "tasks", Version: "0"}, nil)
	legacy, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: c.MCPURL,
		HTTPClient: &http.Client{Transport: bearerTransport{"alice-key"}}, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: harness.Legacy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { legacy.Close() })
	// tasks/list of alice's Legacy session (go-sdk has no tasks API).
	listed := func() bool {
		body := `{"jsonrpc":"2.0","id":7,"method":"tasks/list","params":{}}`
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, c.MCPURL, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", harness.Legacy)
		req.Header.Set("Mcp-Session-Id", legacy.ID())
		req.Header.Set("Authorization", "Bearer alice-key")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		msg := mcpspec.LastMessage(resp.Header.Get("Content-Type"), raw)
		if !strings.Contains(string(msg), `"tasks"`) {
			t.Fatalf("tasks/list: HTTP %d %s", resp.StatusCode, raw)
		}
		return strings.Contains(string(msg), id)
	}
	if !listed() {
		t.Fatal("tasks/list does not list alice's task")
	}
	writeAtomically(t, policyPath, []byte(permitAll+`forbid (principal == User::"alice", action, resource == Tool::"ops_sleep");`+"\n"))
	testkit.Eventually(t, "alice's task hidden by the policy", 10*time.Second, func() bool {
		a, err := alice.Send(t.Context(), "tasks/get", id, map[string]any{"taskId": id})
		return err == nil && a.Error != nil && a.Error.Code == -32602
	})
	if listed() {
		t.Fatal("tasks/list lists a task whose tool the policy forbids")
	}
	writeAtomically(t, policyPath, []byte(permitAll+"// again\n"))
	testkit.Eventually(t, "alice's task shown again", 10*time.Second, listed)
}

// TestLegacyTaskOfASessionWithALogLevel: a 2025-11-25 session that set a
// log level (its calls are streamed, to carry their log messages) still
// gets the task it asks for; it once got the call's plain result. A task
// asked of a tool that does not run as one is -32601, and the tool is not
// called (2025-11-25: servers SHOULD answer so).
func TestLegacyTaskOfASessionWithALogLevel(t *testing.T) {
	c := harness.Start(t, harness.Options{Backends: []harness.Backend{{Name: "ops", Spec: tasksSpec}},
		Configure: func(cfg *config.Config) {
			withAggregatorIndexer(t, cfg)
			cfg.Aggregator.ToolOverrides = []config.ToolOverride{{Backend: "ops", Tool: "sleep", TaskSupport: config.TaskSupportOptional}}
			cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: "alice-key", Subject: "alice"}}}
		}})
	client := mcp.NewClient(&mcp.Implementation{Name: "alice", Version: "0"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: c.MCPURL,
		HTTPClient: &http.Client{Transport: bearerTransport{"alice-key"}}, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: harness.Legacy})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	legacy := &mcpraw.Client{URL: c.MCPURL, Authorization: "Bearer alice-key", Session: cs.ID()}
	callAsTask := func(tool string) (task map[string]any, rerr *mcpraw.Error, raw string) {
		a, err := legacy.Send(t.Context(), "tools/call", "", map[string]any{"name": tool, "arguments": map[string]any{"duration": "10ms"}, "task": map[string]any{"ttl": 60000}})
		if err != nil {
			t.Fatal(err)
		}
		var res struct {
			Task map[string]any `json:"task"`
		}
		_ = json.Unmarshal(a.Result, &res)
		return res.Task, a.Error, string(a.Result)
	}
	if task, rerr, raw := callAsTask("ops_sleep"); rerr != nil || task["taskId"] == nil || task["status"] != "working" {
		t.Fatalf("a task asked for in a session with a log level: %v %s", rerr, raw)
	}
	if _, rerr, raw := callAsTask("ops_echo"); rerr == nil || rerr.Code != -32601 {
		t.Fatalf("a task asked of a tool that does not run as one: %v %s, want -32601", rerr, raw)
	}
	if calls := c.Calls(t, "ops"); calls["tools/call echo"] != 0 {
		t.Fatalf("the tool was called: %v", calls)
	}
}

// TestLegacyTaskTTLOfZeroIsTheFloor: a 2025-11-25 client that asks for
// a task kept 0 ms (or less than a millisecond) asks for the shortest
// retention, and gets the 10 s floor any TTL asked below it gets; only a
// request that names no TTL gets aggregator.tasks.defaultTTL. Before, 0
// read as "no TTL", and the task and its result were kept the default
// hour.
func TestLegacyTaskTTLOfZeroIsTheFloor(t *testing.T) {
	c := harness.Start(t, harness.Options{Backends: []harness.Backend{{Name: "ops", Spec: tasksSpec}},
		Configure: func(cfg *config.Config) {
			withAggregatorIndexer(t, cfg)
			cfg.Aggregator.ToolOverrides = []config.ToolOverride{{Backend: "ops", Tool: "sleep", TaskSupport: config.TaskSupportOptional}}
			cfg.Aggregator.Tasks.DefaultTTL = config.Duration(time.Hour)
			cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: "alice-key", Subject: "alice"}}}
		}})
	alice := &mcpraw.Client{URL: c.MCPURL, Authorization: "Bearer alice-key", Capabilities: mcpraw.TasksCapabilities}
	if err := alice.OpenSession(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		task map[string]any
		want float64
	}{
		{map[string]any{"ttl": 0}, 10_000},
		{map[string]any{"ttl": 0.5}, 10_000},
		{map[string]any{"ttl": 1}, 10_000},
		{map[string]any{"ttl": 60_000}, 60_000},
		{map[string]any{}, 3_600_000},
	} {
		got := taskResult(t)(alice.Send(t.Context(), "tools/call", "", map[string]any{"name": "ops_sleep",
			"arguments": map[string]any{"duration": "10ms"}, "task": c.task}))
		var task struct{ TTL float64 }
		b, _ := json.Marshal(got["task"])
		if err := json.Unmarshal(b, &task); err != nil || task.TTL != c.want {
			t.Errorf("task %v: kept %v ms (%v), want %v", c.task, task.TTL, err, c.want)
		}
	}
}

// TestTaskFollowsItsToolThroughARename: a task belongs to its tool, not to
// the name the tool had: after a reload renames the tool, the task is
// found under the new name and admitted as it (a policy on the new name
// applies); a tool of the same backend that takes the old name does not
// take the task (it was once admitted, and would have run its next
// round, as that tool).
func TestTaskFollowsItsToolThroughARename(t *testing.T) {
	policyPath := filepath.Join(t.TempDir(), "policy.cedar")
	writeAtomically(t, policyPath, []byte(permitAll))
	c := startTasks(t, policyPath)
	rewrite := configRewriter(t, c)
	alice := rawTasks(c.MCPURL, "alice-key")
	id := createTask(t, alice, "ops_sleep", map[string]any{"duration": "60s"})
	get := func() error {
		a, err := alice.Send(t.Context(), "tasks/get", id, map[string]any{"taskId": id})
		if err != nil {
			t.Fatal(err)
		}
		if a.Error != nil {
			return a.Error
		}
		return nil
	}
	listed := func(name, description string) func() bool {
		return func() bool {
			a, err := alice.Send(t.Context(), "tools/list", "", nil)
			return err == nil && a.Error == nil && strings.Contains(string(a.Result), `"name":"`+name+`"`) && strings.Contains(string(a.Result), description)
		}
	}
	rewrite(func(cfg *config.Config) {
		cfg.Aggregator.ToolOverrides = []config.ToolOverride{{Backend: "ops", Tool: "sleep", Name: "nap", TaskSupport: config.TaskSupportOptional}}
	})
	testkit.Eventually(t, "sleep renamed nap", 10*time.Second, listed("ops_nap", "Wait for a duration."))
	if err := get(); err != nil {
		t.Fatalf("tasks/get after the task's tool was renamed: %v", err)
	}
	writeAtomically(t, policyPath, []byte(permitAll+`forbid (principal == User::"alice", action, resource == Tool::"ops_nap");`+"\n"))
	testkit.Eventually(t, "the policy on the new name applies to the task", 10*time.Second, func() error {
		if err := get(); err == nil {
			return errors.New("alice still reads her task of the tool forbidden her")
		}
		return nil
	})
	rewrite(func(cfg *config.Config) {
		cfg.Aggregator.ToolOverrides = []config.ToolOverride{
			{Backend: "ops", Tool: "sleep", Name: "nap", TaskSupport: config.TaskSupportOptional},
			{Backend: "ops", Tool: "echo", Name: "sleep"}}
	})
	testkit.Eventually(t, "echo listed as ops_sleep", 10*time.Second, listed("ops_sleep", "Echo the arguments back."))
	if err := get(); err == nil {
		t.Fatal("the task is admitted as ops_sleep, now another tool, though alice may not call its own")
	}
}

// TestTaskEndIsAudited: the trail records a task's end with the outcome
// of the call it ran (task_end), which its tool_call event, written when
// the task was made, could not know: a completed call and a tool error.
func TestTaskEndIsAudited(t *testing.T) {
	trail := filepath.Join(t.TempDir(), "audit.jsonl")
	c := harness.Start(t, harness.Options{Backends: []harness.Backend{{Name: "ops", Spec: tasksSpec + "  - {name: fail, behaviour: error, text: \"failed on purpose\"}\n"}},
		Configure: func(cfg *config.Config) {
			withAggregatorIndexer(t, cfg)
			cfg.Aggregator.ToolOverrides = []config.ToolOverride{
				{Backend: "ops", Tool: "sleep", TaskSupport: config.TaskSupportOptional},
				{Backend: "ops", Tool: "fail", TaskSupport: config.TaskSupportOptional}}
			cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: "alice-key", Subject: "alice"}}}
			cfg.Audit = config.Audit{Sink: config.AuditFile, File: trail}
		}})
	alice := rawTasks(c.MCPURL, "alice-key")
	createTask(t, alice, "ops_sleep", map[string]any{"duration": "10ms"})
	createTask(t, alice, "ops_fail", map[string]any{})
	testkit.Eventually(t, "both tasks' ends in the trail", 20*time.Second, func() error {
		events, err := taskEnds(trail)
		if err != nil {
			return err
		}
		ends := map[string]string{}
		for _, e := range events {
			if e.Subject == "alice" {
				ends[e.Tool] = string(e.Outcome)
			}
		}
		if ends["ops_sleep"] != "ok" || ends["ops_fail"] != "tool_error" {
			return fmt.Errorf("task_end events by tool: %v", ends)
		}
		return nil
	})
}

// taskEnds are the task_end events in the audit trail file.
func taskEnds(trail string) ([]audit.Event, error) { return trailEvents(trail, audit.KindTaskEnd) }

// trailEvents are the events of kind in the audit trail file.
func trailEvents(trail string, kind audit.Kind) ([]audit.Event, error) {
	raw, err := os.ReadFile(trail)
	if err != nil {
		return nil, err
	}
	var events []audit.Event
	for line := range strings.SplitSeq(string(raw), "\n") {
		var e audit.Event
		if json.Unmarshal([]byte(line), &e) == nil && e.Kind == kind {
			events = append(events, e)
		}
	}
	return events, nil
}

// TestLegacyTaskResultIsOneRequest: a 2025-11-25 tasks/result waits for
// its task by reading it at the task's poll interval, and it is one
// request: one tasks/get token and one audit event, however many reads
// (before, every read took a token, so a wait longer than the limit's
// burst of reads failed with 429, and recorded an event each). A wait is
// one of the principal's open streams: past gateway.streams.maxPerPrincipal
// another is refused with 429 (before, waits were not bounded), and the
// gateway's open streams gauge counts it.
func TestLegacyTaskResultIsOneRequest(t *testing.T) {
	trail := filepath.Join(t.TempDir(), "audit.jsonl")
	gwOps := harness.FreeAddr(t)
	c := harness.Start(t, harness.Options{Backends: []harness.Backend{{Name: "ops", Spec: tasksSpec}},
		Configure: func(cfg *config.Config) {
			withAggregatorIndexer(t, cfg)
			cfg.Aggregator.ToolOverrides = []config.ToolOverride{{Backend: "ops", Tool: "sleep", TaskSupport: config.TaskSupportOptional}}
			cfg.Aggregator.Tasks.PollInterval = config.Duration(100 * time.Millisecond)
			cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: "alice-key", Subject: "alice"}}}
			cfg.Gateway.OpsListen = gwOps
			cfg.Gateway.Streams.MaxPerPrincipal = 1
			cfg.Audit = config.Audit{Sink: config.AuditFile, File: trail}
			cfg.RateLimits = config.RateLimits{Limits: []config.RateLimit{{Name: "reads", Per: config.RatePerPrincipal,
				Methods: []string{config.RateMethodTasksGet}, Rate: "1/h", Burst: 3}}}
			cfg.ServiceAuth.Credentials = append(cfg.ServiceAuth.Credentials, config.ServiceCredential{Name: "reporter",
				Token: "reporter-" + t.Name(), Subject: "svc-reporter", Allow: []string{"switchboard.aggregator.v1.AggregatorService/*"}})
		}})
	alice := &mcpraw.Client{URL: c.MCPURL, Authorization: "Bearer alice-key", Capabilities: mcpraw.TasksCapabilities}
	if err := alice.OpenSession(t.Context()); err != nil {
		t.Fatal(err)
	}
	created := taskResult(t)(alice.Send(t.Context(), "tools/call", "", map[string]any{"name": "ops_sleep",
		"arguments": map[string]any{"duration": "1500ms"}, "task": map[string]any{"ttl": 60000}}))
	task, _ := created["task"].(map[string]any)
	id, _ := task["taskId"].(string)
	if id == "" {
		t.Fatalf("no task: %v", created)
	}
	waited := make(chan mcpraw.Answer, 1)
	go func() {
		a, err := alice.Send(t.Context(), "tasks/result", "", map[string]any{"taskId": id})
		if err != nil {
			t.Error(err)
		}
		waited <- a
	}()
	testkit.Eventually(t, "the wait is an open stream", 10*time.Second, func() error {
		if got := metric(t, gwOps, `switchboard_gateway_open_streams{kind="task_result"}`); got != "1" {
			return fmt.Errorf("open task_result streams %q", got)
		}
		return nil
	})
	if a, err := alice.Send(t.Context(), "tasks/result", "", map[string]any{"taskId": id}); err != nil || a.HTTPStatus != http.StatusTooManyRequests {
		t.Fatalf("a second wait past the principal's streams: %+v %v, want HTTP 429", a, err)
	}
	a := <-waited
	if a.Error != nil || !strings.Contains(string(a.Result), `"tool":"sleep"`) {
		t.Fatalf("the wait for a task read about 15 times under a burst of 3: %+v %s, want the tool's result", a.Error, a.Result)
	}
	testkit.Eventually(t, "the two waits' events in the trail", 10*time.Second, func() error {
		events, err := trailEvents(trail, audit.KindTaskGet)
		if err != nil {
			return err
		}
		by := map[string]int{}
		for _, e := range events {
			by[e.Service+" "+string(e.Outcome)]++
		}
		// Each wait's first read is the aggregator's; the refusal of the
		// second, which found its task working, the gateway's (a bound
		// of its own, answered 429: rate_limited).
		if by["gateway rate_limited"] == 0 || by["aggregator ok"] < 2 {
			return fmt.Errorf("task_get events: %v", by)
		}
		if len(events) != 3 {
			t.Fatalf("task_get events %v, want one read of the aggregator's for each wait and the gateway's refusal", by)
		}
		return nil
	})

	// Only the gateway's reads may be polled: an internal client acting
	// for itself, whose claim could not be checked, takes a token on
	// every read, polled or not.
	conn, err := rpc.Dial(config.Endpoint{Address: c.Config.Aggregator.Listen, Token: "reporter-" + t.Name()}, config.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	agg := aggregatorv1.NewAggregatorServiceClient(conn)
	made, err := agg.CallTool(t.Context(), &aggregatorv1.CallToolRequest{Name: "ops_sleep", ArgumentsJson: `{"duration":"10ms"}`,
		Context: &aggregatorv1.RequestContext{ClientCapabilitiesJson: string(mcpraw.TasksCapabilities)}, Task: &aggregatorv1.TaskRequest{TtlMs: 60000, Explicit: true}})
	if err != nil || made.GetTask().GetTaskId() == "" {
		t.Fatalf("the reporter's task: %v, %v", made, err)
	}
	var codes []string
	for range 4 {
		_, err := agg.GetTask(t.Context(), &aggregatorv1.GetTaskRequest{TaskId: made.GetTask().GetTaskId(), Polled: true})
		codes = append(codes, status.Code(err).String())
	}
	if want := "[OK OK OK ResourceExhausted]"; fmt.Sprint(codes) != want {
		t.Fatalf("the reporter's polled reads under a burst of 3: %v, want %s", codes, want)
	}
}

// TestTaskOutcomeOutlivesAnIndexerRestart: a task whose call ends while
// the indexer is away (a rolling restart) keeps its outcome: the round
// stays held, its lease renewed, and its outcome is stored once the
// indexer is back. The aggregator once tried three times over about six
// seconds, dropped the outcome, and let the lease lapse, so the task
// failed "because the replica running it stopped".
func TestTaskOutcomeOutlivesAnIndexerRestart(t *testing.T) {
	policyPath := filepath.Join(t.TempDir(), "policy.cedar")
	writeAtomically(t, policyPath, []byte(permitAll))
	c := startTasks(t, policyPath)
	alice := rawTasks(c.MCPURL, "alice-key")
	id := createTask(t, alice, "ops_sleep", map[string]any{"duration": "500ms"})
	c.Indexer.Stop()
	// The fourth try is past where the aggregator once gave up.
	c.Aggregator.AwaitLog(t, "storing a task's round failed; trying again", "attempt=4")
	c.Indexer.Restart()
	testkit.Eventually(t, "the task completed", 30*time.Second, func() error {
		a, err := alice.Send(t.Context(), "tasks/get", id, map[string]any{"taskId": id})
		if err != nil || a.Error != nil {
			return fmt.Errorf("tasks/get: %v %v", err, a.Error)
		}
		var got map[string]any
		_ = json.Unmarshal(a.Result, &got)
		switch got["status"] {
		case "completed":
			return nil
		case "working":
			return fmt.Errorf("still working")
		}
		t.Fatalf("the task ended %v", got)
		return nil
	})
}

// TestCancelledTaskHasNoTaskEnd: a task cancelled while its call runs
// has its task_cancel and no task_end, as docs/operations.md says: the
// call's end, stored after the cancel, changes nothing. The call's
// outcome was once recorded as the task's end all the same.
func TestCancelledTaskHasNoTaskEnd(t *testing.T) {
	trail := filepath.Join(t.TempDir(), "audit.jsonl")
	c := harness.Start(t, harness.Options{Backends: []harness.Backend{{Name: "ops", Spec: tasksSpec}},
		Configure: func(cfg *config.Config) {
			withAggregatorIndexer(t, cfg)
			cfg.Aggregator.ToolOverrides = []config.ToolOverride{{Backend: "ops", Tool: "sleep", TaskSupport: config.TaskSupportOptional}}
			cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: "alice-key", Subject: "alice"}}}
			cfg.Audit = config.Audit{Sink: config.AuditFile, File: trail}
		}})
	alice := rawTasks(c.MCPURL, "alice-key")
	id := createTask(t, alice, "ops_sleep", map[string]any{"duration": "1s"})
	taskResult(t)(alice.Send(t.Context(), "tasks/cancel", id, map[string]any{"taskId": id}))
	// A task made after the cancelled one's call ended: once its
	// task_end (ok) is in the trail, the cancelled one's would be too.
	createTask(t, alice, "ops_sleep", map[string]any{"duration": "1500ms"})
	testkit.Eventually(t, "the later task's end in the trail", 20*time.Second, func() error {
		events, err := taskEnds(trail)
		if err != nil {
			return err
		}
		var ends []string
		for _, e := range events {
			ends = append(ends, string(e.Outcome))
		}
		if !slices.Contains(ends, "ok") {
			return fmt.Errorf("task_end outcomes %v", ends)
		}
		if len(ends) != 1 {
			t.Fatalf("task_end outcomes %v: the cancelled task has one too", ends)
		}
		return nil
	})
}

// TestDeniedTaskIsAnsweredAsMissing: once the policy no longer lets its
// creator call the task's tool, the task is answered exactly as one that
// never was, for tasks/get, tasks/update and tasks/cancel. The denial
// once came back as "not found" and a missing task as "task not found".
func TestDeniedTaskIsAnsweredAsMissing(t *testing.T) {
	policyPath := filepath.Join(t.TempDir(), "policy.cedar")
	writeAtomically(t, policyPath, []byte(permitAll))
	c := startTasks(t, policyPath)
	alice := rawTasks(c.MCPURL, "alice-key")
	id := createTask(t, alice, "ops_sleep", map[string]any{"duration": "30s"})
	writeAtomically(t, policyPath, []byte(permitAll+`forbid (principal == User::"alice", action, resource == Tool::"ops_sleep");`+"\n"))
	testkit.Eventually(t, "the policy denying alice the task's tool", 10*time.Second, func() bool {
		a, err := alice.Send(t.Context(), "tasks/get", id, map[string]any{"taskId": id})
		return err == nil && a.Error != nil
	})
	never := "t1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	for _, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		answer := func(task string) string {
			params := map[string]any{"taskId": task}
			if method == "tasks/update" {
				params["inputResponses"] = map[string]any{"x": map[string]any{"action": "accept"}}
			}
			a, err := alice.Send(t.Context(), method, task, params)
			if err != nil || a.Error == nil {
				t.Fatalf("%s of %s: %v %s, want an error", method, task, err, a.Result)
			}
			return fmt.Sprint(a.Error.Code, " ", a.Error.Message)
		}
		if denied, missing := answer(id), answer(never); denied != missing {
			t.Errorf("%s: %q for the denied task, %q for one that never was", method, denied, missing)
		}
	}
}

// TestLegacyBackendTaskFollowsThePolicy: tasks/update of a task a
// 2025-11-25 backend runs (which takes no answers that way) is admitted
// as a request about the task's tool first: once the policy forbids its
// owner the tool, the answer is the one for a task that never was. It
// once said the backend takes no answers, telling the task apart.
func TestLegacyBackendTaskFollowsThePolicy(t *testing.T) {
	policyPath := filepath.Join(t.TempDir(), "policy.cedar")
	writeAtomically(t, policyPath, []byte(permitAll))
	c := harness.Start(t, harness.Options{Backends: []harness.Backend{{Name: "ops", Spec: "tasks: true\ntools:\n  - {name: sleep, behaviour: sleep}\n"}},
		Configure: func(cfg *config.Config) {
			withAggregatorIndexer(t, cfg)
			cfg.Aggregator.Backends[0].Protocol = harness.Legacy
			cfg.Aggregator.Authz.PolicyFile = policyPath
			cfg.Reload.Interval = config.Duration(200 * time.Millisecond)
			cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: "alice-key", Subject: "alice"}}}
		}})
	alice := rawTasks(c.MCPURL, "alice-key")
	id := createTask(t, alice, "ops_sleep", map[string]any{"duration": "60s"})
	update := func(id string) *mcpraw.Error {
		a, err := alice.Send(t.Context(), "tasks/update", id, map[string]any{"taskId": id, "inputResponses": map[string]any{"0.x": map[string]any{}}})
		if err != nil || a.Error == nil {
			t.Fatalf("tasks/update of %s: %v %s", id, err, a.Result)
		}
		return a.Error
	}
	if e := update(id); e.Code != -32602 || !strings.Contains(e.Message, "takes no answers") {
		t.Fatalf("tasks/update of the backend's task: %+v, want -32602 saying its backend takes no answers", e)
	}
	writeAtomically(t, policyPath, []byte(permitAll+`forbid (principal == User::"alice", action, resource == Tool::"ops_sleep");`+"\n"))
	testkit.Eventually(t, "alice's task hidden by the policy", 10*time.Second, func() bool {
		a, err := alice.Send(t.Context(), "tasks/get", id, map[string]any{"taskId": id})
		return err == nil && a.Error != nil && a.Error.Code == -32602
	})
	if forbidden, never := update(id), update("never"); forbidden.Code != never.Code || forbidden.Message != never.Message || string(forbidden.Data) != string(never.Data) {
		t.Fatalf("tasks/update: %+v for the task whose tool is forbidden, %+v for one that never was", forbidden, never)
	}
}

// TestBackendTaskWithAToolError: a task a 2025-11-25 backend runs whose
// call reports a tool error is, to the client, what the plain call
// answers: the result with isError, its content kept. That revision
// calls the backend's task failed and its tasks/result gives the result;
// Switchboard kept the status and, finding no error, failed the task
// with one of its own ("the backend's task failed without an error").
func TestBackendTaskWithAToolError(t *testing.T) {
	c := harness.Start(t, harness.Options{Backends: []harness.Backend{{Name: "ops", Spec: "tasks: true\ntools:\n  - {name: broken, behaviour: error, text: \"the widget is broken\"}\n"}},
		Configure: func(cfg *config.Config) {
			withAggregatorIndexer(t, cfg)
			cfg.Aggregator.Backends[0].Protocol = harness.Legacy
			cfg.Gateway.Auth = config.GatewayAuth{Mode: "apiKeys", APIKeys: []config.APIKey{{Key: "alice-key", Subject: "alice"}}}
		}})
	alice := rawTasks(c.MCPURL, "alice-key")
	id := createTask(t, alice, "ops_broken", map[string]any{})
	var got map[string]any
	testkit.Eventually(t, "the task ended", 20*time.Second, func() bool {
		got = taskResult(t)(alice.Send(t.Context(), "tasks/get", id, map[string]any{"taskId": id}))
		return got["status"] != "working"
	})
	result, _ := json.Marshal(got["result"])
	if got["status"] != "completed" || !strings.Contains(string(result), `"isError":true`) || !strings.Contains(string(result), "the widget is broken") {
		t.Fatalf("the task: %v; want completed with the tool's error result", got)
	}
	// A 2025-11-25 client's tasks/result answers as the call would.
	legacy := &mcpraw.Client{URL: c.MCPURL, Authorization: "Bearer alice-key", Capabilities: mcpraw.TasksCapabilities}
	if err := legacy.OpenSession(t.Context()); err != nil {
		t.Fatal(err)
	}
	made := taskResult(t)(legacy.Send(t.Context(), "tools/call", "", map[string]any{"name": "ops_broken", "arguments": map[string]any{}, "task": map[string]any{"ttl": 60000}}))
	task, _ := made["task"].(map[string]any)
	legacyID, _ := task["taskId"].(string)
	answer, err := legacy.Send(t.Context(), "tasks/result", "", map[string]any{"taskId": legacyID})
	if err != nil || answer.Error != nil || !strings.Contains(string(answer.Result), `"isError":true`) || !strings.Contains(string(answer.Result), "the widget is broken") {
		t.Fatalf("tasks/result of a 2025-11-25 client: %s %+v %v; want the tool's error result", answer.Result, answer.Error, err)
	}
}
