package console

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/textcut"
)

// The tasks pages read a principal's tasks as that principal's MCP client
// would (ListTasks, GetTask with the principal and the server asserted,
// like the catalog's lists). They only read: the console's credential is
// allowed neither UpdateTask nor CancelTask, so that an operator's session
// can never act on a task in a user's name.

const (
	// taskPageSize is the tasks listed per page (ListTasks' default).
	taskPageSize = 50
	// maxTaskCursorBytes is the aggregator's bound on a ListTasks cursor.
	maxTaskCursorBytes = 1024
	// maxTaskIDBytes is the aggregator's bound on a task id.
	maxTaskIDBytes = 128
	// shortIDRunes is how much of a task id the list shows: "t1." and
	// eight characters tell tasks apart at a glance; the whole id is the
	// row's title and on the task's page.
	shortIDRunes = 11
	// listMessageRunes cuts a status message (up to 64 KiB) in the list;
	// the task's page shows more of it.
	listMessageRunes = 160
	// maxShownBytes bounds each text the task's page shows: a result may
	// be 4 MiB, which no operator reads in a browser tab.
	maxShownBytes = 64 << 10
)

// taskStatusClasses are the statuses the aggregator reports, as CSS
// classes; another status (a newer aggregator's) is shown unstyled.
var taskStatusClasses = map[string]string{
	"working": "status-working", "input_required": "status-input", "completed": "status-completed",
	"failed": "status-failed", "cancelled": "status-cancelled",
}

// taskRow is one task of the list.
type taskRow struct {
	ID, ShortID, Tool, Status, StatusClass string
	// Message is the status message, cut to listMessageRunes (MessageCut).
	Message          string
	MessageCut       bool
	Created, Updated *timestamppb.Timestamp
	TTL              string
	URL              template.URL
}

type tasksData struct {
	View  viewAs
	Tasks []taskRow
	// Next is the query of the next page; empty on the last.
	Next, First template.URL
	Paged       bool
}

// shownText is a text as the task's page shows it: at most maxShownBytes
// of it (Cut), out of Total bytes.
type shownText struct {
	Text  string
	Cut   bool
	Total int
}

// taskDetail is one task with what goes with its status.
type taskDetail struct {
	View viewAs
	// ID is the id asked for; Task is nil when it could not be read.
	ID           string
	Task         *aggregatorv1.Task
	StatusClass  string
	TTL, Poll    string
	Expires      *timestamppb.Timestamp
	Message      shownText
	PayloadTitle string
	// Payload is the result (completed), the JSON-RPC error (failed) or
	// the requests waiting for an answer (input_required), indented.
	Payload *shownText
	// ToolError: the completed result says isError.
	ToolError bool
	// ErrorCode and ErrorMessage are a failed task's error, when its JSON
	// names them.
	ErrorCode    string
	ErrorMessage *shownText
	// Requests is the number of input requests waiting.
	Requests int
	Back     template.URL
}

// tasksPage lists the tasks of the principal of the view-as form in the
// chosen server, newest first.
func (c *Console) tasksPage(w http.ResponseWriter, r *http.Request, s session) {
	q := r.URL.Query()
	p := page{Title: "Tasks", Active: "tasks", Session: &s}
	v, err := c.readViewAs(q)
	d := tasksData{View: v}
	p.Data = &d
	cursor := q.Get("cursor")
	switch {
	case err != nil:
		p.Error = err.Error()
	case len(cursor) > maxTaskCursorBytes:
		p.Error = "the page cursor is too long"
	}
	if p.Error != "" {
		c.render(w, r, http.StatusBadRequest, "tasks", p)
		return
	}
	d.Paged = cursor != ""
	principal := v.Principal()
	c.deps.Log.Info("console: tasks viewed as", "operator", s.Operator, "subject", principal.GetSubject(), "groups", principal.GetGroups(), "server", v.Path())
	ctx, cancel := rpcContext(r)
	defer cancel()
	resp, err := c.deps.Aggregator.ListTasks(ctx, &aggregatorv1.ListTasksRequest{Principal: principal, Server: v.Server, Cursor: cursor, PageSize: taskPageSize})
	if err != nil {
		c.renderFailure(w, r, "tasks", p, "ListTasks", err)
		return
	}
	for _, t := range resp.GetTasks() {
		msg, cut := cutRunes(t.GetStatusMessage(), listMessageRunes)
		d.Tasks = append(d.Tasks, taskRow{
			ID: t.GetTaskId(), ShortID: shortID(t.GetTaskId()), Tool: t.GetTool(), Status: t.GetStatus(), StatusClass: taskStatusClasses[t.GetStatus()],
			Message: msg, MessageCut: cut, Created: t.GetCreatedAt(), Updated: t.GetLastUpdatedAt(), TTL: millis(t.GetTtlMs()),
			URL: taskURL(v, t.GetTaskId()),
		})
	}
	base := v.query()
	// Typed as URLs: built here from escaped parts, so the template must
	// not escape them again.
	d.First = template.URL("/console/tasks?" + base.Encode())
	if next := resp.GetNextCursor(); next != "" {
		base.Set("cursor", next)
		d.Next = template.URL("/console/tasks?" + base.Encode())
	}
	c.render(w, r, http.StatusOK, "tasks", p)
}

// taskPage shows one task of the principal of the view-as form, with its
// result, error or pending input requests.
func (c *Console) taskPage(w http.ResponseWriter, r *http.Request, s session) {
	q := r.URL.Query()
	p := page{Title: "Task", Active: "tasks", Session: &s}
	v, err := c.readViewAs(q)
	d := taskDetail{View: v, ID: q.Get("id")}
	d.Back = template.URL("/console/tasks?" + v.query().Encode())
	p.Data = &d
	switch {
	case err != nil:
		p.Error = err.Error()
	case d.ID == "":
		p.Error = "no task id"
	case len(d.ID) > maxTaskIDBytes:
		p.Error = fmt.Sprintf("the task id is longer than %d bytes", maxTaskIDBytes)
	}
	if p.Error != "" {
		c.render(w, r, http.StatusBadRequest, "task", p)
		return
	}
	principal := v.Principal()
	c.deps.Log.Info("console: task viewed as", "operator", s.Operator, "subject", principal.GetSubject(), "groups", principal.GetGroups(), "server", v.Path(), "task", d.ID)
	ctx, cancel := rpcContext(r)
	defer cancel()
	resp, err := c.deps.Aggregator.GetTask(ctx, &aggregatorv1.GetTaskRequest{Principal: principal, Server: v.Server, TaskId: d.ID})
	if err != nil {
		c.renderFailure(w, r, "task", p, "GetTask", err)
		return
	}
	d.describe(resp.GetTask())
	c.render(w, r, http.StatusOK, "task", p)
}

// describe fills d from t.
func (d *taskDetail) describe(t *aggregatorv1.Task) {
	d.Task, d.StatusClass = t, taskStatusClasses[t.GetStatus()]
	d.TTL, d.Poll, d.Message = millis(t.GetTtlMs()), millis(t.GetPollIntervalMs()), shown(t.GetStatusMessage(), false)
	if t.GetCreatedAt() != nil && t.GetTtlMs() > 0 {
		d.Expires = timestamppb.New(t.GetCreatedAt().AsTime().Add(time.Duration(t.GetTtlMs()) * time.Millisecond))
	}
	switch t.GetStatus() {
	case "completed":
		d.PayloadTitle = "Result"
		var res struct {
			IsError bool `json:"isError"`
		}
		_ = json.Unmarshal([]byte(t.GetResultJson()), &res) // not an object: no flag to show
		d.ToolError = res.IsError
		d.Payload = ptr(shown(t.GetResultJson(), true))
	case "failed":
		d.PayloadTitle = "Error"
		var e struct {
			Code    json.Number `json:"code"`
			Message string      `json:"message"`
		}
		if json.Unmarshal([]byte(t.GetErrorJson()), &e) == nil && e.Code != "" {
			d.ErrorCode, d.ErrorMessage = e.Code.String(), ptr(shown(e.Message, false))
		}
		d.Payload = ptr(shown(t.GetErrorJson(), true))
	case "input_required":
		d.PayloadTitle = "Input requests waiting for an answer"
		var reqs map[string]json.RawMessage
		_ = json.Unmarshal([]byte(t.GetInputRequestsJson()), &reqs) // not an object: none counted
		d.Requests = len(reqs)
		d.Payload = ptr(shown(t.GetInputRequestsJson(), true))
	}
}

func ptr[T any](v T) *T { return &v }

// shown is s as the task's page shows it: indented when it is JSON
// (pretty), then cut to maxShownBytes on a character boundary.
func shown(s string, pretty bool) shownText {
	out := shownText{Text: s, Total: len(s)}
	if pretty && json.Valid([]byte(s)) {
		out.Text = indented(s, maxShownBytes)
	}
	if len(out.Text) > maxShownBytes {
		out.Text, out.Cut = textcut.Prefix(out.Text, maxShownBytes), true
	}
	return out
}

// cutRunes is s cut to n characters, and whether it was cut.
func cutRunes(s string, n int) (string, bool) {
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos], true
		}
		i++
	}
	return s, false
}

// shortID is the start of a task id, for the list.
func shortID(id string) string {
	if s, cut := cutRunes(id, shortIDRunes); cut {
		return s + "…"
	}
	return id
}

// millis shows a duration the API gives in milliseconds.
func millis(ms int64) string {
	if ms <= 0 {
		return "—"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

// taskURL is the page of task id in view v.
func taskURL(v viewAs, id string) template.URL {
	q := v.query()
	q.Set("id", id)
	// Typed as a URL: built here from escaped parts.
	return template.URL("/console/task?" + q.Encode())
}
