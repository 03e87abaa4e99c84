package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// taskSpace is the nthDigest space of task keys.
const taskSpace = 3

func taskKey(i int) string { return nthDigest(taskSpace, i) }

// noTaskLimits bound nothing.
var noTaskLimits = store.TaskLimits{}

// workingTask is task i of owner in server, working in round 0 and run by
// runner (nobody when empty) under a lease of an hour, expiring in an hour.
func workingTask(i int, owner, server, runner string) store.Task {
	t := store.Task{Key: taskKey(i), Owner: owner, Server: server, Tool: "sales_report", Backend: "alpha", Status: store.TaskWorking,
		StatusMessage: "started", ExpiresAt: inAnHour(), PollIntervalMS: 1000, CallJSON: `{"name":"sales_report","arguments":{}}`,
		Runner: runner}
	if runner != "" {
		t.LeaseExpiresAt = inAnHour()
	}
	return t
}

func createTask(t *testing.T, st store.Tasks, task store.Task) store.Task {
	t.Helper()
	got, err := st.CreateTask(t.Context(), task, noTaskLimits)
	if err != nil {
		t.Fatalf("create task %s…: %v", task.Key[:12], err)
	}
	return got
}

func getTask(t *testing.T, st store.Tasks, ref store.TaskRef) store.Task {
	t.Helper()
	got, err := st.GetTask(t.Context(), ref)
	if err != nil {
		t.Fatalf("get task %s…: %v", ref.Key[:12], err)
	}
	return got
}

// sameTask reports how got differs from want ("" if it does not), the
// times as instants.
func sameTask(got, want store.Task) string {
	g, w := got, want
	for _, p := range []*store.Task{&g, &w} {
		p.CreatedAt, p.UpdatedAt, p.ExpiresAt, p.LeaseExpiresAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	}
	if g != w || !got.CreatedAt.Equal(want.CreatedAt) || !got.UpdatedAt.Equal(want.UpdatedAt) || !got.ExpiresAt.Equal(want.ExpiresAt) ||
		!got.LeaseExpiresAt.Equal(want.LeaseExpiresAt) {
		return fmt.Sprintf("\n got %+v\nwant %+v", got, want)
	}
	return ""
}

func wantTask(t *testing.T, got, want store.Task, what string) {
	t.Helper()
	if diff := sameTask(got, want); diff != "" {
		t.Fatalf("%s:%s", what, diff)
	}
}

func wantTaskNotFound(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, store.ErrTaskNotFound) {
		t.Fatalf("%s: %v, want ErrTaskNotFound", what, err)
	}
}

// A task is stored as given, with the store's clock for its creation,
// and read back through any handle by its owner in its server only: a
// task of another owner or server, an expired task and one never stored
// are all ErrTaskNotFound. A key is stored once.
func tasksStoredAndIsolated(t *testing.T, open Open[TaskStore]) {
	one, two := open(t), open(t)
	ctx := t.Context()
	before := time.Now().Add(-time.Minute)
	in := workingTask(1, "alice", "sales", "agg-1")
	in.Round, in.RequestState, in.InputRequestsJSON = 2, "opaque-state", `{"q":{"method":"elicitation/create"}}`
	created := createTask(t, one, in)
	if created.CreatedAt.Before(before) || !created.UpdatedAt.Equal(created.CreatedAt) {
		t.Fatalf("created at %v, updated at %v: both the store's clock at creation", created.CreatedAt, created.UpdatedAt)
	}
	want := in
	want.CreatedAt, want.UpdatedAt = created.CreatedAt, created.UpdatedAt
	wantTask(t, created, want, "the task as created")
	wantTask(t, getTask(t, two, in.Ref()), want, "the task read through another handle")

	for what, ref := range map[string]store.TaskRef{
		"another owner":         {Key: in.Key, Owner: "bob", Server: "sales"},
		"the anonymous owner":   {Key: in.Key, Owner: "", Server: "sales"},
		"another server":        {Key: in.Key, Owner: "alice", Server: ""},
		"a key never stored":    {Key: taskKey(2), Owner: "alice", Server: "sales"},
		"another owner's case":  {Key: in.Key, Owner: "Alice", Server: "sales"},
		"another server's case": {Key: in.Key, Owner: "alice", Server: "Sales"},
	} {
		_, err := two.GetTask(ctx, ref)
		wantTaskNotFound(t, err, what)
	}
	if _, err := two.CreateTask(ctx, workingTask(1, "bob", "", ""), noTaskLimits); !errors.Is(err, store.ErrTaskExists) {
		t.Fatalf("a key stored already, through another handle: %v, want ErrTaskExists", err)
	}
	wantTask(t, getTask(t, one, in.Ref()), want, "the task after a duplicate was refused")

	expired := workingTask(3, "alice", "sales", "")
	expired.ExpiresAt = time.Now().Add(-time.Second)
	createTask(t, one, expired)
	_, err := two.GetTask(ctx, expired.Ref())
	wantTaskNotFound(t, err, "an expired task")
	_, err = two.CancelTask(ctx, expired.Ref(), "")
	wantTaskNotFound(t, err, "cancelling an expired task")
	_, _, err = two.AdvanceTask(ctx, store.TaskAdvance{Key: expired.Key, Status: store.TaskCompleted, ResultJSON: "{}"})
	wantTaskNotFound(t, err, "advancing an expired task")
	_, _, err = two.AdvanceTask(ctx, store.TaskAdvance{Key: taskKey(4), Runner: "agg-1", Status: store.TaskCompleted, ResultJSON: "{}"})
	wantTaskNotFound(t, err, "advancing a task never stored")
	for what, ref := range map[string]store.TaskRef{"another owner": {Key: in.Key, Owner: "bob", Server: "sales"}, "another server": {Key: in.Key, Owner: "alice"}} {
		_, err := one.CancelTask(ctx, ref, "")
		wantTaskNotFound(t, err, "cancelling through "+what)
		_, _, err = one.AnswerTask(ctx, store.TaskAnswer{Ref: ref, InputResponsesJSON: `{"q":{}}`, Runner: "agg-2", LeaseExpiresAt: inAnHour()})
		wantTaskNotFound(t, err, "answering through "+what)
	}
	wantTask(t, getTask(t, two, in.Ref()), want, "the task after others' changes were refused")
}

// An owner's unexpired tasks in one server are listed newest first
// (creation, then key), in pages through any handle that together hold
// each task once; other owners', other servers' and expired tasks are not.
func tasksListed(t *testing.T, open Open[TaskStore]) {
	one, two := open(t), open(t)
	ctx := t.Context()
	var want []store.Task
	for i := range 11 {
		st := []TaskStore{one, two}[i%2]
		want = append(want, createTask(t, st, workingTask(100+i, "alice", "sales", "")))
		createTask(t, st, workingTask(200+i, "alice", "", ""))
		createTask(t, st, workingTask(300+i, "bob", "sales", ""))
	}
	expired := workingTask(400, "alice", "sales", "")
	expired.ExpiresAt = time.Now().Add(-time.Second)
	createTask(t, one, expired)
	slices.SortFunc(want, func(a, b store.Task) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.Key, a.Key)
	})
	var got []store.Task
	var after *store.TaskPosition
	for page := 0; ; page++ {
		st := []TaskStore{one, two}[page%2]
		tasks, err := st.ListTasks(ctx, "alice", "sales", after, 4)
		if err != nil {
			t.Fatal(err)
		}
		if len(tasks) > 4 {
			t.Fatalf("page %d holds %d tasks, at most 4 asked", page, len(tasks))
		}
		got = append(got, tasks...)
		if len(tasks) < 4 {
			break
		}
		p := tasks[len(tasks)-1].Position()
		after = &p
	}
	if len(got) != len(want) {
		t.Fatalf("listed %d tasks, want %d", len(got), len(want))
	}
	for i := range want {
		wantTask(t, got[i], want[i], fmt.Sprintf("task %d listed", i))
	}
	if tasks, err := two.ListTasks(ctx, "carol", "sales", nil, 10); err != nil || len(tasks) != 0 {
		t.Fatalf("an owner without tasks: %v, %v", tasks, err)
	}
}

// An owner holds at most TaskLimits.PerOwner unexpired tasks, whatever
// the server, and the store at most Total tasks: past either a creation
// is ErrTasksFull and stores nothing. Expired tasks count for the owner's
// bound not at all, for the total until garbage collection deletes them;
// 0 bounds nothing, and concurrent creations through several handles
// never pass a bound.
func taskLimits(t *testing.T, open Open[TaskStore]) {
	one, two := open(t), open(t)
	ctx := t.Context()
	perOwner := store.TaskLimits{PerOwner: 3}
	expired := workingTask(1, "alice", "sales", "")
	expired.ExpiresAt = time.Now().Add(-time.Second)
	createTask(t, one, expired)
	for i := range 3 {
		if _, err := []TaskStore{one, two}[i%2].CreateTask(ctx, workingTask(10+i, "alice", []string{"sales", ""}[i%2], ""), perOwner); err != nil {
			t.Fatalf("alice's task %d of 3: %v", i+1, err)
		}
	}
	if _, err := two.CreateTask(ctx, workingTask(13, "alice", "other", ""), perOwner); !errors.Is(err, store.ErrTasksFull) {
		t.Fatalf("alice's fourth task: %v, want ErrTasksFull", err)
	}
	_, err := one.GetTask(ctx, store.TaskRef{Key: taskKey(13), Owner: "alice", Server: "other"})
	wantTaskNotFound(t, err, "a task refused for the owner's bound")
	if _, err := one.CreateTask(ctx, workingTask(14, "bob", "sales", ""), perOwner); err != nil {
		t.Fatalf("another owner's task: %v", err)
	}
	if _, err := one.CreateTask(ctx, workingTask(15, "alice", "sales", ""), noTaskLimits); err != nil {
		t.Fatalf("a task without bounds: %v", err)
	}
	// 6 stored, 5 of them unexpired: the expired one counts until it is
	// collected.
	if _, err := two.CreateTask(ctx, workingTask(16, "carol", "", ""), store.TaskLimits{Total: 6}); !errors.Is(err, store.ErrTasksFull) {
		t.Fatalf("a task past the total: %v, want ErrTasksFull", err)
	}
	if _, err := one.CollectGarbage(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := two.CreateTask(ctx, workingTask(16, "carol", "", ""), store.TaskLimits{Total: 5}); !errors.Is(err, store.ErrTasksFull) {
		t.Fatalf("a task past the total once collected: %v, want ErrTasksFull", err)
	}
	if _, err := two.CreateTask(ctx, workingTask(16, "carol", "", ""), store.TaskLimits{Total: 6, PerOwner: 1}); err != nil {
		t.Fatalf("a task within the total once the expired one is collected: %v", err)
	}

	// Racing creations: of one owner's, exactly the bound lands; of
	// everyone's, exactly what the total leaves.
	race := func(what string, n int, task func(i int) store.Task, limits store.TaskLimits, want int32) {
		var created atomic.Int32
		var wg sync.WaitGroup
		for i := range n {
			st := []TaskStore{one, two}[i%2]
			wg.Go(func() {
				_, err := st.CreateTask(ctx, task(i), limits)
				switch {
				case err == nil:
					created.Add(1)
				case !errors.Is(err, store.ErrTasksFull):
					t.Errorf("%s: %v", what, err)
				}
			})
		}
		wg.Wait()
		if got := created.Load(); got != want {
			t.Fatalf("%s: %d created, want %d", what, got, want)
		}
	}
	race("one owner's racing creations", 16, func(i int) store.Task { return workingTask(100+i, "dave", "sales", "") }, store.TaskLimits{PerOwner: 4}, 4)
	// 10 unexpired now; room for 6 more under a total of 16.
	race("everyone's racing creations", 16, func(i int) store.Task { return workingTask(200+i, fmt.Sprintf("user-%d", i), "", "") },
		store.TaskLimits{PerOwner: 1, Total: 16}, 6)
}
