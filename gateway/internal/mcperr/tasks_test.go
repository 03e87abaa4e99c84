package mcperr

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	"github.com/switchboard-mcp/switchboard/services/apierr"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

// TestTaskReasons: a tool that runs only as a task, called without a
// task request, is -32021 naming the tasks extension for a Modern client
// and -32601 saying to send params.task for a Legacy one; a caller at its
// tasks bound gets a clear -32603 that is not logged as a failure. Both
// whatever status code carries the reason.
func TestTaskReasons(t *testing.T) {
	for _, code := range []codes.Code{codes.FailedPrecondition, codes.ResourceExhausted} {
		required := status.Convert(apierr.New(code, commonv1.ErrorReason_ERROR_REASON_TASK_REQUIRED, "beta_batch runs only as a task"))
		got, internal := FromStatus(required, mcpspec.EraModern, "tools/call")
		data, _ := json.Marshal(got.Data)
		if got.Code != wire.CodeMissingCapability || internal || got.ModernStatus() != http.StatusBadRequest ||
			string(data) != `{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}` {
			t.Errorf("%s task required, Modern: %+v (data %s) internal=%v", code, got, data, internal)
		}
		got, internal = FromStatus(required, mcpspec.EraLegacy, "tools/call")
		if got.Code != wire.CodeMethodNotFound || internal || !strings.Contains(got.Message, "params.task") || got.Data != nil {
			t.Errorf("%s task required, Legacy: %+v internal=%v", code, got, internal)
		}

		full := status.Convert(apierr.New(code, commonv1.ErrorReason_ERROR_REASON_TASKS_FULL, "principal holds 100 tasks"))
		for _, era := range []mcpspec.Era{mcpspec.EraModern, mcpspec.EraLegacy} {
			got, internal := FromStatus(full, era, "tools/call")
			if got.Code != wire.CodeInternalError || internal || !strings.Contains(got.Message, "too many tasks") || got.HTTPStatus != 0 {
				t.Errorf("%s tasks full, %s: %+v internal=%v", code, era, got, internal)
			}
		}
	}
	// An unknown task is invalid params, like any item not found.
	if got, _ := FromStatus(status.New(codes.NotFound, "unknown task t1.x"), mcpspec.EraModern, "tasks/get"); got.Code != wire.CodeInvalidParams || got.ModernStatus() != http.StatusBadRequest {
		t.Errorf("unknown task: %+v", got)
	}
}

// TestTaskFailed: a failed task's stored error reaches its client by the
// rule of a backend's error: codes that describe the client's request
// are kept with message and data, codes of the services' own exchanges
// become internal errors, and an unreadable one is an internal error.
func TestTaskFailed(t *testing.T) {
	got := TaskFailed(`{"code":-32602,"message":"bad input","data":{"field":"a"}}`, mcpspec.EraLegacy, nil)
	if data, _ := json.Marshal(got.Data); got.Code != wire.CodeInvalidParams || got.Message != "bad input" || string(data) != `{"field":"a"}` {
		t.Errorf("invalid params: %+v", got)
	}
	if got := TaskFailed(`{"code":-32002,"message":"gone"}`, mcpspec.EraModern, nil); got.Code != wire.CodeInvalidParams || got.Data != nil {
		t.Errorf("resource not found under Modern: %+v", got)
	}
	if got := TaskFailed(`{"code":-32020,"message":"header mismatch on the backend hop"}`, mcpspec.EraModern, nil); got.Code != wire.CodeInternalError || strings.Contains(got.Message, "hop") {
		t.Errorf("a hop's error: %+v", got)
	}
	if got := TaskFailed(`not json`, mcpspec.EraLegacy, nil); got.Code != wire.CodeInternalError {
		t.Errorf("unreadable: %+v", got)
	}
	// A task that failed asking for a URL elicitation (2025-11-25) tells a
	// client that declared URL mode so, with its data, as a direct call's
	// error does; any other client gets an internal error.
	urlRequired := `{"code":-32042,"message":"sign in first","data":{"elicitations":[{"mode":"url","elicitationId":"e1","url":"https://auth.example/x","message":"sign in"}]}}`
	if got := TaskFailed(urlRequired, mcpspec.EraLegacy, json.RawMessage(`{"elicitation":{"url":{}}}`)); got.Code != wire.CodeURLElicitationRequired || got.Data == nil {
		t.Errorf("URL elicitation required, for a client with URL mode: %+v", got)
	}
	if got := TaskFailed(urlRequired, mcpspec.EraLegacy, json.RawMessage(`{"elicitation":{}}`)); got.Code != wire.CodeInternalError {
		t.Errorf("URL elicitation required, for a client without URL mode: %+v", got)
	}
	if got := TaskCancelled("t1.x"); got.Code != wire.CodeInternalError || !strings.Contains(got.Message, "cancelled") {
		t.Errorf("cancelled: %+v", got)
	}
}
