package server

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	"github.com/switchboard-mcp/switchboard/services/config"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// taskStub answers the task RPCs' store calls with err (or a task named
// by the call), recording each call.
type taskStub struct {
	store.Store
	err   error
	calls []string
	// list is what ListTasks returns; limit and after what it was asked.
	list  []store.Task
	limit int
	after *store.TaskPosition
}

func (s *taskStub) called(name string) error {
	s.calls = append(s.calls, name)
	return s.err
}

func (s *taskStub) CreateTask(_ context.Context, t store.Task, _ store.TaskLimits) (store.Task, error) {
	return t, s.called("CreateTask")
}

func (s *taskStub) GetTask(_ context.Context, ref store.TaskRef) (store.Task, error) {
	return store.Task{Key: ref.Key, Owner: ref.Owner, Server: ref.Server}, s.called("GetTask")
}

func (s *taskStub) ListTasks(_ context.Context, _, _ string, after *store.TaskPosition, limit int) ([]store.Task, error) {
	s.limit, s.after = limit, after
	return s.list, s.called("ListTasks")
}

func (s *taskStub) AdvanceTask(_ context.Context, a store.TaskAdvance) (store.Task, bool, error) {
	return store.Task{Key: a.Key}, true, s.called("AdvanceTask")
}

func (s *taskStub) AnswerTask(_ context.Context, a store.TaskAnswer) (store.Task, bool, error) {
	return store.Task{Key: a.Ref.Key}, false, s.called("AnswerTask")
}

func (s *taskStub) CancelTask(_ context.Context, ref store.TaskRef, _ string) (store.Task, error) {
	return store.Task{Key: ref.Key}, s.called("CancelTask")
}

func (s *taskStub) RenewTaskLeases(_ context.Context, _ string, keys []string, _ time.Time) ([]string, error) {
	return keys[:1], s.called("RenewTaskLeases")
}

// Credentials of the task tests: the aggregator's, which asserts
// principals, and an internal client's bound to the principal "reporting".
var taskCreds = []config.ServiceCredential{
	{Name: "aggregator", Token: "aggregator-token", AssertPrincipals: true, Allow: []string{"switchboard.indexer.v1.ClusterStateService/*"}},
	{Name: "reporting", Token: "reporting-token", Subject: "reporting", Allow: []string{"switchboard.indexer.v1.ClusterStateService/*"}},
	// Bound to no subject: the anonymous principal's tasks are not its.
	{Name: "nobody", Token: "nobody-token", Allow: []string{"switchboard.indexer.v1.ClusterStateService/*"}},
}

// serveTasks runs a server on st over gRPC, behind the service
// authentication and with the message sizes the services use, and returns
// a ClusterStateService client that sends token.
func serveTasks(t *testing.T, st store.Store, logs io.Writer) func(token string) indexerv1.ClusterStateServiceClient {
	t.Helper()
	s := New(Deps{Store: st, Log: slog.New(slog.NewTextHandler(logs, nil))})
	s.SetReady()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(append(s.AccessOptions(), grpc.UnaryInterceptor(svcauth.NewAuthenticator(taskCreds).UnaryInterceptor()), grpc.MaxRecvMsgSize(16<<20))...)
	indexerv1.RegisterClusterStateServiceServer(srv, s)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return func(token string) indexerv1.ClusterStateServiceClient {
		conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithPerRPCCredentials(svcauth.TokenCredentials{Token: token}), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return indexerv1.NewClusterStateServiceClient(conn)
	}
}

var taskTestKey = strings.Repeat("0f", 32)

// goodTask is a task record CreateTask accepts.
func goodTask() *indexerv1.TaskRecord {
	return &indexerv1.TaskRecord{Key: taskTestKey, Owner: "alice", Server: "sales", Tool: "report", Backend: "alpha", Status: "working",
		ExpiresAt: timestamppb.New(time.Now().Add(time.Hour)), CallJson: `{"name":"report"}`, Runner: "agg-1",
		LeaseExpiresAt: timestamppb.New(time.Now().Add(time.Minute))}
}

// jsonString is a JSON string of n bytes in all.
func jsonString(n int) string { return `"` + strings.Repeat("x", n-2) + `"` }

// Every field of every task RPC is bounded and checked before the store is
// asked: past a bound, or malformed, a request is INVALID_ARGUMENT (reason
// INVALID_ARGUMENT) and reaches nothing; at the bound it passes.
func TestTaskRequestBounds(t *testing.T) {
	st := &taskStub{}
	client := serveTasks(t, st, io.Discard)("aggregator-token")
	ctx := t.Context()
	record := func(change func(r *indexerv1.TaskRecord)) *indexerv1.CreateTaskRequest {
		r := goodTask()
		change(r)
		return &indexerv1.CreateTaskRequest{Record: r}
	}
	ref := func(change func(r *indexerv1.TaskRef)) *indexerv1.TaskRef {
		r := &indexerv1.TaskRef{Key: taskTestKey, Owner: "alice", Server: "sales"}
		change(r)
		return r
	}
	lease := timestamppb.New(time.Now().Add(time.Minute))
	advance := func(change func(r *indexerv1.AdvanceTaskRequest)) *indexerv1.AdvanceTaskRequest {
		r := &indexerv1.AdvanceTaskRequest{Key: taskTestKey, Runner: "agg-1", Status: "completed", ResultJson: "{}"}
		change(r)
		return r
	}
	long, keys := strings.Repeat("n", 1025), make([]string, 1001)
	for i := range keys {
		keys[i] = taskTestKey
	}
	type call struct {
		name string
		run  func() error
	}
	create := func(name string, change func(r *indexerv1.TaskRecord)) call {
		return call{"CreateTask " + name, func() error { _, err := client.CreateTask(ctx, record(change)); return err }}
	}
	get := func(name string, r *indexerv1.TaskRef) call {
		return call{"GetTask " + name, func() error { _, err := client.GetTask(ctx, &indexerv1.GetTaskRequest{Ref: r}); return err }}
	}
	list := func(name string, r *indexerv1.ListTasksRequest) call {
		return call{"ListTasks " + name, func() error { _, err := client.ListTasks(ctx, r); return err }}
	}
	adv := func(name string, change func(r *indexerv1.AdvanceTaskRequest)) call {
		return call{"AdvanceTask " + name, func() error { _, err := client.AdvanceTask(ctx, advance(change)); return err }}
	}
	ans := func(name string, r *indexerv1.AnswerTaskRequest) call {
		return call{"AnswerTask " + name, func() error { _, err := client.AnswerTask(ctx, r); return err }}
	}
	renew := func(name string, r *indexerv1.RenewTaskLeasesRequest) call {
		return call{"RenewTaskLeases " + name, func() error { _, err := client.RenewTaskLeases(ctx, r); return err }}
	}
	refused := []call{
		{"CreateTask without a record", func() error { _, err := client.CreateTask(ctx, &indexerv1.CreateTaskRequest{}); return err }},
		create("with an upper-case key", func(r *indexerv1.TaskRecord) { r.Key = strings.ToUpper(r.Key) }),
		create("with a short key", func(r *indexerv1.TaskRecord) { r.Key = r.Key[1:] }),
		create("with a key not hex", func(r *indexerv1.TaskRecord) { r.Key = strings.Repeat("g", 64) }),
		create("with a long owner", func(r *indexerv1.TaskRecord) { r.Owner = long }),
		create("with an owner holding NUL", func(r *indexerv1.TaskRecord) { r.Owner = "al\x00ice" }),
		create("with a long server", func(r *indexerv1.TaskRecord) { r.Server = long }),
		create("without a tool", func(r *indexerv1.TaskRecord) { r.Tool = "" }),
		create("with a long tool", func(r *indexerv1.TaskRecord) { r.Tool = long }),
		create("with a long backend", func(r *indexerv1.TaskRecord) { r.Backend = long }),
		create("with another status", func(r *indexerv1.TaskRecord) { r.Status = "done" }),
		create("with a long status message", func(r *indexerv1.TaskRecord) { r.StatusMessage = strings.Repeat("m", 64<<10+1) }),
		create("without call_json", func(r *indexerv1.TaskRecord) { r.CallJson = "" }),
		create("with call_json not JSON", func(r *indexerv1.TaskRecord) { r.CallJson = "{" }),
		create("with a long call_json", func(r *indexerv1.TaskRecord) { r.CallJson = jsonString(256<<10 + 1) }),
		create("with input requests not an object", func(r *indexerv1.TaskRecord) { r.InputRequestsJson = "[]" }),
		create("with long input requests", func(r *indexerv1.TaskRecord) { r.InputRequestsJson = `{"a":` + jsonString(256<<10) + `}` }),
		create("input_required without requests", func(r *indexerv1.TaskRecord) { r.Status = "input_required" }),
		create("input_required with no request", func(r *indexerv1.TaskRecord) { r.Status, r.InputRequestsJson = "input_required", "{}" }),
		create("with input responses not an object", func(r *indexerv1.TaskRecord) { r.InputResponsesJson = "null" }),
		create("with a long request state", func(r *indexerv1.TaskRecord) { r.RequestState = strings.Repeat("s", 1<<20+1) }),
		create("with a long result", func(r *indexerv1.TaskRecord) { r.ResultJson = jsonString(4<<20 + 1) }),
		create("with an error not JSON", func(r *indexerv1.TaskRecord) { r.ErrorJson = "oops" }),
		create("with a long runner", func(r *indexerv1.TaskRecord) { r.Runner = long }),
		create("with a runner and no lease", func(r *indexerv1.TaskRecord) { r.LeaseExpiresAt = nil }),
		create("with a lease and no runner", func(r *indexerv1.TaskRecord) { r.Runner = "" }),
		create("with a lease too long", func(r *indexerv1.TaskRecord) { r.LeaseExpiresAt = timestamppb.New(time.Now().Add(2 * time.Hour)) }),
		create("ended with a runner", func(r *indexerv1.TaskRecord) { r.Status, r.ResultJson = "completed", "{}" }),
		create("without an expiry", func(r *indexerv1.TaskRecord) { r.ExpiresAt = nil }),
		create("expired", func(r *indexerv1.TaskRecord) { r.ExpiresAt = timestamppb.New(time.Now().Add(-time.Second)) }),
		create("expiring past the longest TTL", func(r *indexerv1.TaskRecord) { r.ExpiresAt = timestamppb.New(time.Now().Add(8 * 24 * time.Hour)) }),
		get("without a ref", nil),
		get("with a bad key", ref(func(r *indexerv1.TaskRef) { r.Key = "not-a-key" })),
		get("with a long owner", ref(func(r *indexerv1.TaskRef) { r.Owner = long })),
		get("with a long server", ref(func(r *indexerv1.TaskRef) { r.Server = long })),
		list("with a page too large", &indexerv1.ListTasksRequest{Owner: "alice", PageSize: 101}),
		list("with a cursor not base64", &indexerv1.ListTasksRequest{Owner: "alice", Cursor: "!!"}),
		list("with a cursor of another form", &indexerv1.ListTasksRequest{Owner: "alice", Cursor: base64.RawURLEncoding.EncodeToString([]byte("12.nope"))}),
		list("with a long cursor", &indexerv1.ListTasksRequest{Owner: "alice", Cursor: strings.Repeat("A", 129)}),
		list("with a cursor of a time no row can have", &indexerv1.ListTasksRequest{Owner: "alice",
			Cursor: base64.RawURLEncoding.EncodeToString([]byte("-9223372036854775807." + taskTestKey))}),
		list("with a long owner", &indexerv1.ListTasksRequest{Owner: long}),
		adv("with a bad key", func(r *indexerv1.AdvanceTaskRequest) { r.Key = "" }),
		adv("with a runner past its bound", func(r *indexerv1.AdvanceTaskRequest) { r.Runner = strings.Repeat("r", 1025) }),
		adv("with another status", func(r *indexerv1.AdvanceTaskRequest) { r.Status = "paused" }),
		adv("to input_required without requests", func(r *indexerv1.AdvanceTaskRequest) { r.Status = "input_required" }),
		adv("to completed without a result", func(r *indexerv1.AdvanceTaskRequest) { r.ResultJson = "" }),
		adv("to failed without an error", func(r *indexerv1.AdvanceTaskRequest) { r.Status = "failed" }),
		adv("to failed with an error not an object", func(r *indexerv1.AdvanceTaskRequest) { r.Status, r.ErrorJson = "failed", `"no"` }),
		adv("with a long result", func(r *indexerv1.AdvanceTaskRequest) { r.ResultJson = jsonString(4<<20 + 1) }),
		adv("with a long request state", func(r *indexerv1.AdvanceTaskRequest) { r.RequestState = strings.Repeat("s", 1<<20+1) }),
		ans("without answers", &indexerv1.AnswerTaskRequest{Ref: ref(func(*indexerv1.TaskRef) {}), Runner: "agg-1", LeaseExpiresAt: lease}),
		ans("with answers not an object", &indexerv1.AnswerTaskRequest{Ref: ref(func(*indexerv1.TaskRef) {}), InputResponsesJson: "[1]", Runner: "agg-1", LeaseExpiresAt: lease}),
		ans("with no answer", &indexerv1.AnswerTaskRequest{Ref: ref(func(*indexerv1.TaskRef) {}), InputResponsesJson: "{}", Runner: "agg-1", LeaseExpiresAt: lease}),
		ans("with long answers", &indexerv1.AnswerTaskRequest{Ref: ref(func(*indexerv1.TaskRef) {}), InputResponsesJson: `{"a":` + jsonString(256<<10) + `}`, Runner: "agg-1", LeaseExpiresAt: lease}),
		ans("without a runner", &indexerv1.AnswerTaskRequest{Ref: ref(func(*indexerv1.TaskRef) {}), InputResponsesJson: `{"a":1}`, LeaseExpiresAt: lease}),
		ans("without a lease", &indexerv1.AnswerTaskRequest{Ref: ref(func(*indexerv1.TaskRef) {}), InputResponsesJson: `{"a":1}`, Runner: "agg-1"}),
		ans("with a bad key", &indexerv1.AnswerTaskRequest{Ref: ref(func(r *indexerv1.TaskRef) { r.Key += "0" }), InputResponsesJson: `{"a":1}`, Runner: "agg-1", LeaseExpiresAt: lease}),
		{"CancelTask with a long message", func() error {
			_, err := client.CancelTask(ctx, &indexerv1.CancelTaskRequest{Ref: ref(func(*indexerv1.TaskRef) {}), StatusMessage: strings.Repeat("m", 64<<10+1)})
			return err
		}},
		{"CancelTask without a ref", func() error { _, err := client.CancelTask(ctx, &indexerv1.CancelTaskRequest{}); return err }},
		renew("with too many keys", &indexerv1.RenewTaskLeasesRequest{Runner: "agg-1", Keys: keys, LeaseExpiresAt: lease}),
		renew("with a bad key", &indexerv1.RenewTaskLeasesRequest{Runner: "agg-1", Keys: []string{taskTestKey, "x"}, LeaseExpiresAt: lease}),
		renew("without a runner", &indexerv1.RenewTaskLeasesRequest{Keys: []string{taskTestKey}, LeaseExpiresAt: lease}),
		renew("without a lease", &indexerv1.RenewTaskLeasesRequest{Runner: "agg-1", Keys: []string{taskTestKey}}),
		renew("with a lease too long", &indexerv1.RenewTaskLeasesRequest{Runner: "agg-1", Keys: []string{taskTestKey}, LeaseExpiresAt: timestamppb.New(time.Now().Add(2 * time.Hour))}),
	}
	for _, c := range refused {
		err := c.run()
		if status.Code(err) != codes.InvalidArgument || apierr.Reason(err) != commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT {
			t.Errorf("%s: %v, want INVALID_ARGUMENT", c.name, err)
		}
	}
	if len(st.calls) != 0 {
		t.Fatalf("refused requests reached the store: %v", st.calls)
	}

	atBounds := []call{
		create("at every bound", func(r *indexerv1.TaskRecord) {
			name := strings.Repeat("n", 1024)
			r.Owner, r.Server, r.Tool, r.Backend, r.Runner = name, name, name, name, name
			r.Status, r.StatusMessage = "input_required", strings.Repeat("m", 64<<10)
			r.CallJson, r.InputRequestsJson = jsonString(256<<10), `{"a":`+jsonString(256<<10-6)+`}`
			r.InputResponsesJson, r.RequestState = `{"b":`+jsonString(256<<10-6)+`}`, strings.Repeat("s", 1<<20)
			r.ResultJson, r.ErrorJson = jsonString(4<<20), `{"e":`+jsonString(4<<20-6)+`}`
			r.ExpiresAt = timestamppb.New(time.Now().Add(7 * 24 * time.Hour))
		}),
		create("ended, nobody running it", func(r *indexerv1.TaskRecord) {
			r.Status, r.ErrorJson, r.Runner, r.LeaseExpiresAt = "failed", `{"code":-1}`, "", nil
		}),
		get("of the anonymous owner in /mcp", ref(func(r *indexerv1.TaskRef) { r.Owner, r.Server = "", "" })),
		list("with the largest page", &indexerv1.ListTasksRequest{Owner: "alice", PageSize: 100}),
		adv("to input_required", func(r *indexerv1.AdvanceTaskRequest) {
			r.Status, r.InputRequestsJson, r.RequestState = "input_required", `{"q":{}}`, strings.Repeat("s", 1<<20)
		}),
		adv("to failed", func(r *indexerv1.AdvanceTaskRequest) {
			r.Status, r.ErrorJson = "failed", `{"code":-32000,"message":"x"}`
		}),
		ans("with answers", &indexerv1.AnswerTaskRequest{Ref: ref(func(*indexerv1.TaskRef) {}), InputResponsesJson: `{"a":1}`, Runner: "agg-1", LeaseExpiresAt: lease}),
		renew("with the most keys", &indexerv1.RenewTaskLeasesRequest{Runner: "agg-1", Keys: keys[:1000], LeaseExpiresAt: lease}),
	}
	for _, c := range atBounds {
		if err := c.run(); err != nil {
			t.Errorf("%s: %v, want it to reach the store", c.name, err)
		}
	}
	if len(st.calls) != len(atBounds) {
		t.Fatalf("the store was asked %v, want one call for each of the %d requests at the bounds", st.calls, len(atBounds))
	}
}

// The store's refusals become the contract's statuses: a task missing (of
// another owner, or expired alike) is NOT_FOUND with one message whatever
// the RPC, a key stored already ALREADY_EXISTS, a bound reached
// RESOURCE_EXHAUSTED with ERROR_REASON_TASKS_FULL, a database unreachable
// UNAVAILABLE.
func TestTaskErrorsMapped(t *testing.T) {
	st := &taskStub{}
	client := serveTasks(t, st, io.Discard)("aggregator-token")
	ctx := t.Context()
	r := &indexerv1.TaskRef{Key: taskTestKey, Owner: "alice"}
	lease := timestamppb.New(time.Now().Add(time.Minute))
	rpcs := map[string]func() error{
		"GetTask":    func() error { _, err := client.GetTask(ctx, &indexerv1.GetTaskRequest{Ref: r}); return err },
		"CancelTask": func() error { _, err := client.CancelTask(ctx, &indexerv1.CancelTaskRequest{Ref: r}); return err },
		"AnswerTask": func() error {
			_, err := client.AnswerTask(ctx, &indexerv1.AnswerTaskRequest{Ref: r, InputResponsesJson: `{"a":1}`, Runner: "agg-1", LeaseExpiresAt: lease})
			return err
		},
		"AdvanceTask": func() error {
			_, err := client.AdvanceTask(ctx, &indexerv1.AdvanceTaskRequest{Key: taskTestKey, Runner: "agg-1", Status: "working"})
			return err
		},
	}
	st.err = store.ErrTaskNotFound
	var message string
	for name, call := range rpcs {
		err := call()
		if status.Code(err) != codes.NotFound || apierr.Reason(err) != commonv1.ErrorReason_ERROR_REASON_NOT_FOUND {
			t.Fatalf("%s of a missing task: %v, want NOT_FOUND", name, err)
		}
		if message != "" && status.Convert(err).Message() != message {
			t.Fatalf("%s says %q, another RPC %q: one message tells nothing apart", name, status.Convert(err).Message(), message)
		}
		message = status.Convert(err).Message()
	}
	create := func() error {
		_, err := client.CreateTask(ctx, &indexerv1.CreateTaskRequest{Record: goodTask()})
		return err
	}
	for _, c := range []struct {
		err    error
		code   codes.Code
		reason commonv1.ErrorReason
	}{
		{store.ErrTaskExists, codes.AlreadyExists, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED},
		{store.ErrTasksFull, codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_TASKS_FULL},
		{store.ErrAnswersTooLarge, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT},
		{&store.UnavailableError{Err: errors.New("connection refused")}, codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_INDEX_UNAVAILABLE},
	} {
		st.err = c.err
		if err := create(); status.Code(err) != c.code || apierr.Reason(err) != c.reason {
			t.Errorf("CreateTask, store error %v: %v, want %s / %s", c.err, err, c.code, c.reason)
		}
	}
}

// A credential that may not assert principals acts for its own principal
// only: it reads and cancels its own tasks (the owner is its subject,
// which it must have) and no other owner's, and runs none (CreateTask and
// AnswerTask take a runner's lease and the aggregator's bounds, which it
// once chose itself, none; AdvanceTask and RenewTaskLeases name no
// owner); what it may not do is PERMISSION_DENIED with
// ERROR_REASON_PRINCIPAL_NOT_ALLOWED, logged with the caller, before the
// store is asked. The aggregator's credential acts for any owner.
func TestTaskCallersActForTheirPrincipal(t *testing.T) {
	st := &taskStub{}
	var logs strings.Builder
	serve := serveTasks(t, st, &logs)
	reporting, aggregator, nobody := serve("reporting-token"), serve("aggregator-token"), serve("nobody-token")
	ctx := t.Context()
	lease := timestamppb.New(time.Now().Add(time.Minute))
	own, other := &indexerv1.TaskRef{Key: taskTestKey, Owner: "reporting"}, &indexerv1.TaskRef{Key: taskTestKey, Owner: "alice"}
	othersTask := goodTask()
	ownTask := proto.Clone(othersTask).(*indexerv1.TaskRecord)
	ownTask.Owner = "reporting"
	denied := map[string]func() error{
		"CreateTask": func() error {
			_, err := reporting.CreateTask(ctx, &indexerv1.CreateTaskRequest{Record: othersTask})
			return err
		},
		"GetTask": func() error { _, err := reporting.GetTask(ctx, &indexerv1.GetTaskRequest{Ref: other}); return err },
		"ListTasks": func() error {
			_, err := reporting.ListTasks(ctx, &indexerv1.ListTasksRequest{Owner: "alice"})
			return err
		},
		"CancelTask": func() error {
			_, err := reporting.CancelTask(ctx, &indexerv1.CancelTaskRequest{Ref: other})
			return err
		},
		"AnswerTask": func() error {
			_, err := reporting.AnswerTask(ctx, &indexerv1.AnswerTaskRequest{Ref: other, InputResponsesJson: `{"a":1}`, Runner: "r", LeaseExpiresAt: lease})
			return err
		},
		"AdvanceTask": func() error {
			_, err := reporting.AdvanceTask(ctx, &indexerv1.AdvanceTaskRequest{Key: taskTestKey, Runner: "r", Status: "working"})
			return err
		},
		"RenewTaskLeases": func() error {
			_, err := reporting.RenewTaskLeases(ctx, &indexerv1.RenewTaskLeasesRequest{Runner: "r", Keys: []string{taskTestKey}, LeaseExpiresAt: lease})
			return err
		},
		"CreateTask of its own principal's task": func() error {
			_, err := reporting.CreateTask(ctx, &indexerv1.CreateTaskRequest{Record: ownTask})
			return err
		},
		"AnswerTask of its own principal's task": func() error {
			_, err := reporting.AnswerTask(ctx, &indexerv1.AnswerTaskRequest{Ref: own, InputResponsesJson: `{"a":1}`, Runner: "r", LeaseExpiresAt: lease})
			return err
		},
		"GetTask of the anonymous principal's task, by a credential bound to no subject": func() error {
			_, err := nobody.GetTask(ctx, &indexerv1.GetTaskRequest{Ref: &indexerv1.TaskRef{Key: taskTestKey}})
			return err
		},
	}
	for name, call := range denied {
		if err := call(); status.Code(err) != codes.PermissionDenied || apierr.Reason(err) != commonv1.ErrorReason_ERROR_REASON_PRINCIPAL_NOT_ALLOWED {
			t.Errorf("%s (a credential bound to a principal of its own): %v, want PERMISSION_DENIED / PRINCIPAL_NOT_ALLOWED", name, err)
		}
	}
	if len(st.calls) != 0 {
		t.Fatalf("refused requests reached the store: %v", st.calls)
	}
	if !strings.Contains(logs.String(), "caller=reporting") {
		t.Errorf("refusals not logged with the caller:\n%s", logs.String())
	}
	allowed := []func() error{
		func() error { _, err := reporting.GetTask(ctx, &indexerv1.GetTaskRequest{Ref: own}); return err },
		func() error {
			_, err := reporting.ListTasks(ctx, &indexerv1.ListTasksRequest{Owner: "reporting"})
			return err
		},
		func() error { _, err := reporting.CancelTask(ctx, &indexerv1.CancelTaskRequest{Ref: own}); return err },
		func() error { _, err := aggregator.GetTask(ctx, &indexerv1.GetTaskRequest{Ref: other}); return err },
		func() error {
			_, err := aggregator.AdvanceTask(ctx, &indexerv1.AdvanceTaskRequest{Key: taskTestKey, Runner: "r", Status: "working"})
			return err
		},
	}
	for i, call := range allowed {
		if err := call(); err != nil {
			t.Errorf("allowed call %d: %v", i, err)
		}
	}
	if len(st.calls) != len(allowed) {
		t.Fatalf("the store was asked %v, want each allowed call", st.calls)
	}
}

// ListTasks asks the store for one task more than the page, to know
// whether another follows: then next_cursor is the page's last task's
// position, which the next request hands back to the store; a last page
// has none. A page size of 0 is 50.
func TestListTasksPages(t *testing.T) {
	st := &taskStub{}
	client := serveTasks(t, st, io.Discard)("aggregator-token")
	ctx := t.Context()
	at := time.Date(2026, 7, 28, 12, 0, 0, 123456000, time.UTC)
	for i := range 4 {
		st.list = append(st.list, store.Task{Key: strings.Repeat(string(rune('a'+i)), 64), CreatedAt: at.Add(-time.Duration(i) * time.Second)})
	}
	resp, err := client.ListTasks(ctx, &indexerv1.ListTasksRequest{Owner: "alice", PageSize: 3})
	if err != nil || st.limit != 4 || len(resp.GetRecords()) != 3 || resp.GetNextCursor() == "" {
		t.Fatalf("a full page: asked for %d, %v, %v", st.limit, resp, err)
	}
	if _, err := client.ListTasks(ctx, &indexerv1.ListTasksRequest{Owner: "alice", PageSize: 3, Cursor: resp.GetNextCursor()}); err != nil {
		t.Fatal(err)
	}
	if last := st.list[2]; st.after == nil || st.after.Key != last.Key || !st.after.CreatedAt.Equal(last.CreatedAt) {
		t.Fatalf("the next page started after %+v, want the last task's position %+v", st.after, last.Position())
	}
	st.list = st.list[:2]
	resp, err = client.ListTasks(ctx, &indexerv1.ListTasksRequest{Owner: "alice"})
	if err != nil || st.limit != 51 || len(resp.GetRecords()) != 2 || resp.GetNextCursor() != "" || st.after != nil {
		t.Fatalf("the last page: asked for %d after %v, %v, %v", st.limit, st.after, resp, err)
	}
	// A page carries no payloads: fifty results of megabytes each once
	// made a page larger than the aggregator takes.
	big := strings.Repeat("x", 1<<20)
	st.list = []store.Task{{Key: strings.Repeat("z", 64), CreatedAt: at, Status: store.TaskCompleted, CallJSON: `{"id":"t"}`,
		ResultJSON: `{"r":"` + big + `"}`, ErrorJSON: `{}`, InputRequestsJSON: `{}`, InputResponsesJSON: `{}`, RequestState: big}}
	resp, err = client.ListTasks(ctx, &indexerv1.ListTasksRequest{Owner: "alice"})
	if err != nil || len(resp.GetRecords()) != 1 {
		t.Fatal(resp, err)
	}
	if r := resp.GetRecords()[0]; r.GetCallJson() == "" || r.GetStatus() != store.TaskCompleted ||
		r.GetResultJson()+r.GetErrorJson()+r.GetInputRequestsJson()+r.GetInputResponsesJson()+r.GetRequestState() != "" {
		t.Errorf("a listed record carries payloads (%d bytes of result): status %q, call %q", len(r.GetResultJson()), r.GetStatus(), r.GetCallJson())
	}
}
