package testkit

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// The task RPCs answer with the test's functions, as the caller the
// service authentication admitted, after Check; those left unset answer
// UNIMPLEMENTED. Each call is counted.
func TestFakeAggregatorTaskHooks(t *testing.T) {
	const token = "tasks-test-token"
	var checked []string
	f := &FakeAggregator{
		Check: func(_ context.Context, method string, _ any) error {
			checked = append(checked, method)
			if method == "CancelTask" {
				return status.Error(codes.FailedPrecondition, "checked")
			}
			return nil
		},
		ListTasksFunc: func(ctx context.Context, req *aggregatorv1.ListTasksRequest) (*aggregatorv1.ListTasksResponse, error) {
			return &aggregatorv1.ListTasksResponse{Tasks: []*aggregatorv1.Task{{TaskId: "t1.of-" + svcauth.PrincipalFrom(ctx).GetSubject(), Tool: req.GetServer()}}}, nil
		},
		GetTaskFunc: func(_ context.Context, req *aggregatorv1.GetTaskRequest) (*aggregatorv1.GetTaskResponse, error) {
			return &aggregatorv1.GetTaskResponse{Task: &aggregatorv1.Task{TaskId: req.GetTaskId(), Status: "completed"}}, nil
		},
		CancelTaskFunc: func(context.Context, *aggregatorv1.CancelTaskRequest) (*aggregatorv1.CancelTaskResponse, error) {
			t.Error("CancelTaskFunc ran though Check refused the call")
			return nil, nil
		},
	}
	creds := []config.ServiceCredential{{Name: "test", Token: token, AssertPrincipals: true, Allow: []string{"switchboard.aggregator.v1.AggregatorService/*"}}}
	conn, err := rpc.Dial(config.Endpoint{Address: Serve(t, creds, f.Register).Addr, Token: token}, config.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	client := aggregatorv1.NewAggregatorServiceClient(conn)
	alice := &commonv1.Principal{Subject: "alice"}

	list, err := client.ListTasks(t.Context(), &aggregatorv1.ListTasksRequest{Principal: alice, Server: "forecast"})
	if err != nil || len(list.GetTasks()) != 1 || !proto.Equal(list.GetTasks()[0], &aggregatorv1.Task{TaskId: "t1.of-alice", Tool: "forecast"}) {
		t.Fatalf("ListTasks: %v, %v; want alice's task through forecast", list, err)
	}
	got, err := client.GetTask(t.Context(), &aggregatorv1.GetTaskRequest{Principal: alice, TaskId: "t1.x"})
	if err != nil || got.GetTask().GetTaskId() != "t1.x" || got.GetTask().GetStatus() != "completed" {
		t.Fatalf("GetTask: %v, %v", got, err)
	}
	if _, err := client.CancelTask(t.Context(), &aggregatorv1.CancelTaskRequest{Principal: alice, TaskId: "t1.x"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("CancelTask refused by Check: %v", err)
	}
	if _, err := client.UpdateTask(t.Context(), &aggregatorv1.UpdateTaskRequest{Principal: alice, TaskId: "t1.x"}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("UpdateTask without UpdateTaskFunc: %v, want UNIMPLEMENTED", err)
	}
	for _, m := range []string{"ListTasks", "GetTask", "CancelTask", "UpdateTask"} {
		if f.Calls(m) != 1 {
			t.Errorf("%s counted %d calls, want 1", m, f.Calls(m))
		}
	}
	if want := []string{"ListTasks", "GetTask", "CancelTask", "UpdateTask"}; len(checked) != len(want) {
		t.Errorf("Check ran for %v, want %v", checked, want)
	}
}
