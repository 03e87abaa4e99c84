package server_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// A backend refusing a call as malformed (go-sdk answers arguments nested
// deeper than 1000 levels with a plain HTTP 400) is the caller's error: it
// is INVALID_ARGUMENT, the backend stays healthy, and its session (shared
// by every caller) stays open.
func TestMalformedCallIsInvalidArgumentNotBackendFailure(t *testing.T) {
	h, _, legacy := twoEras(t)
	ctx := context.Background()
	nested := `{"x":` + strings.Repeat(`[`, 1100) + strings.Repeat(`]`, 1100) + `}`
	for _, name := range []string{"modern_echo", "legacy_echo"} {
		// Open the session first, so that a broken one would show.
		if _, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Name: name, ArgumentsJson: `{"a":1}`}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sessions := len(distinct(legacy.headerValues("Mcp-Session-Id")))
		for range 5 {
			_, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Name: name, ArgumentsJson: nested})
			wantStatus(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
			if strings.Contains(err.Error(), "nesting") || strings.Contains(err.Error(), "127.0.0.1") {
				t.Fatalf("%s: backend detail reached the caller: %v", name, err)
			}
		}
		resp, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Name: name, ArgumentsJson: `{"a":2}`})
		if err != nil || !strings.Contains(resultText(t, resp.GetResultJson()), `{"a":2}`) {
			t.Fatalf("%s after rejections: %v %v", name, resp, err)
		}
		if got := len(distinct(legacy.headerValues("Mcp-Session-Id"))); got != sessions {
			t.Fatalf("%s: legacy sessions went from %d to %d: the rejection broke the shared session", name, sessions, got)
		}
		backendName := strings.TrimSuffix(name, "_echo")
		if b := backendHealth(t, h, backendName); b.GetHealth() != aggregatorv1.BackendHealth_BACKEND_HEALTH_HEALTHY || b.GetLastError() != "" {
			t.Fatalf("%s: health after rejections: %v", backendName, b)
		}
	}
}

func distinct(values []string) map[string]bool {
	out := map[string]bool{}
	for _, v := range values {
		out[v] = true
	}
	return out
}
