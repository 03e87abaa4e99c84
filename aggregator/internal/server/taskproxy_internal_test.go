package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

// TestLegacyTaskToolReadsTheDefinitionAsClientsDo: a 2025-11-25 tool
// declares tasks by execution.taskSupport, read as clients read it:
// member names match case-sensitively, so a declaration under other
// names clients ignore ("Execution", "TaskSupport") is none here either.
func TestLegacyTaskToolReadsTheDefinitionAsClientsDo(t *testing.T) {
	b := backend.New(backend.Config{Name: "legacy", URL: "http://127.0.0.1:1/mcp"}, nil, nil)
	t.Cleanup(b.Close)
	for def, want := range map[string]bool{
		`{"name":"t","execution":{"taskSupport":"optional"}}`:      true,
		`{"name":"t","execution":{"taskSupport":"required"}}`:      true,
		`{"name":"t","execution":{"taskSupport":"forbidden"}}`:     false,
		`{"name":"t","Execution":{"taskSupport":"optional"}}`:      false,
		`{"name":"t","execution":{"TaskSupport":"optional"}}`:      false,
		`{"name":"t","execution":{"task\u0053upport":"optional"}}`: true,
		`{"name":"t"}`: false,
	} {
		if got := legacyTaskTool(b, def); got != want {
			t.Errorf("legacyTaskTool(%s) = %v, want %v", def, got, want)
		}
	}
}

// A client's TTL is at least minTaskTTL, within the cap: one of a
// millisecond was once refused by the store as malformed, and one of a
// few expired before the client could poll it.
func TestTaskTTLHasAFloor(t *testing.T) {
	r := &taskRunner{cfg: config.Tasks{DefaultTTL: config.Duration(time.Hour), MaxTTL: config.Duration(24 * time.Hour)}}
	for asked, want := range map[int64]time.Duration{1: minTaskTTL, 5: minTaskTTL, 0: time.Hour, 60_000: time.Minute, 1 << 62: 24 * time.Hour} {
		if got := r.ttl(asked); got != want {
			t.Errorf("ttl %d ms became %v, want %v", asked, got, want)
		}
	}
	short := &taskRunner{cfg: config.Tasks{DefaultTTL: config.Duration(time.Second), MaxTTL: config.Duration(5 * time.Second)}}
	if got := short.ttl(1); got != 5*time.Second {
		t.Errorf("with maxTTL 5s, ttl 1 ms became %v", got)
	}
}

// advanceAnswers is a task store whose AdvanceTask answers from a list.
type advanceAnswers struct {
	indexerv1.ClusterStateServiceClient
	answers []*indexerv1.AdvanceTaskResponse
	errs    []error
}

func (a *advanceAnswers) AdvanceTask(context.Context, *indexerv1.AdvanceTaskRequest, ...grpc.CallOption) (*indexerv1.AdvanceTaskResponse, error) {
	resp, err := a.answers[0], a.errs[0]
	a.answers, a.errs = a.answers[1:], a.errs[1:]
	return resp, err
}

// A round's end is audited once its outcome is stored, also when the
// store's answer to the try that stored it was lost and the next try
// found the task ended with that very outcome; not when the task ended
// otherwise (cancelled) first.
func TestRoundEndOfAnOutcomeStoredBeforeItsAnswerWasLost(t *testing.T) {
	out := roundOutcome{resp: &aggregatorv1.CallToolResponse{ResultJson: `{"content":[]}`}}
	var settled indexerv1.TaskRecord
	(&taskRunner{}).settle(&settled, 0, out)
	for name, c := range map[string]struct {
		stored *indexerv1.TaskRecord
		want   bool
	}{
		"stored by the lost try": {&indexerv1.TaskRecord{Round: 0, Status: settled.GetStatus(), StatusMessage: settled.GetStatusMessage()}, true},
		"cancelled first":        {&indexerv1.TaskRecord{Round: 0, Status: "cancelled", StatusMessage: "cancelled by the client"}, false},
	} {
		t.Run(name, func(t *testing.T) {
			store := &advanceAnswers{
				answers: []*indexerv1.AdvanceTaskResponse{nil, {Record: c.stored, Applied: false}},
				errs:    []error{status.Error(codes.Unavailable, "connection reset"), nil},
			}
			r := &taskRunner{store: store, log: slog.New(slog.NewTextHandler(io.Discard, nil)), running: map[string]heldRound{}}
			r.hold("k", 0, func(error) {})
			done := make(chan roundOutcome, 1)
			done <- out
			ended := false
			r.finish("k", 0, time.Now().Add(time.Hour), done, func(string, roundOutcome) { ended = true })
			if ended != c.want {
				t.Fatalf("task_end recorded: %v, want %v", ended, c.want)
			}
		})
	}
}

// A task whose next round finds its held call gone (the replica holding
// it stopped) fails with advice a task's client can follow, not the
// plain retry's "call again without requestState".
func TestTaskWhoseHeldCallIsGoneSaysCallAgain(t *testing.T) {
	r := &taskRunner{log: slog.New(slog.NewTextHandler(io.Discard, nil)), cfg: config.Tasks{MaxResultBytes: config.DefaultTaskResultBytes}}
	got := r.taskError(errHeldCallGone)
	if !strings.Contains(got, "call the tool again") || strings.Contains(got, "without requestState") {
		t.Fatalf("the task's error: %s", got)
	}
}

// A backend's task that completed with a tool error is kept with the
// marker a page of tasks/list reads (it holds no results), whatever
// status message the backend gave: with the backend's own message the
// list called completed a task that tasks/get called failed.
func TestBackendTaskWithAToolErrorKeepsTheMarker(t *testing.T) {
	r := &taskRunner{log: slog.New(slog.NewTextHandler(io.Discard, nil)), cfg: config.Tasks{MaxResultBytes: config.DefaultTaskResultBytes}}
	for _, message := range []string{"", "done"} {
		adv, err := r.keptState("k", &backendTaskState{Status: "completed", StatusMessage: message,
			Result: json.RawMessage(`{"content":[{"type":"text","text":"boom"}],"isError":true}`)})
		if err != nil || adv.GetStatusMessage() != toolErrorMessage {
			t.Errorf("backend message %q: kept %v, %v; want the tool error's marker", message, adv, err)
		}
	}
}
