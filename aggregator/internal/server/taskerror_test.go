package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

// TestKeptErrorIsBounded: a task keeps an error within the bound of a
// result (aggregator.tasks.maxResultBytes), its code and the start of its
// message kept; one within the bound is kept whole.
func TestKeptErrorIsBounded(t *testing.T) {
	tr := &taskRunner{cfg: config.Tasks{MaxResultBytes: 4096}}
	small := tr.keptError(-32000, "boom", json.RawMessage(`{"why":"x"}`))
	if small != `{"code":-32000,"data":{"why":"x"},"message":"boom"}` {
		t.Errorf("a small error: %s", small)
	}
	for name, kept := range map[string]string{
		"data":    tr.keptError(-32000, "boom", json.RawMessage(`"`+strings.Repeat("x", 8192)+`"`)),
		"message": tr.keptError(-32001, strings.Repeat("é", 8192), nil),
	} {
		var e struct {
			Code    int64           `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal([]byte(kept), &e); err != nil || len(kept) > 4096 || e.Data != nil ||
			!strings.Contains(e.Message, "larger than a task keeps") || e.Code == 0 {
			t.Errorf("an error past the bound in its %s: %d bytes, %.300s (%v)", name, len(kept), kept, err)
		}
	}
}

// TestTaskOfSaysWhenItsResultIsAnError: a completed task whose result is
// a tool error says so (2025-11-25 calls it failed), in a tasks/get and
// on a page of tasks/list, which holds no result; one whose result is
// not, or that is not completed, does not.
func TestTaskOfSaysWhenItsResultIsAnError(t *testing.T) {
	for _, c := range []struct {
		status, result string
		want           bool
	}{
		{"completed", `{"content":[],"isError":true}`, true},
		{"completed", `{"content":[{"type":"text","text":"\"isError\":true"}]}`, false},
		{"completed", `{"content":[],"isError":false}`, false},
		{"working", `{"isError":true}`, false},
	} {
		rec := &indexerv1.TaskRecord{Status: c.status, ResultJson: c.result}
		if got := taskOf(taskCall{ID: "t1.x"}, rec, false).GetResultIsError(); got != c.want {
			t.Errorf("%s %s: result_is_error %v, want %v", c.status, c.result, got, c.want)
		}
		// A page of tasks/list holds no result: what settle wrote of it
		// says the same.
		tr := &taskRunner{cfg: config.Tasks{MaxResultBytes: 1 << 20}}
		settled := &indexerv1.TaskRecord{}
		tr.settle(settled, 0, roundOutcome{resp: &aggregatorv1.CallToolResponse{ResultJson: c.result}})
		settled.ResultJson = ""
		if got := taskOf(taskCall{ID: "t1.x"}, settled, false).GetResultIsError(); c.status == "completed" && got != c.want {
			t.Errorf("%s, settled and listed without its result: result_is_error %v, want %v", c.result, got, c.want)
		}
	}
}
