package console

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/browser"
	"github.com/switchboard-mcp/switchboard/test/mcpraw"
)

// hostileArgument is echoed into a task's result: the task's page must
// show it as text.
const hostileArgument = `</pre><script>document.title="owned"</script>`

// callAsTask sends a tools/call as an MCP client of the 2026-07-28 tasks
// extension does (go-sdk has no tasks), with an API key, and returns the
// task's id, failing when the answer is not a task.
func callAsTask(t *testing.T, url, key, tool string, args map[string]any) string {
	t.Helper()
	c := mcpraw.Client{URL: url, Authorization: "Bearer " + key, Capabilities: mcpraw.TasksCapabilities, Name: "console-tasks"}
	a, err := c.Send(t.Context(), "tools/call", tool, map[string]any{"name": tool, "arguments": args})
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		ResultType string `json:"resultType"`
		TaskID     string `json:"taskId"`
	}
	if a.Error != nil || json.Unmarshal(a.Result, &res) != nil || res.ResultType != "task" || res.TaskID == "" {
		t.Fatalf("tools/call %s as a task: HTTP %d, %s %v", tool, a.HTTPStatus, a.Result, a.Error)
	}
	return res.TaskID
}

// taskRow is one row of the tasks page.
type taskRow struct {
	ID, Title, Tool, Status string
}

// checkTasks: erin's tasks through the support server, made by her MCP
// client, are listed as ListTasks lists them to her, newest first, each
// with its status; the page of a completed one shows its result, hostile
// markup in it as text; the page of one still working says so.
func checkTasks(t *testing.T, s *stack, b *browser.Browser) {
	support := s.c.MCPURL + "/support"
	sleeping := callAsTask(t, support, erinKey, "tickets_sleep", map[string]any{"duration": "5m"})
	echoed := callAsTask(t, support, erinKey, "tickets_echo", map[string]any{"note": hostileArgument})
	asErin := &commonv1.Principal{Subject: "erin", Groups: []string{"eng"}}
	var result *aggregatorv1.Task
	testkit.Eventually(t, "erin's echo task completes", time.Minute, func() error {
		resp, err := s.aggregator.GetTask(t.Context(), &aggregatorv1.GetTaskRequest{Principal: asErin, Server: "support", TaskId: echoed})
		if err != nil {
			return err
		}
		if result = resp.GetTask(); result.GetStatus() != "completed" {
			return fmt.Errorf("status %q", result.GetStatus())
		}
		return nil
	})
	want, err := s.aggregator.ListTasks(t.Context(), &aggregatorv1.ListTasksRequest{Principal: asErin, Server: "support"})
	if err != nil || len(want.GetTasks()) != 2 || want.GetTasks()[0].GetTaskId() != echoed || want.GetTasks()[1].GetTaskId() != sleeping {
		t.Fatalf("ListTasks as erin on support: %v, %v; want the echo task, then the sleeping one", want, err)
	}

	b.Navigate(s.console + "/tasks")
	b.WaitText("h1", "Tasks")
	checkSkipLink(t, b)
	// Choose the support server with the arrow keys, then name erin.
	b.TabTo("#server", 20)
	b.Press(kbArrowDown)
	b.TabTo("#subject", 5)
	b.Type("erin")
	b.TabTo("#groups", 5)
	b.Type("eng")
	b.TabTo("#tasks-submit", 3)
	b.Press("\r")
	b.WaitText("#viewing", "erin")
	rows := browser.Eval[[]taskRow](b, `Array.from(document.querySelectorAll("#tasks tbody tr[data-task]"), r => ({
		ID: r.dataset.task, Title: r.querySelector("a").title, Tool: r.cells[1].innerText, Status: r.cells[2].innerText}))`)
	if len(rows) != len(want.GetTasks()) {
		t.Fatalf("the page lists %+v; ListTasks %v", rows, want.GetTasks())
	}
	for i, task := range want.GetTasks() {
		if r := rows[i]; r.ID != task.GetTaskId() || r.Title != task.GetTaskId() || r.Tool != task.GetTool() || r.Status != task.GetStatus() {
			t.Errorf("row %d: %+v; ListTasks: %s %s %s", i, r, task.GetTaskId(), task.GetTool(), task.GetStatus())
		}
	}
	b.CheckPhone("tasks")
	b.Screenshot("tasks")

	// The completed task's page, reached with the keyboard from its row.
	b.TabTo(fmt.Sprintf(`#tasks a[title=%q]`, echoed), 40)
	b.Press("\r")
	b.WaitText("#task-status", "completed")
	if id := b.Text("#task-id"); id != echoed {
		t.Fatalf("the task's page shows id %q, want %q", id, echoed)
	}
	var shown, stored any
	if err := json.Unmarshal([]byte(b.Text("#task-payload")), &shown); err != nil {
		t.Fatalf("the result shown is not the JSON it was: %v\n%s", err, b.Text("#task-payload"))
	}
	if err := json.Unmarshal([]byte(result.GetResultJson()), &stored); err != nil || !reflect.DeepEqual(shown, stored) {
		t.Fatalf("the page shows the result %v; GetTask %s (%v)", shown, result.GetResultJson(), err)
	}
	// The backend's JSON writes "<" as \u003c; decoded, the shown result
	// holds the markup, and the page runs none of it.
	var echo struct {
		StructuredContent struct {
			Arguments struct {
				Note string `json:"note"`
			} `json:"arguments"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal([]byte(b.Text("#task-payload")), &echo); err != nil || echo.StructuredContent.Arguments.Note != hostileArgument ||
		browser.Eval[int](b, `document.querySelectorAll("script").length`) != 0 || browser.Eval[string](b, `document.title`) == "owned" {
		t.Fatalf("the echoed markup is not shown as text (%v): %q", err, b.Text("#task-payload"))
	}
	b.CheckPhone("task-completed")
	b.Screenshot("task-completed")

	// Back to the list, then the sleeping task: still working.
	b.TabTo("#back", 20)
	b.Press("\r")
	b.WaitText("#viewing", "erin")
	b.TabTo(fmt.Sprintf(`#tasks a[title=%q]`, sleeping), 40)
	b.Press("\r")
	b.WaitText("#task-status", "working")
	if got := b.Texts("#payload"); len(got) != 0 {
		t.Errorf("a working task's page shows a payload: %q", got)
	}
	b.Screenshot("task-working")

	// Another principal sees none of erin's tasks.
	b.Navigate(s.console + "/tasks?server=support&subject=sue&groups=support")
	b.WaitText("#viewing", "sue")
	if ids := browser.Eval[[]string](b, `Array.from(document.querySelectorAll("#tasks tbody tr[data-task]"), r => r.dataset.task)`); slices.Contains(ids, echoed) || slices.Contains(ids, sleeping) {
		t.Errorf("sue's tasks include erin's: %v", ids)
	}
}
