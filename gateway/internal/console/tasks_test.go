package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// The fake aggregator's tasks: alice has one of each status (and a
// completed one whose result is too big to show whole) through /mcp, bob
// one through forecast. Each task is its owner's at its server only, as
// the aggregator promises; ListTasks pages two at a time, newest first,
// so that the pager is exercised. The texts are hostile markup.
const (
	hostileMessage = `Running <b>step</b> 2 of "3"`
	hostileResult  = `</pre><script>alert(1)</script>`
	hostileError   = `backend <img src=x onerror=alert(1)> down`
	hostileRequest = `Proceed <i>now</i>?`
	tasksPerPage   = 2
)

// taskID is a task id of the aggregator's form ("t1." and 43 characters
// of base64url) that starts with what names it in the test.
func taskID(name string) string {
	return "t1." + name + strings.Repeat("A", 43-len(name))
}

// heldTask is a task of the fake and whose it is.
type heldTask struct {
	task            *aggregatorv1.Task
	subject, server string
}

// testTasks is the fake's store of tasks and the task requests it got.
type testTasks struct {
	held []heldTask // newest first

	mu    sync.Mutex
	lists []*aggregatorv1.ListTasksRequest
	gets  []*aggregatorv1.GetTaskRequest
	// callers are the principals the requests were admitted as (the
	// service authentication's, from the request's principal).
	callers []*commonv1.Principal
}

// bigResult is a completed result past maxShownBytes, whose text is
// multi-byte characters so that a cut could split one.
var bigResult = `{"content":[{"type":"text","text":"` + strings.Repeat("é", maxShownBytes) + `"}]}`

func newTestTasks() *testTasks {
	created := time.Date(2026, 7, 28, 10, 0, 0, 0, time.UTC)
	mk := func(name, status, tool string, age int) *aggregatorv1.Task {
		at := timestamppb.New(created.Add(-time.Duration(age) * time.Minute))
		return &aggregatorv1.Task{TaskId: taskID(name), Status: status, Tool: tool, CreatedAt: at, LastUpdatedAt: at, TtlMs: 3_600_000, PollIntervalMs: 1000}
	}
	working := mk("working", "working", "alpha_echo", 0)
	working.StatusMessage = hostileMessage + strings.Repeat(" and more", 40)
	done := mk("completed", "completed", "alpha_echo", 1)
	done.ResultJson = `{"content":[{"type":"text","text":"` + strings.ReplaceAll(hostileResult, `"`, `\"`) + `"}],"isError":true}`
	failed := mk("failed", "failed", "alpha_time", 2)
	failed.StatusMessage = "the call failed"
	failed.ErrorJson = `{"code":-32603,"message":"` + hostileError + `"}`
	input := mk("input", "input_required", "alpha_echo", 3)
	input.InputRequestsJson = `{"0.confirm":{"method":"elicitation/create","params":{"message":"` + hostileRequest + `"}}}`
	cancelled := mk("cancelled", "cancelled", "alpha_echo", 4)
	cancelled.StatusMessage = "cancelled by the client"
	big := mk("big", "completed", "alpha_echo", 5)
	big.ResultJson = bigResult
	forecast := mk("forecast", "working", "alpha_time", 0)
	return &testTasks{held: []heldTask{
		{working, "alice", ""}, {done, "alice", ""}, {failed, "alice", ""}, {input, "alice", ""}, {cancelled, "alice", ""}, {big, "alice", ""},
		{forecast, "bob", "forecast"},
	}}
}

// serve makes agg answer the task RPCs from ts.
func (ts *testTasks) serve(agg *testkit.FakeAggregator) {
	agg.ListTasksFunc = ts.list
	agg.GetTaskFunc = ts.get
}

// caller records the principal the request was admitted as.
func (ts *testTasks) caller(ctx context.Context) *commonv1.Principal {
	p := svcauth.PrincipalFrom(ctx)
	ts.mu.Lock()
	ts.callers = append(ts.callers, p)
	ts.mu.Unlock()
	return p
}

// list pages through the caller's tasks in the server, without results.
func (ts *testTasks) list(ctx context.Context, req *aggregatorv1.ListTasksRequest) (*aggregatorv1.ListTasksResponse, error) {
	ts.mu.Lock()
	ts.lists = append(ts.lists, proto.CloneOf(req))
	ts.mu.Unlock()
	p := ts.caller(ctx)
	var mine []*aggregatorv1.Task
	for _, h := range ts.held {
		if h.subject == p.GetSubject() && h.server == req.GetServer() {
			t := proto.CloneOf(h.task)
			t.ResultJson, t.ErrorJson, t.InputRequestsJson = "", "", ""
			mine = append(mine, t)
		}
	}
	from := 0
	if c := req.GetCursor(); c != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(c, "tasks:"))
		if err != nil || !strings.HasPrefix(c, "tasks:") || n > len(mine) {
			return nil, status.Error(codes.InvalidArgument, "invalid cursor")
		}
		from = n
	}
	to := min(from+tasksPerPage, len(mine))
	resp := &aggregatorv1.ListTasksResponse{Tasks: mine[from:to]}
	if to < len(mine) {
		resp.NextCursor = "tasks:" + strconv.Itoa(to)
	}
	return resp, nil
}

// get reads one of the caller's tasks in the server.
func (ts *testTasks) get(ctx context.Context, req *aggregatorv1.GetTaskRequest) (*aggregatorv1.GetTaskResponse, error) {
	ts.mu.Lock()
	ts.gets = append(ts.gets, proto.CloneOf(req))
	ts.mu.Unlock()
	p := ts.caller(ctx)
	for _, h := range ts.held {
		if h.task.GetTaskId() == req.GetTaskId() && h.subject == p.GetSubject() && h.server == req.GetServer() {
			return &aggregatorv1.GetTaskResponse{Task: h.task}, nil
		}
	}
	return nil, status.Error(codes.NotFound, "task not found")
}

// requests returns the task requests so far.
func (ts *testTasks) requests() ([]*aggregatorv1.ListTasksRequest, []*aggregatorv1.GetTaskRequest, []*commonv1.Principal) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return slices.Clone(ts.lists), slices.Clone(ts.gets), slices.Clone(ts.callers)
}

// samePrincipal: a and b are one principal (groups are a set, which the
// service authentication sorts).
func samePrincipal(a, b *commonv1.Principal) bool {
	return a.GetSubject() == b.GetSubject() && slices.Equal(slices.Sorted(slices.Values(a.GetGroups())), slices.Sorted(slices.Values(b.GetGroups())))
}

// nextLink is the href of the page's "Next page" link, "" on the last.
func nextLink(body string) string {
	i := strings.Index(body, `rel="next" href="`)
	if i < 0 {
		return ""
	}
	rest := body[i+len(`rel="next" href="`):]
	return strings.ReplaceAll(rest[:strings.IndexByte(rest, '"')], "&amp;", "&")
}

// listedTasks are the ids of the rows of a tasks page, in order.
func listedTasks(body string) []string {
	var ids []string
	for _, part := range strings.Split(body, `<tr data-task="`)[1:] {
		ids = append(ids, part[:strings.IndexByte(part, '"')])
	}
	return ids
}

func TestTasksListAsPrincipal(t *testing.T) {
	tc := startConsole(t, nil, nil)
	c := loggedIn(t, tc)
	q := url.Values{"subject": {"alice"}, "groups": {"staff\nops"}}
	code, body, h := get(t, c, tc.srv.URL+"/console/tasks?"+q.Encode())
	if code != http.StatusOK {
		t.Fatalf("tasks as alice: %d\n%s", code, body)
	}
	checkSecurityHeaders(t, "tasks", h)
	lists, _, callers := tc.tasks.requests()
	if len(lists) != 1 || len(callers) != 1 {
		t.Fatalf("ListTasks requests %v, callers %v; want one", lists, callers)
	}
	want := &commonv1.Principal{Subject: "alice", Groups: []string{"staff", "ops"}}
	if r := lists[0]; !proto.Equal(r.GetPrincipal(), want) || r.GetServer() != "" || r.GetCursor() != "" || r.GetPageSize() != taskPageSize {
		t.Fatalf("ListTasks request %v; want alice of staff and ops on /mcp, the first page of %d", r, taskPageSize)
	}
	if !samePrincipal(callers[0], want) {
		t.Fatalf("ListTasks was admitted as %v, not the viewed principal", callers[0])
	}
	// The first page: the newest two, each with its id shortened and
	// whole (the link's title, the row's data), tool, status, message,
	// times and TTL; the hostile status message escaped and cut.
	working := taskID("working")
	for _, want := range []string{
		`<tr data-task="` + working + `">`, `title="` + working + `"`, "<code>t1.workingA…</code>",
		`href="/console/task?groups=staff&amp;groups=ops&amp;id=` + working + `&amp;server=&amp;subject=alice"`,
		"<code>alpha_echo</code>", `<td class="status-working">working</td>`, `<td class="status-completed">completed</td>`,
		"Running &lt;b&gt;step&lt;/b&gt; 2 of &#34;3&#34; and more", "…</td>",
		"2026-07-28 10:00:00Z", "2026-07-28 09:59:00Z", "<td>1h0m0s</td>", "Tasks of <strong>alice (groups staff; ops)</strong> made through <strong>/mcp</strong>",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the first page lacks %q", want)
		}
	}
	if strings.Contains(body, "<b>step</b>") || strings.Contains(body, strings.Repeat(" and more", 40)) {
		t.Errorf("the status message is not escaped, or not cut:\n%s", body)
	}
	if strings.Contains(body, "First page") {
		t.Errorf("the first page links to the first page")
	}
	// Following the pager lists every task of alice's once, newest first.
	var all []string
	next := "/console/tasks?" + q.Encode()
	for range 10 {
		_, body, _ = get(t, c, tc.srv.URL+next)
		all = append(all, listedTasks(body)...)
		if next = nextLink(body); next == "" {
			break
		}
		if !strings.Contains(next, "cursor=tasks%3A") {
			t.Fatalf("the next link %q carries no cursor", next)
		}
	}
	wantAll := []string{taskID("working"), taskID("completed"), taskID("failed"), taskID("input"), taskID("cancelled"), taskID("big")}
	if !slices.Equal(all, wantAll) {
		t.Fatalf("paged through %v, want %v", all, wantAll)
	}
	if !strings.Contains(body, "First page") {
		t.Errorf("a later page does not link to the first")
	}
	// The pager started again from the first page.
	lists, _, callers = tc.tasks.requests()
	for i, r := range lists[1:] {
		wantCursor := ""
		if i > 0 {
			wantCursor = "tasks:" + strconv.Itoa(i*tasksPerPage)
		}
		if !proto.Equal(r.GetPrincipal(), want) || !samePrincipal(callers[i+1], want) || r.GetCursor() != wantCursor {
			t.Errorf("page %d asked %v as %v", i+1, r, callers[i+1])
		}
	}

	// Another principal, another server: bob's task through forecast, and
	// none of alice's.
	_, body, _ = get(t, c, tc.srv.URL+"/console/tasks?server=forecast&subject=bob")
	if got := listedTasks(body); !slices.Equal(got, []string{taskID("forecast")}) || !strings.Contains(body, "made through <strong>/mcp/forecast</strong>") {
		t.Fatalf("bob on forecast sees %v:\n%s", got, body)
	}
	if lists, _, _ := tc.tasks.requests(); lists[len(lists)-1].GetServer() != "forecast" || lists[len(lists)-1].GetPrincipal().GetSubject() != "bob" {
		t.Fatalf("the forecast listing asked %v", lists[len(lists)-1])
	}
	if _, body, _ = get(t, c, tc.srv.URL+"/console/tasks?subject=carol"); len(listedTasks(body)) != 0 || !strings.Contains(body, "This principal has no task here.") {
		t.Fatalf("carol sees tasks:\n%s", body)
	}
	if !strings.Contains(tc.log.String(), `msg="console: tasks viewed as" operator="operator key 2" subject=alice groups="[staff ops]" server=/mcp`) {
		t.Errorf("no log line names the operator and the principal:\n%s", tc.log.String())
	}

	// Bad forms are refused before any call.
	before, _, _ := tc.tasks.requests()
	for name, path := range map[string]string{
		"unknown server":  "/console/tasks?server=nowhere",
		"overlong cursor": "/console/tasks?cursor=" + strings.Repeat("x", maxTaskCursorBytes+1),
	} {
		if code, _, _ := get(t, c, tc.srv.URL+path); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", name, code)
		}
	}
	if after, _, _ := tc.tasks.requests(); len(after) != len(before) {
		t.Errorf("a refused form still called ListTasks")
	}
	if code, body, _ := get(t, c, tc.srv.URL+"/console/tasks?subject=alice&cursor=bogus"); code != http.StatusBadRequest || !strings.Contains(body, "invalid cursor") {
		t.Errorf("a cursor the aggregator refuses: %d\n%s", code, body)
	}
}

func TestTaskDetailPerStatus(t *testing.T) {
	tc := startConsole(t, nil, nil)
	c := loggedIn(t, tc)
	alice := url.Values{"subject": {"alice"}, "groups": {"staff"}}
	detail := func(name string) (int, string) {
		t.Helper()
		q := url.Values{"id": {taskID(name)}}
		for k, v := range alice {
			q[k] = v
		}
		code, body, _ := get(t, c, tc.srv.URL+"/console/task?"+q.Encode())
		return code, body
	}
	for _, tt := range []struct {
		name string
		want []string
		// absent must not be on the page: raw hostile markup, or a
		// section of another status.
		absent []string
	}{
		{"working", []string{`<dd id="task-status" class="status-working">working</dd>`, "Running &lt;b&gt;step&lt;/b&gt; 2 of &#34;3&#34; and more and more"},
			[]string{"<b>step</b>", `id="payload"`}},
		{"completed", []string{`<h2 id="payload">Result</h2>`, `id="tool-error"`, `&lt;/pre&gt;&lt;script&gt;alert(1)&lt;/script&gt;`, `&#34;isError&#34;: true`},
			[]string{hostileResult, "<script>", `id="payload-cut"`}},
		{"failed", []string{`<h2 id="payload">Error</h2>`, "Error -32603: <span class=\"message\">backend &lt;img src=x onerror=alert(1)&gt; down</span>", `&#34;code&#34;: -32603`},
			[]string{"<img", `id="tool-error"`}},
		{"input", []string{`<h2 id="payload">Input requests waiting for an answer</h2>`, `<p id="task-requests">1 request(s)`, `&#34;0.confirm&#34;`, "Proceed &lt;i&gt;now&lt;/i&gt;?"},
			[]string{"<i>now</i>"}},
		{"cancelled", []string{`class="status-cancelled">cancelled</dd>`, "cancelled by the client"}, []string{`id="payload"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, body := detail(tt.name)
			if code != http.StatusOK {
				t.Fatalf("%d\n%s", code, body)
			}
			for _, want := range append(tt.want, `<code id="task-id">`+taskID(tt.name)+`</code>`, "1h0m0s (kept until ", "<dd>1s</dd>",
				`href="/console/tasks?groups=staff&amp;server=&amp;subject=alice"`) {
				if !strings.Contains(body, want) {
					t.Errorf("the page lacks %q:\n%s", want, body)
				}
			}
			for _, bad := range tt.absent {
				if strings.Contains(body, bad) {
					t.Errorf("the page holds %q:\n%s", bad, body)
				}
			}
		})
	}
	_, gets, callers := tc.tasks.requests()
	if len(gets) != 5 {
		t.Fatalf("%d GetTask requests, want 5", len(gets))
	}
	for i, g := range gets {
		if g.GetPrincipal().GetSubject() != "alice" || !slices.Equal(g.GetPrincipal().GetGroups(), []string{"staff"}) || g.GetServer() != "" ||
			callers[i].GetSubject() != "alice" {
			t.Errorf("GetTask request %v, admitted as %v; want alice of staff on /mcp", g, callers[i])
		}
	}
	if !strings.Contains(tc.log.String(), `msg="console: task viewed as" operator="operator key 2" subject=alice groups=[staff] server=/mcp task=`+taskID("working")) {
		t.Errorf("no log line names the operator, the principal and the task:\n%s", tc.log.String())
	}

	// A result past the bound is cut on a character boundary, and says so.
	code, body := detail("big")
	start := strings.Index(body, `<pre id="task-payload"`)
	end := strings.Index(body, "</pre>")
	if code != http.StatusOK || start < 0 || end < start || !strings.Contains(body, `id="payload-cut"`) {
		t.Fatalf("the big result: %d\n%.2000s", code, body)
	}
	if shownBytes := end - start; shownBytes > maxShownBytes+200 || !utf8.ValidString(body[start:end]) {
		t.Errorf("the big result shows %d bytes (bound %d), valid UTF-8 %v", shownBytes, maxShownBytes, utf8.ValidString(body[start:end]))
	}
	if !strings.Contains(body, fmt.Sprintf("the whole is %d bytes", len(bigResult))) {
		t.Errorf("the cut does not give the whole size %d", len(bigResult))
	}

	// Another principal's task, or one through another server, is not
	// found, as the aggregator answers; a bad id is refused unasked.
	for name, q := range map[string]url.Values{
		"another principal's":    {"id": {taskID("working")}, "subject": {"bob"}},
		"through another server": {"id": {taskID("working")}, "subject": {"alice"}, "server": {"forecast"}},
	} {
		if code, body, _ := get(t, c, tc.srv.URL+"/console/task?"+q.Encode()); code != http.StatusNotFound || !strings.Contains(body, "GetTask failed (NotFound)") {
			t.Errorf("%s task: %d\n%s", name, code, body)
		}
	}
	_, before, _ := tc.tasks.requests()
	for name, q := range map[string]string{"no id": "", "an overlong id": "id=" + strings.Repeat("t", maxTaskIDBytes+1), "a bad server": "id=x&server=nowhere"} {
		if code, _, _ := get(t, c, tc.srv.URL+"/console/task?"+q); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", name, code)
		}
	}
	if _, after, _ := tc.tasks.requests(); len(after) != len(before) {
		t.Errorf("a refused id still called GetTask")
	}
}

func TestTasksNeedAnOperatorSession(t *testing.T) {
	tc := startConsole(t, nil, nil)
	paths := []string{"/console/tasks?subject=alice", "/console/task?subject=alice&id=" + taskID("completed")}
	base := mustURL(t, tc.srv.URL+"/console/")
	// No session, a forged one, and a client that failed to log in.
	forged := tc.client(t)
	forged.Jar.SetCookies(base, []*http.Cookie{{Name: sessionCookie, Value: randomToken(), Path: "/console/"}})
	refused := tc.client(t)
	if code, _ := tc.login(t, refused, "not-an-operator-key"); code != http.StatusUnauthorized {
		t.Fatalf("a wrong key: %d", code)
	}
	for name, c := range map[string]*http.Client{"no session": tc.client(t), "a forged session": forged, "a refused login": refused} {
		for _, p := range paths {
			code, body, h := get(t, c, tc.srv.URL+p)
			if code != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/console/login") {
				t.Errorf("%s, GET %s: %d to %q", name, p, code, h.Get("Location"))
			}
			if strings.Contains(body, "alpha_echo") || strings.Contains(body, "isError") {
				t.Errorf("%s, GET %s shows task data: %s", name, p, body)
			}
		}
	}
	if lists, gets, _ := tc.tasks.requests(); len(lists)+len(gets) != 0 || tc.agg.Calls("ListTasks")+tc.agg.Calls("GetTask") != 0 {
		t.Fatalf("the aggregator was asked about tasks without an operator: %v %v", lists, gets)
	}
}
