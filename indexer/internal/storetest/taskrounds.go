package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// advance applies a runner's change and returns the task after it and
// whether it applied.
func advance(t *testing.T, st store.Tasks, a store.TaskAdvance) (store.Task, bool) {
	t.Helper()
	got, applied, err := st.AdvanceTask(t.Context(), a)
	if err != nil {
		t.Fatalf("advance %+v: %v", a, err)
	}
	return got, applied
}

func answer(t *testing.T, st store.Tasks, ref store.TaskRef, answers, runner string, lease time.Time) (store.Task, bool) {
	t.Helper()
	got, resume, err := st.AnswerTask(t.Context(), store.TaskAnswer{Ref: ref, InputResponsesJSON: answers, Runner: runner, LeaseExpiresAt: lease})
	if err != nil {
		t.Fatalf("answer %s: %v", answers, err)
	}
	return got, resume
}

func cancelTask(t *testing.T, st store.Tasks, ref store.TaskRef, msg string) store.Task {
	t.Helper()
	got, err := st.CancelTask(t.Context(), ref, msg)
	if err != nil {
		t.Fatalf("cancel %s…: %v", ref.Key[:12], err)
	}
	return got
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && reflect.DeepEqual(x, y)
}

// wantLapsed fails unless task failed because its runner's lease lapsed.
func wantLapsed(t *testing.T, task store.Task, what string) {
	t.Helper()
	if task.Status != store.TaskFailed || task.StatusMessage != store.LapsedTaskMessage || task.ErrorJSON != store.LapsedTaskErrorJSON ||
		task.Runner != "" || !task.LeaseExpiresAt.IsZero() {
		t.Fatalf("%s: %+v, want failed for the lapsed lease, nobody running it", what, task)
	}
}

// A task whose runner's lease lapsed is failed by whatever meets it first,
// through any handle: a read, a listing, the runner's own change (which
// then does not apply), a cancellation (which leaves it failed) or a
// renewal (which names it ended). The failure is stored once. A task
// nobody runs has no lease to lapse, and a lease that lapses later fails
// its task then.
func lapsedLeaseFailsTask(t *testing.T, open Open[TaskStore]) {
	one, two := open(t), open(t)
	ctx := t.Context()
	lapsed := func(i int) store.Task {
		task := workingTask(i, "alice", "", "agg-1")
		task.LeaseExpiresAt = time.Now().Add(-time.Second).Truncate(time.Microsecond)
		return createTask(t, one, task)
	}
	read := lapsed(1)
	failed := getTask(t, two, read.Ref())
	wantLapsed(t, failed, "read")
	if failed.UpdatedAt.Before(read.UpdatedAt) {
		t.Fatalf("failed at %v, before it was created (%v)", failed.UpdatedAt, read.UpdatedAt)
	}
	wantTask(t, getTask(t, one, read.Ref()), failed, "read again through another handle: the failure as stored")

	waiting := workingTask(2, "alice", "", "agg-1")
	waiting.Status, waiting.InputRequestsJSON = store.TaskInputRequired, `{"q":{}}`
	waiting.LeaseExpiresAt = time.Now().Add(-time.Second).Truncate(time.Microsecond)
	createTask(t, one, waiting)
	tasks, err := two.ListTasks(ctx, "alice", "", nil, 10)
	if err != nil || len(tasks) != 2 {
		t.Fatalf("listed %v, %v; want the two tasks", tasks, err)
	}
	for _, task := range tasks {
		wantLapsed(t, task, "listed")
	}

	ran := lapsed(3)
	got, applied := advance(t, two, store.TaskAdvance{Key: ran.Key, Runner: "agg-1", Status: store.TaskCompleted, ResultJSON: `{"content":[]}`})
	if applied {
		t.Fatal("the runner's change applied after its lease lapsed")
	}
	wantLapsed(t, got, "advanced by its runner")

	wantLapsed(t, cancelTask(t, two, lapsed(4).Ref(), "stop"), "cancelled")

	renewed := lapsed(5)
	if ended, err := two.RenewTaskLeases(ctx, "agg-1", []string{renewed.Key}, inAnHour()); err != nil || !slices.Equal(ended, []string{renewed.Key}) {
		t.Fatalf("renewing a lapsed lease: ended %v, %v; want the task", ended, err)
	}
	wantLapsed(t, getTask(t, one, renewed.Ref()), "read after its renewal was refused")

	unrun := workingTask(6, "alice", "", "")
	unrun.LeaseExpiresAt = time.Time{}
	createTask(t, one, unrun)
	if got := getTask(t, two, unrun.Ref()); got.Status != store.TaskWorking {
		t.Fatalf("a working task nobody runs: %+v, want it working", got)
	}

	soon := workingTask(7, "alice", "", "agg-1")
	soon.LeaseExpiresAt = time.Now().Add(2 * time.Second).Truncate(time.Microsecond)
	createTask(t, one, soon)
	if got := getTask(t, two, soon.Ref()); got.Status != store.TaskWorking {
		t.Fatalf("a lease that has not lapsed: %+v, want the task working", got)
	}
	testkit.Eventually(t, "the lease to lapse", pollDeadline, func() bool {
		return getTask(t, two, soon.Ref()).Status == store.TaskFailed
	})
	wantLapsed(t, getTask(t, one, soon.Ref()), "once its lease lapsed")
}

// A runner's change applies only while the task has not ended, in the
// round it names, run by the runner it names: otherwise the task is as it
// was. Each status sets what goes with it; waiting for input, or ending,
// leaves nobody running the task.
func advanceTaskGuards(t *testing.T, open Open[TaskStore]) {
	one, two := open(t), open(t)
	created := createTask(t, one, workingTask(1, "alice", "sales", "agg-1"))
	key := created.Key
	for what, a := range map[string]store.TaskAdvance{
		"another runner": {Key: key, Runner: "agg-2", Status: store.TaskCompleted, ResultJSON: "{}"},
		"another round":  {Key: key, Runner: "agg-1", Round: 1, Status: store.TaskCompleted, ResultJSON: "{}"},
		"no runner":      {Key: key, Runner: "", Status: store.TaskCompleted, ResultJSON: "{}"},
	} {
		got, applied := advance(t, two, a)
		if applied {
			t.Fatalf("%s's change applied", what)
		}
		wantTask(t, got, created, what+"'s change")
	}

	working, applied := advance(t, two, store.TaskAdvance{Key: key, Runner: "agg-1", Status: store.TaskWorking, StatusMessage: "halfway"})
	want := created
	want.StatusMessage, want.UpdatedAt = "halfway", working.UpdatedAt
	if !applied || working.UpdatedAt.Before(created.UpdatedAt) {
		t.Fatalf("a working task's progress: applied %v, updated at %v (created %v)", applied, working.UpdatedAt, created.UpdatedAt)
	}
	wantTask(t, working, want, "a working task's progress")

	requests := `{"q1":{"method":"elicitation/create"},"q2":{"method":"sampling/createMessage"}}`
	waiting, applied := advance(t, one, store.TaskAdvance{Key: key, Runner: "agg-1", Status: store.TaskInputRequired,
		StatusMessage: "waiting", InputRequestsJSON: requests, RequestState: "state-1", ResultJSON: `{"ignored":true}`})
	want.Status, want.StatusMessage, want.InputRequestsJSON, want.RequestState = store.TaskInputRequired, "waiting", requests, "state-1"
	want.Runner, want.LeaseExpiresAt, want.UpdatedAt = "", time.Time{}, waiting.UpdatedAt
	if !applied {
		t.Fatal("going to input_required did not apply")
	}
	wantTask(t, waiting, want, "waiting for input")
	if got, applied := advance(t, two, store.TaskAdvance{Key: key, Runner: "agg-1", Status: store.TaskWorking}); applied {
		t.Fatalf("the runner's change while the task waits for input applied: %+v", got)
	}

	lease := inAnHour()
	if _, resume := answer(t, two, waiting.Ref(), `{"q1":{"action":"accept"},"q2":{"content":{}}}`, "agg-2", lease); !resume {
		t.Fatal("answering every request did not resume the task")
	}
	if _, applied := advance(t, one, store.TaskAdvance{Key: key, Runner: "agg-2", Status: store.TaskCompleted, ResultJSON: "{}"}); applied {
		t.Fatal("a change naming the last round applied")
	}
	done, applied := advance(t, one, store.TaskAdvance{Key: key, Runner: "agg-2", Round: 1, Status: store.TaskCompleted,
		StatusMessage: "done", ResultJSON: `{"content":[{"type":"text","text":"42"}]}`})
	if !applied || done.Status != store.TaskCompleted || done.ResultJSON != `{"content":[{"type":"text","text":"42"}]}` ||
		done.Runner != "" || !done.LeaseExpiresAt.IsZero() || done.Round != 1 || done.StatusMessage != "done" {
		t.Fatalf("completing: applied %v, %+v", applied, done)
	}
	for _, status := range []string{store.TaskWorking, store.TaskFailed, store.TaskCompleted} {
		got, applied := advance(t, two, store.TaskAdvance{Key: key, Runner: "", Round: 1, Status: status, ResultJSON: "{}", ErrorJSON: "{}"})
		if applied {
			t.Fatalf("a change of a completed task to %s applied", status)
		}
		wantTask(t, got, done, "a completed task")
	}

	// A task nobody in the cluster runs (its backend does) is advanced by
	// whoever reads it from the backend, naming no runner.
	backends := createTask(t, two, workingTask(3, "alice", "sales", ""))
	if got, applied := advance(t, one, store.TaskAdvance{Key: backends.Key, Status: store.TaskInputRequired,
		InputRequestsJSON: `{"q":{}}`}); !applied || got.Status != store.TaskInputRequired {
		t.Fatalf("a backend's task waiting for input: applied %v, %+v", applied, got)
	}
	if got, applied := advance(t, two, store.TaskAdvance{Key: backends.Key, Status: store.TaskCompleted, ResultJSON: "{}"}); !applied || got.ResultJSON != "{}" {
		t.Fatalf("a backend's task completed: applied %v, %+v", applied, got)
	}

	failing := createTask(t, two, workingTask(2, "alice", "sales", "agg-1"))
	failed, applied := advance(t, one, store.TaskAdvance{Key: failing.Key, Runner: "agg-1", Status: store.TaskFailed,
		StatusMessage: "backend gone", ErrorJSON: `{"code":-32000,"message":"backend gone"}`})
	if !applied || failed.Status != store.TaskFailed || failed.ErrorJSON != `{"code":-32000,"message":"backend gone"}` || failed.Runner != "" ||
		!failed.LeaseExpiresAt.IsZero() || failed.ResultJSON != "" {
		t.Fatalf("failing: applied %v, %+v", applied, failed)
	}
}

// Answers merge into an input_required task's round: only to requests of
// the round not answered yet, through any handle. Once every request has
// one the task works again in the next round, run by the answering
// caller's runner, with the requests, answers and request state kept for
// it; of concurrent answers completing a round exactly one resumes it.
// Answers to a task that does not wait for input change nothing.
func answerTaskMerges(t *testing.T, open Open[TaskStore]) {
	one, two := open(t), open(t)
	waitFor := func(i int, requests string) store.Task {
		created := createTask(t, one, workingTask(i, "alice", "", "agg-1"))
		task, applied := advance(t, two, store.TaskAdvance{Key: created.Key, Runner: "agg-1", Status: store.TaskInputRequired,
			InputRequestsJSON: requests, RequestState: "state"})
		if !applied {
			t.Fatalf("task %d did not go to input_required", i)
		}
		return task
	}
	requests := `{"a":{"method":"elicitation/create"},"b":{"method":"roots/list"}}`
	task := waitFor(1, requests)
	lease := inAnHour()

	partial, resume := answer(t, one, task.Ref(), `{"a":{"action":"accept"},"x":{"stray":true}}`, "agg-2", lease)
	if resume || partial.Status != store.TaskInputRequired || partial.Runner != "" || partial.Round != 0 ||
		!sameJSON(partial.InputResponsesJSON, `{"a":{"action":"accept"}}`) || partial.InputRequestsJSON != requests ||
		partial.UpdatedAt.Before(task.UpdatedAt) {
		t.Fatalf("one answer of two: resume %v, %+v", resume, partial)
	}
	again, resume := answer(t, two, task.Ref(), `{"a":{"action":"decline"}}`, "agg-2", lease)
	if resume {
		t.Fatal("answering a request answered already resumed the task")
	}
	wantTask(t, again, partial, "a second answer to the same request")

	resumed, resume := answer(t, two, task.Ref(), `{"b":{"roots":[]}}`, "agg-2", lease)
	want := partial
	want.Status, want.Round, want.Runner, want.LeaseExpiresAt, want.UpdatedAt = store.TaskWorking, 1, "agg-2", lease, resumed.UpdatedAt
	want.InputResponsesJSON = resumed.InputResponsesJSON
	if !resume || !sameJSON(resumed.InputResponsesJSON, `{"a":{"action":"accept"},"b":{"roots":[]}}`) {
		t.Fatalf("the last answer: resume %v, %+v", resume, resumed)
	}
	wantTask(t, resumed, want, "the task resumed, requests, answers and state kept")
	after, resume := answer(t, one, task.Ref(), `{"b":{"roots":["late"]}}`, "agg-3", lease)
	if resume {
		t.Fatal("an answer to a working task resumed it")
	}
	wantTask(t, after, resumed, "an answer to a working task")

	// Answers given one by one are bounded together as one update's are:
	// the one that would take them past the bound changes nothing.
	big := waitFor(3, requests)
	half := strings.Repeat("x", config.MaxTaskInputBytes/2)
	first, _ := answer(t, one, big.Ref(), `{"a":"`+half+`"}`, "agg-2", lease)
	if _, _, err := two.AnswerTask(t.Context(), store.TaskAnswer{Ref: big.Ref(), InputResponsesJSON: `{"b":"` + half + `"}`,
		Runner: "agg-2", LeaseExpiresAt: lease}); !errors.Is(err, store.ErrAnswersTooLarge) {
		t.Fatalf("answers past the bound together: %v, want store.ErrAnswersTooLarge", err)
	}
	wantTask(t, getTask(t, one, big.Ref()), first, "the task after answers past the bound")

	raced := waitFor(2, `{"q":{"method":"elicitation/create"}}`)
	var mu sync.Mutex
	var resumers []int
	var wg sync.WaitGroup
	for i := range 16 {
		st := []TaskStore{one, two}[i%2]
		wg.Go(func() {
			_, resume, err := st.AnswerTask(t.Context(), store.TaskAnswer{Ref: raced.Ref(), InputResponsesJSON: fmt.Sprintf(`{"q":%d}`, i),
				Runner: fmt.Sprintf("agg-%d", i), LeaseExpiresAt: lease})
			if err != nil {
				t.Error(err)
			}
			if resume {
				mu.Lock()
				resumers = append(resumers, i)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(resumers) != 1 {
		t.Fatalf("%d concurrent answers resumed the round (%v), want exactly 1", len(resumers), resumers)
	}
	got, winner := getTask(t, one, raced.Ref()), resumers[0]
	if got.Status != store.TaskWorking || got.Round != 1 || got.Runner != fmt.Sprintf("agg-%d", winner) ||
		!sameJSON(got.InputResponsesJSON, fmt.Sprintf(`{"q":%d}`, winner)) {
		t.Fatalf("after the race: %+v, want round 1 run by agg-%d with its answer", got, winner)
	}
}

// A cancellation ends a task that has not ended, through any handle, and
// leaves nobody running it; a task that ended stays as it was, a
// cancelled one included, and no runner's change or answer applies to it
// any more.
func cancellationEndsTask(t *testing.T, open Open[TaskStore]) {
	one, two := open(t), open(t)
	running := createTask(t, one, workingTask(1, "alice", "sales", "agg-1"))
	cancelled := cancelTask(t, two, running.Ref(), "the client cancelled it")
	want := running
	want.Status, want.StatusMessage, want.Runner, want.LeaseExpiresAt, want.UpdatedAt =
		store.TaskCancelled, "the client cancelled it", "", time.Time{}, cancelled.UpdatedAt
	if cancelled.UpdatedAt.Before(running.UpdatedAt) {
		t.Fatalf("cancelled at %v, before it was created (%v)", cancelled.UpdatedAt, running.UpdatedAt)
	}
	wantTask(t, cancelled, want, "a working task cancelled")
	wantTask(t, cancelTask(t, one, running.Ref(), "again"), cancelled, "cancelled again")
	got, applied := advance(t, one, store.TaskAdvance{Key: running.Key, Runner: "agg-1", Status: store.TaskCompleted, ResultJSON: "{}"})
	if applied {
		t.Fatal("the runner's change of a cancelled task applied")
	}
	wantTask(t, got, cancelled, "a cancelled task after its runner's change")
	if got, resume := answer(t, two, running.Ref(), `{"q":{}}`, "agg-2", inAnHour()); resume {
		t.Fatalf("an answer resumed a cancelled task: %+v", got)
	}

	waiting := createTask(t, one, workingTask(2, "alice", "sales", "agg-1"))
	waiting, _ = advance(t, two, store.TaskAdvance{Key: waiting.Key, Runner: "agg-1", Status: store.TaskInputRequired, InputRequestsJSON: `{"q":{}}`})
	if got := cancelTask(t, one, waiting.Ref(), ""); got.Status != store.TaskCancelled || got.InputRequestsJSON != `{"q":{}}` {
		t.Fatalf("a task waiting for input cancelled: %+v", got)
	}

	for i, end := range []store.TaskAdvance{
		{Runner: "agg-1", Status: store.TaskCompleted, ResultJSON: `{"content":[]}`},
		{Runner: "agg-1", Status: store.TaskFailed, ErrorJSON: `{"code":-32000,"message":"no"}`},
	} {
		task := createTask(t, one, workingTask(3+i, "alice", "sales", "agg-1"))
		end.Key = task.Key
		ended, _ := advance(t, two, end)
		wantTask(t, cancelTask(t, one, task.Ref(), "too late"), ended, "cancelling a task that ended "+ended.Status)
	}
}

// A runner's renewal extends its leases on the working tasks it runs and
// names every other key it gave, once each, in order: a task cancelled,
// waiting for input, ended, run by another runner, expired, never stored,
// or whose lease lapsed.
func renewTaskLeases(t *testing.T, open Open[TaskStore]) {
	one, two := open(t), open(t)
	ctx := t.Context()
	mine := createTask(t, one, workingTask(1, "alice", "", "agg-1"))
	cancelled := createTask(t, one, workingTask(2, "alice", "", "agg-1"))
	cancelTask(t, two, cancelled.Ref(), "")
	waiting := createTask(t, one, workingTask(3, "bob", "", "agg-1"))
	advance(t, two, store.TaskAdvance{Key: waiting.Key, Runner: "agg-1", Status: store.TaskInputRequired, InputRequestsJSON: `{"q":{}}`})
	theirs := createTask(t, one, workingTask(4, "bob", "", "agg-2"))
	expired := workingTask(6, "alice", "", "agg-1")
	expired.ExpiresAt = time.Now().Add(-time.Second)
	createTask(t, one, expired)
	lapsed := workingTask(7, "alice", "", "agg-1")
	lapsed.LeaseExpiresAt = time.Now().Add(-time.Second)
	createTask(t, one, lapsed)
	completed := createTask(t, one, workingTask(8, "alice", "", "agg-1"))
	advance(t, two, store.TaskAdvance{Key: completed.Key, Runner: "agg-1", Status: store.TaskCompleted, ResultJSON: "{}"})

	until := time.Now().Add(2 * time.Hour).Truncate(time.Microsecond)
	keys := []string{mine.Key, cancelled.Key, waiting.Key, theirs.Key, taskKey(5), expired.Key, lapsed.Key, completed.Key, cancelled.Key, mine.Key}
	ended, err := two.RenewTaskLeases(ctx, "agg-1", keys, until)
	if want := []string{cancelled.Key, waiting.Key, theirs.Key, taskKey(5), expired.Key, lapsed.Key, completed.Key}; err != nil || !slices.Equal(ended, want) {
		t.Fatalf("ended %v, %v; want every key but the runner's working task's, once each, in order", ended, err)
	}
	if got := getTask(t, one, mine.Ref()); !got.LeaseExpiresAt.Equal(until) || got.Status != store.TaskWorking || !got.UpdatedAt.Equal(mine.UpdatedAt) {
		t.Fatalf("the runner's task after its renewal: %+v, want its lease until %v and nothing else changed", got, until)
	}
	if got := getTask(t, two, theirs.Ref()); !got.LeaseExpiresAt.Equal(theirs.LeaseExpiresAt) {
		t.Fatalf("another runner's lease changed: %v, was %v", got.LeaseExpiresAt, theirs.LeaseExpiresAt)
	}
	if ended, err := one.RenewTaskLeases(ctx, "agg-1", nil, until); err != nil || len(ended) != 0 {
		t.Fatalf("renewing nothing: %v, %v", ended, err)
	}
}

// Garbage collection deletes the expired tasks and only those.
func tasksCollected(t *testing.T, open Open[TaskStore]) {
	one, two := open(t), open(t)
	live := createTask(t, one, workingTask(1, "alice", "", "agg-1"))
	for i := range 2 {
		expired := workingTask(2+i, "alice", "", "")
		expired.ExpiresAt = time.Now().Add(-time.Second)
		createTask(t, two, expired)
	}
	collected, err := two.CollectGarbage(t.Context(), time.Hour)
	if err != nil || collected.Tasks != 2 {
		t.Fatalf("collected %+v (%v), want the two expired tasks", collected, err)
	}
	wantTask(t, getTask(t, one, live.Ref()), live, "the live task after garbage collection")
	// The keys are free again once their tasks are gone.
	createTask(t, one, workingTask(2, "bob", "", ""))
	if collected, err := one.CollectGarbage(t.Context(), time.Hour); err != nil || collected.Tasks != 0 {
		t.Fatalf("collected %+v (%v) again, want no task", collected, err)
	}
}
