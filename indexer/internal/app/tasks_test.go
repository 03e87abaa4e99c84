package app_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboard-mcp/switchboard/services/config"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// tasksToken is a credential allowed the task RPCs, asserting principals
// as an aggregator's does.
const tasksToken = "tasks-test-token"

func withTasksCredential(c *config.Config) {
	c.ServiceAuth.Credentials = append(c.ServiceAuth.Credentials, config.ServiceCredential{Name: "tasks", Token: tasksToken, AssertPrincipals: true,
		Allow: []string{"switchboard.indexer.v1.ClusterStateService/*"}})
}

// tasks is a ClusterStateService client of h with tasksToken.
func (h *harness) tasks(t *testing.T) indexerv1.ClusterStateServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(h.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(svcauth.TokenCredentials{Token: tasksToken}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return indexerv1.NewClusterStateServiceClient(conn)
}

// A task's life through two indexer replicas on one database, over gRPC:
// created through one, it is read, advanced, answered, renewed, cancelled
// and listed through either; a duplicate key, an owner past its bound and
// another owner's read are refused with the contract's statuses.
func TestTasksAcrossReplicas(t *testing.T) {
	db := env.NewDatabase(t)
	a := start(t, db, withTasksCredential)
	b := &harness{agg: a.agg, aggAddr: a.aggAddr}
	b.startIndexer(t, db, withTasksCredential)
	a.waitServing(t)
	b.waitServing(t)
	ta, tb := a.tasks(t), b.tasks(t)
	ctx := t.Context()
	key := strings.Repeat("5e", 32)
	lease := timestamppb.New(time.Now().Add(time.Minute))
	record := &indexerv1.TaskRecord{Key: key, Owner: "alice", Server: "sales", Tool: "report", Backend: "alpha", Status: "working",
		ExpiresAt: timestamppb.New(time.Now().Add(time.Hour)), CallJson: `{"name":"report"}`, Runner: "agg-1", LeaseExpiresAt: lease}
	limits := &indexerv1.TaskLimits{PerOwner: 1, Total: 100}
	created, err := ta.CreateTask(ctx, &indexerv1.CreateTaskRequest{Record: record, Limits: limits})
	if err != nil || created.GetRecord().GetCreatedAt() == nil || created.GetRecord().GetStatus() != "working" {
		t.Fatalf("create: %v, %v", created, err)
	}
	_, err = tb.CreateTask(ctx, &indexerv1.CreateTaskRequest{Record: record})
	wantReason(t, err, codes.AlreadyExists, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED)
	second := proto.Clone(record).(*indexerv1.TaskRecord)
	second.Key = strings.Repeat("6f", 32)
	_, err = tb.CreateTask(ctx, &indexerv1.CreateTaskRequest{Record: second, Limits: limits})
	wantReason(t, err, codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_TASKS_FULL)

	ref := &indexerv1.TaskRef{Key: key, Owner: "alice", Server: "sales"}
	got, err := tb.GetTask(ctx, &indexerv1.GetTaskRequest{Ref: ref})
	if err != nil || got.GetRecord().GetRunner() != "agg-1" || !got.GetRecord().GetCreatedAt().AsTime().Equal(created.GetRecord().GetCreatedAt().AsTime()) {
		t.Fatalf("read through the other replica: %v, %v", got, err)
	}
	_, err = tb.GetTask(ctx, &indexerv1.GetTaskRequest{Ref: &indexerv1.TaskRef{Key: key, Owner: "bob", Server: "sales"}})
	wantReason(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)

	adv, err := tb.AdvanceTask(ctx, &indexerv1.AdvanceTaskRequest{Key: key, Runner: "agg-1", Status: "input_required",
		InputRequestsJson: `{"q":{"method":"elicitation/create"}}`, RequestState: "state"})
	if err != nil || !adv.GetApplied() || adv.GetRecord().GetRunner() != "" {
		t.Fatalf("advance to input_required: %v, %v", adv, err)
	}
	ans, err := ta.AnswerTask(ctx, &indexerv1.AnswerTaskRequest{Ref: ref, InputResponsesJson: `{"q":{"action":"accept"}}`, Runner: "agg-2", LeaseExpiresAt: lease})
	if err != nil || !ans.GetResume() || ans.GetRecord().GetRound() != 1 || ans.GetRecord().GetRunner() != "agg-2" || ans.GetRecord().GetRequestState() != "state" {
		t.Fatalf("answer: %v, %v", ans, err)
	}
	renewed, err := tb.RenewTaskLeases(ctx, &indexerv1.RenewTaskLeasesRequest{Runner: "agg-2", Keys: []string{key}, LeaseExpiresAt: lease})
	if err != nil || len(renewed.GetEndedKeys()) != 0 {
		t.Fatalf("renew the running task: %v, %v", renewed, err)
	}
	cancelled, err := ta.CancelTask(ctx, &indexerv1.CancelTaskRequest{Ref: ref, StatusMessage: "the client cancelled it"})
	if err != nil || cancelled.GetRecord().GetStatus() != "cancelled" || cancelled.GetRecord().GetLeaseExpiresAt() != nil {
		t.Fatalf("cancel: %v, %v", cancelled, err)
	}
	renewed, err = tb.RenewTaskLeases(ctx, &indexerv1.RenewTaskLeasesRequest{Runner: "agg-2", Keys: []string{key}, LeaseExpiresAt: lease})
	if err != nil || len(renewed.GetEndedKeys()) != 1 || renewed.GetEndedKeys()[0] != key {
		t.Fatalf("renew the cancelled task: %v, %v; want it ended", renewed, err)
	}
	listed, err := tb.ListTasks(ctx, &indexerv1.ListTasksRequest{Owner: "alice", Server: "sales"})
	if err != nil || len(listed.GetRecords()) != 1 || listed.GetRecords()[0].GetStatus() != "cancelled" || listed.GetNextCursor() != "" {
		t.Fatalf("list: %v, %v", listed, err)
	}
}
