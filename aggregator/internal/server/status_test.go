package server

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/override"
	"github.com/switchboard-mcp/switchboard/services/apierr"
	"github.com/switchboard-mcp/switchboard/services/config"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// TestStatusOfOverrideErrors: a call that sets a hidden argument is the
// client's INVALID_ARGUMENT with reason HIDDEN_ARGUMENT, naming the
// argument and never its value, however the call path wraps the error;
// arguments that are no object answer as the call path always did.
func TestStatusOfOverrideErrors(t *testing.T) {
	set, err := override.Compile([]config.ToolOverride{{Backend: "tickets", Tool: "search",
		Arguments: map[string]config.ArgumentOverride{"apiKey": {Hidden: true, Value: "s3cr3t-value"}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, callErr := set.Tool("tickets", "search").Arguments([]byte(`{"apiKey":"guess"}`))
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	for _, err := range []error{callErr, fmt.Errorf("tools/call tickets.search: %w", callErr)} {
		got := toStatus(context.Background(), log, "CallTool", err)
		st := status.Convert(got)
		reason, meta := apierr.Info(got)
		if st.Code() != codes.InvalidArgument || reason != commonv1.ErrorReason_ERROR_REASON_HIDDEN_ARGUMENT {
			t.Fatalf("status %v, reason %v", st, reason)
		}
		if !strings.Contains(st.Message(), `"apiKey"`) || strings.Contains(st.Message(), "s3cr3t") || strings.Contains(st.Message(), "tickets.search") {
			t.Fatalf("message %q", st.Message())
		}
		if meta["argument"] != "apiKey" {
			t.Fatalf("metadata %v", meta)
		}
	}
	_, notObject := set.Tool("tickets", "search").Arguments([]byte(`[1]`))
	got := toStatus(context.Background(), log, "CallTool", notObject)
	if st := status.Convert(got); st.Code() != codes.InvalidArgument || apierr.Reason(got) != commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT || st.Message() != "arguments_json must be a JSON object" {
		t.Fatalf("not an object: %v", st)
	}
	if logged.Len() != 0 {
		t.Fatalf("a client's mistake was logged: %s", logged.String())
	}
}
