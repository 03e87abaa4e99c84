package edge

import (
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
)

// tasksMeta is a valid Modern _meta whose client declares the tasks
// extension.
const tasksMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}`

// isoMillis is an RFC 3339 UTC timestamp with milliseconds.
var isoMillis = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

// missingTasksData is the data of -32021 for the tasks extension.
const missingTasksData = `{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`

// keysOf lists the members of a result, sorted.
func keysOf(m map[string]json.RawMessage) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// jsonEqual reports whether two JSON texts hold the same value.
func jsonEqual(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// createModernTask calls beta_job at url as a client that takes tasks and
// returns the flat CreateTaskResult.
func createModernTask(t *testing.T, url string) map[string]json.RawMessage {
	t.Helper()
	resp := send(t, http.MethodPost, url, modernHeaders("tools/call", "Mcp-Name", "beta_job"),
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+tasksMeta+`,"name":"beta_job","arguments":{}}}`)
	_, res, rerr := resp.rpc(t)
	if resp.status != http.StatusOK || rerr != nil {
		t.Fatalf("tools/call as a task: %d %s", resp.status, resp.body)
	}
	return res
}

func taskIDOf(t *testing.T, res map[string]json.RawMessage) string {
	t.Helper()
	var id string
	if json.Unmarshal(res["taskId"], &id) != nil || id == "" {
		t.Fatalf("no taskId in %v", keysOf(res))
	}
	return id
}

// TestModernTaskCreation: a tools/call from a client that declares the
// tasks extension carries a TaskRequest to the aggregator at the route's
// server, and a call that became a task is a flat CreateTaskResult; a
// client without the extension gets no task, whatever params.task says.
func TestModernTaskCreation(t *testing.T) {
	b := startBackends(t)
	_, srv := startGatewayWith(t, b, testGatewayConfig(b), func(d *Deps) {
		d.Servers = []config.Server{{Name: "beta", Backends: []string{"beta"}}}
	})

	discover := send(t, http.MethodPost, srv.URL+"/mcp", modernHeaders("server/discover"), `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+modernMeta+`}}`)
	_, res, _ := discover.rpc(t)
	var caps map[string]json.RawMessage
	_ = json.Unmarshal(res["capabilities"], &caps)
	if !jsonEqual(t, caps["extensions"], json.RawMessage(`{"io.modelcontextprotocol/tasks":{}}`)) || caps["tasks"] != nil {
		t.Fatalf("discover capabilities: %s", res["capabilities"])
	}

	for path, server := range map[string]string{"/mcp": "", "/mcp/raw": "", "/mcp/beta": "beta"} {
		created := createModernTask(t, srv.URL+path)
		if got := keysOf(created); !slices.Equal(got, []string{"_meta", "createdAt", "lastUpdatedAt", "pollIntervalMs", "resultType", "status", "taskId", "ttlMs"}) {
			t.Fatalf("%s: CreateTaskResult members %v", path, got)
		}
		if string(created["resultType"]) != `"task"` || string(created["status"]) != `"working"` ||
			string(created["ttlMs"]) != "600000" || string(created["pollIntervalMs"]) != "20" {
			t.Errorf("%s: CreateTaskResult %v", path, created)
		}
		for _, ts := range []string{"createdAt", "lastUpdatedAt"} {
			var v string
			if json.Unmarshal(created[ts], &v) != nil || !isoMillis.MatchString(v) || v != "2026-07-28T10:30:00.123Z" {
				t.Errorf("%s: %s = %s", path, ts, created[ts])
			}
		}
		calls, _, _, _, _ := b.taskRequests()
		last := calls[len(calls)-1]
		if last.GetTask() == nil || last.GetTask().GetTtlMs() != 0 || last.GetServer() != server || last.GetPrincipal().GetSubject() != "alice" {
			t.Errorf("%s: the aggregator got %v", path, last)
		}
	}

	// The task RPCs go to the route's server too, and a task is found
	// only through the server it was created at.
	id := taskIDOf(t, createModernTask(t, srv.URL+"/mcp/beta"))
	if resp := modernTaskRequest(t, srv.URL+"/mcp/beta", "tasks/get", id, ""); resp.status != http.StatusOK {
		t.Errorf("tasks/get at /mcp/beta: %d %s", resp.status, resp.body)
	}
	_, gets, _, _, _ := b.taskRequests()
	if last := gets[len(gets)-1]; last.GetServer() != "beta" || last.GetTaskId() != id {
		t.Errorf("GetTask at /mcp/beta got %v", last)
	}
	if resp := modernTaskRequest(t, srv.URL+"/mcp", "tasks/get", id, ""); resp.status != http.StatusBadRequest {
		t.Errorf("tasks/get of /mcp/beta's task at /mcp: %d %s", resp.status, resp.body)
	}

	// Without the extension, or with only a Legacy params.task, no task
	// is asked for and the call answers at once.
	for name, params := range map[string]string{
		"no extension":           modernMeta + `,"name":"beta_job"`,
		"Legacy params.task too": modernMeta + `,"name":"beta_job","task":{"ttl":60000,"pollInterval":100}`,
	} {
		resp := send(t, http.MethodPost, srv.URL+"/mcp", modernHeaders("tools/call", "Mcp-Name", "beta_job"), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{`+params+`}}`)
		_, res, rerr := resp.rpc(t)
		if resp.status != http.StatusOK || rerr != nil || string(res["resultType"]) != `"complete"` || res["taskId"] != nil || res["content"] == nil {
			t.Errorf("%s: %d %s", name, resp.status, resp.body)
		}
		calls, _, _, _, _ := b.taskRequests()
		if task := calls[len(calls)-1].GetTask(); task != nil {
			t.Errorf("%s: the aggregator got a task request %v", name, task)
		}
	}

	// A tool that runs only as a task, called by a client that cannot
	// take one: -32021 naming the extension.
	resp := send(t, http.MethodPost, srv.URL+"/mcp", modernHeaders("tools/call", "Mcp-Name", "beta_batch"), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{`+modernMeta+`,"name":"beta_batch"}}`)
	if _, _, rerr := resp.rpc(t); resp.status != http.StatusBadRequest || rerr == nil || rerr.Code != wire.CodeMissingCapability || !jsonEqual(t, mustJSON(t, rerr.Data), json.RawMessage(missingTasksData)) {
		t.Fatalf("task-only tool without the extension: %d %s", resp.status, resp.body)
	}
}

// modernTaskRequest sends a tasks method for id at url, as a client that
// declares the extension, with Mcp-Name id.
func modernTaskRequest(t *testing.T, url, method, id, extra string) wireResponse {
	t.Helper()
	return send(t, http.MethodPost, url, modernHeaders(method, "Mcp-Name", id),
		`{"jsonrpc":"2.0","id":7,"method":"`+method+`","params":{`+tasksMeta+`,"taskId":"`+id+`"`+extra+`}}`)
}

// TestModernTaskMethods: tasks/get, tasks/update and tasks/cancel are
// gated on the extension before the task id is looked at, need Mcp-Name
// equal to the task id, and answer as SEP-2663 has it; tasks/result and
// tasks/list are not Modern methods.
func TestModernTaskMethods(t *testing.T) {
	b := startBackends(t)
	_, srv := startGateway(t, b, testGatewayConfig(b))
	url := srv.URL + "/mcp"
	id := taskIDOf(t, createModernTask(t, url))

	t.Run("gated", func(t *testing.T) {
		for _, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
			// No taskId and no Mcp-Name: the capability is checked first.
			resp := send(t, http.MethodPost, url, modernHeaders(method), `{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":{`+modernMeta+`}}`)
			_, _, rerr := resp.rpc(t)
			if resp.status != http.StatusBadRequest || rerr == nil || rerr.Code != wire.CodeMissingCapability || !jsonEqual(t, mustJSON(t, rerr.Data), json.RawMessage(missingTasksData)) {
				t.Errorf("%s without the extension: %d %s", method, resp.status, resp.body)
			}
		}
		_, gets, _, _, _ := b.taskRequests()
		if len(gets) != 0 {
			t.Errorf("a refused request reached the aggregator: %v", gets)
		}
	})

	t.Run("Mcp-Name", func(t *testing.T) {
		for name, header := range map[string][]string{"missing": {"Mcp-Name", ""}, "another task": {"Mcp-Name", "t1.other"}} {
			resp := send(t, http.MethodPost, url, modernHeaders("tasks/get", header...), `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{`+tasksMeta+`,"taskId":"`+id+`"}}`)
			if _, _, rerr := resp.rpc(t); resp.status != http.StatusBadRequest || rerr == nil || rerr.Code != wire.CodeHeaderMismatch || !strings.Contains(rerr.Message, "Mcp-Name") {
				t.Errorf("%s Mcp-Name: %d %s", name, resp.status, resp.body)
			}
		}
		resp := send(t, http.MethodPost, url, modernHeaders("tasks/get"), `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{`+tasksMeta+`}}`)
		if _, _, rerr := resp.rpc(t); resp.status != http.StatusBadRequest || rerr == nil || rerr.Code != wire.CodeInvalidParams || !strings.Contains(rerr.Message, "taskId") {
			t.Errorf("no taskId: %d %s", resp.status, resp.body)
		}
	})

	t.Run("get by status", func(t *testing.T) {
		common := []string{"_meta", "createdAt", "lastUpdatedAt", "pollIntervalMs", "resultType", "status", "taskId", "ttlMs"}
		cases := []struct {
			name   string
			change func(*aggregatorv1.Task)
			detail string // the member the status adds, "" for none
			want   string // its value
		}{
			{"working", func(*aggregatorv1.Task) {}, "", ""},
			{"input_required", func(t *aggregatorv1.Task) {
				t.Status, t.InputRequestsJson = "input_required", `{"ok":{"method":"elicitation/create","params":{"message":"sure?"}}}`
			}, "inputRequests", `{"ok":{"method":"elicitation/create","params":{"message":"sure?"}}}`},
			{"completed", func(t *aggregatorv1.Task) {
				t.Status, t.InputRequestsJson = "completed", ""
				t.ResultJson = `{"content":[{"type":"text","text":"42"}],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"x"},"io.modelcontextprotocol/serverInfo":{"name":"backend"},"trace":"kept"}}`
			}, "result", `{"content":[{"type":"text","text":"42"}],"_meta":{"trace":"kept"}}`},
			{"failed", func(t *aggregatorv1.Task) {
				t.Status, t.StatusMessage, t.ResultJson = "failed", "the backend gave up", ""
				t.ErrorJson = `{"code":-32602,"message":"bad input","data":{"field":"a"}}`
			}, "error", `{"code":-32602,"message":"bad input","data":{"field":"a"}}`},
		}
		for _, tc := range cases {
			b.setTask(id, tc.change)
			resp := modernTaskRequest(t, url, "tasks/get", id, "")
			_, res, rerr := resp.rpc(t)
			if resp.status != http.StatusOK || rerr != nil {
				t.Fatalf("%s: %d %s", tc.name, resp.status, resp.body)
			}
			want := slices.Clone(common)
			if tc.name == "failed" {
				want = append(want, "statusMessage")
			}
			if tc.detail != "" {
				want = append(want, tc.detail)
			}
			slices.Sort(want)
			if got := keysOf(res); !slices.Equal(got, want) {
				t.Errorf("%s: members %v, want %v", tc.name, got, want)
			}
			if string(res["resultType"]) != `"complete"` || string(res["taskId"]) != `"`+id+`"` || string(res["status"]) != `"`+tc.name+`"` {
				t.Errorf("%s: %s", tc.name, resp.body)
			}
			if tc.detail != "" && !jsonEqual(t, res[tc.detail], json.RawMessage(tc.want)) {
				t.Errorf("%s: %s = %s, want %s", tc.name, tc.detail, res[tc.detail], tc.want)
			}
		}
		_, gets, _, _, _ := b.taskRequests()
		last := gets[len(gets)-1]
		if last.GetServer() != "" || last.GetPrincipal().GetSubject() != "alice" || !strings.Contains(last.GetContext().GetClientCapabilitiesJson(), wire.TasksExtension) {
			t.Errorf("GetTask request %v", last)
		}
	})

	t.Run("update and cancel acknowledge only", func(t *testing.T) {
		b.setTask(id, func(t *aggregatorv1.Task) { t.Status, t.ErrorJson = "input_required", "" })
		resp := modernTaskRequest(t, url, "tasks/update", id, `,"inputResponses":{"ok":{"action":"accept","content":{}}}`)
		if _, res, rerr := resp.rpc(t); resp.status != http.StatusOK || rerr != nil || !slices.Equal(keysOf(res), []string{"_meta", "resultType"}) || string(res["resultType"]) != `"complete"` {
			t.Errorf("tasks/update: %d %s", resp.status, resp.body)
		}
		_, _, updates, _, _ := b.taskRequests()
		if len(updates) != 1 || updates[0].GetTaskId() != id || !jsonEqual(t, json.RawMessage(updates[0].GetInputResponsesJson()), json.RawMessage(`{"ok":{"action":"accept","content":{}}}`)) {
			t.Errorf("UpdateTask got %v", updates)
		}
		resp = modernTaskRequest(t, url, "tasks/update", id, "")
		if _, _, rerr := resp.rpc(t); resp.status != http.StatusBadRequest || rerr == nil || rerr.Code != wire.CodeInvalidParams || !strings.Contains(rerr.Message, "inputResponses") {
			t.Errorf("tasks/update without inputResponses: %d %s", resp.status, resp.body)
		}

		resp = modernTaskRequest(t, url, "tasks/cancel", id, "")
		if _, res, rerr := resp.rpc(t); resp.status != http.StatusOK || rerr != nil || !slices.Equal(keysOf(res), []string{"_meta", "resultType"}) {
			t.Errorf("tasks/cancel: %d %s", resp.status, resp.body)
		}
		_, res, _ := modernTaskRequest(t, url, "tasks/get", id, "").rpc(t)
		if string(res["status"]) != `"cancelled"` {
			t.Errorf("after tasks/cancel the task is %s", res["status"])
		}
	})

	t.Run("unknown task", func(t *testing.T) {
		for _, method := range []string{"tasks/get", "tasks/cancel"} {
			resp := modernTaskRequest(t, url, method, "t1.nosuch", "")
			if _, _, rerr := resp.rpc(t); resp.status != http.StatusBadRequest || rerr == nil || rerr.Code != wire.CodeInvalidParams {
				t.Errorf("%s of an unknown task: %d %s", method, resp.status, resp.body)
			}
		}
		// Another principal's task is unknown too.
		h := modernHeaders("tasks/get", "Mcp-Name", id, "Authorization", "Bearer bob-key")
		resp := send(t, http.MethodPost, url, h, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{`+tasksMeta+`,"taskId":"`+id+`"}}`)
		if _, _, rerr := resp.rpc(t); resp.status != http.StatusBadRequest || rerr == nil || rerr.Code != wire.CodeInvalidParams {
			t.Errorf("another's task: %d %s", resp.status, resp.body)
		}
	})

	t.Run("no tasks/result or tasks/list", func(t *testing.T) {
		for method, params := range map[string]string{"tasks/result": `,"taskId":"` + id + `"`, "tasks/list": ``} {
			resp := send(t, http.MethodPost, url, modernHeaders(method, "Mcp-Name", id), `{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":{`+tasksMeta+params+`}}`)
			if _, _, rerr := resp.rpc(t); resp.status != http.StatusNotFound || rerr == nil || rerr.Code != wire.CodeMethodNotFound {
				t.Errorf("%s: %d %s", method, resp.status, resp.body)
			}
		}
	})
}

// TestOptimizerCallToolBecomesATask: call_tool passes the client's task
// request on, so a call of a task tool through the optimizer view is a
// task too.
func TestOptimizerCallToolBecomesATask(t *testing.T) {
	b := startBackends(t)
	_, srv := startGateway(t, b, testGatewayConfig(b))
	resp := send(t, http.MethodPost, srv.URL+"/mcp/optimized", modernHeaders("tools/call", "Mcp-Name", "call_tool"),
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+tasksMeta+`,"name":"call_tool","arguments":{"tool_name":"beta_job","parameters":{}}}}`)
	_, res, rerr := resp.rpc(t)
	if resp.status != http.StatusOK || rerr != nil || string(res["resultType"]) != `"task"` || res["taskId"] == nil {
		t.Fatalf("call_tool of a task tool: %d %s", resp.status, resp.body)
	}
	calls, _, _, _, _ := b.taskRequests()
	if len(calls) != 1 || calls[0].GetName() != "beta_job" || calls[0].GetTask() == nil {
		t.Fatalf("the aggregator got %v", calls)
	}
}
