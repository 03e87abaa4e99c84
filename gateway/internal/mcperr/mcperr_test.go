package mcperr

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	"github.com/switchboard-mcp/switchboard/services/apierr"
	"github.com/switchboard-mcp/switchboard/services/backenderr"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
	"github.com/switchboard-mcp/switchboard/services/ratelimit"
)

// TestStatusToMCP covers every gRPC code: the MCP code, the Modern HTTP
// status, and whether the service's message may reach the client.
func TestStatusToMCP(t *testing.T) {
	const secret = "db password=hunter2 at 10.0.0.7"
	cases := []struct {
		code       codes.Code
		method     string
		era        mcpspec.Era
		mcpCode    int
		httpStatus int
		passMsg    bool // the service message reaches the client
		internal   bool
	}{
		{codes.Canceled, "tools/call", mcpspec.EraModern, wire.CodeInternalError, 200, false, false},
		{codes.Unknown, "tools/call", mcpspec.EraModern, wire.CodeInternalError, 200, false, true},
		{codes.InvalidArgument, "tools/list", mcpspec.EraModern, wire.CodeInvalidParams, 400, true, false},
		{codes.InvalidArgument, "tools/list", mcpspec.EraLegacy, wire.CodeInvalidParams, 200, true, false},
		{codes.DeadlineExceeded, "tools/call", mcpspec.EraModern, wire.CodeInternalError, 200, false, true},
		{codes.NotFound, "tools/call", mcpspec.EraModern, wire.CodeInvalidParams, 400, true, false},
		{codes.NotFound, "resources/read", mcpspec.EraModern, wire.CodeInvalidParams, 400, false, false},
		{codes.NotFound, "resources/read", mcpspec.EraLegacy, wire.CodeResourceNotFound, 200, false, false},
		{codes.AlreadyExists, "tools/call", mcpspec.EraModern, wire.CodeInternalError, 200, false, true},
		{codes.PermissionDenied, "tools/call", mcpspec.EraModern, wire.CodeInternalError, 200, false, true},
		{codes.ResourceExhausted, "tools/call", mcpspec.EraModern, wire.CodeInternalError, 200, false, true},
		{codes.FailedPrecondition, "tools/call", mcpspec.EraModern, wire.CodeInternalError, 200, false, true},
		{codes.Aborted, "tools/call", mcpspec.EraModern, wire.CodeInternalError, 200, false, true},
		{codes.OutOfRange, "tools/list", mcpspec.EraModern, wire.CodeInvalidParams, 400, true, false},
		{codes.Unimplemented, "completion/complete", mcpspec.EraModern, wire.CodeMethodNotFound, 404, false, true},
		{codes.Unimplemented, "tasks/get", mcpspec.EraModern, wire.CodeMethodNotFound, 404, false, true},
		// The aggregator of a rolling upgrade that lacks an RPC the
		// gateway calls: no "method not found" for a method it offers.
		{codes.Unimplemented, "tools/call", mcpspec.EraModern, wire.CodeInternalError, 200, false, true},
		{codes.Internal, "tools/call", mcpspec.EraModern, wire.CodeInternalError, 200, false, true},
		{codes.Unavailable, "tools/call", mcpspec.EraModern, wire.CodeInternalError, 200, false, true},
		{codes.DataLoss, "tools/call", mcpspec.EraModern, wire.CodeInternalError, 200, false, true},
		{codes.Unauthenticated, "tools/call", mcpspec.EraModern, wire.CodeInternalError, 200, false, true},
	}
	seen := map[codes.Code]bool{}
	for _, tc := range cases {
		seen[tc.code] = true
		t.Run(tc.code.String()+"/"+tc.method+"/"+tc.era.String(), func(t *testing.T) {
			got, internal := FromStatus(status.New(tc.code, secret), tc.era, tc.method)
			if got.Code != tc.mcpCode || internal != tc.internal {
				t.Fatalf("got %d internal=%v, want %d internal=%v", got.Code, internal, tc.mcpCode, tc.internal)
			}
			status := http.StatusOK // Legacy errors always travel in a 200
			if tc.era == mcpspec.EraModern {
				status = got.ModernStatus()
			}
			if status != tc.httpStatus {
				t.Fatalf("HTTP %d, want %d", status, tc.httpStatus)
			}
			if strings.Contains(got.Message, secret) != tc.passMsg {
				t.Fatalf("message %q: service message passed = %v, want %v", got.Message, !tc.passMsg, tc.passMsg)
			}
		})
	}
	for c := codes.Canceled; c <= codes.Unauthenticated; c++ {
		if !seen[c] {
			t.Errorf("code %s not covered", c)
		}
	}
}

// TestGRPCErrorLogsDetail checks that internal detail goes to the log and
// not to the client, and that the reason picks the message.
func TestGRPCErrorLogsDetail(t *testing.T) {
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	err := apierr.New(codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_BACKEND_UNAVAILABLE, "backend weather at 10.1.2.3 refused")
	got := FromError(context.Background(), log, err, mcpspec.EraModern, "tools/call")
	if strings.Contains(got.Message, "10.1.2.3") || !strings.Contains(got.Message, "unavailable") {
		t.Fatalf("client message %q", got.Message)
	}
	if !strings.Contains(logged.String(), "10.1.2.3") || !strings.Contains(logged.String(), "BACKEND_UNAVAILABLE") {
		t.Fatalf("log lacks detail: %s", logged.String())
	}
}

// TestBackendErrorPassThrough: a backend's own JSON-RPC error, passed by
// the aggregator as a BackendError status detail, reaches the client when it
// describes the client's request, per era.
func TestBackendErrorPassThrough(t *testing.T) {
	backendStatus := func(code, data string) *status.Status {
		msg := "backend says no"
		n, err := strconv.ParseInt(code, 10, 64)
		if err != nil {
			msg = "" // a detail without a message is malformed
		}
		st, _ := status.FromError(backenderr.New("backend error: backend says no", &aggregatorv1.BackendError{Code: n, Message: msg, DataJson: data}))
		return st
	}
	urlMode := json.RawMessage(`{"elicitation":{"form":{},"url":{}}}`)
	elicitations := `{"elicitations":[{"mode":"url","elicitationId":"e1","url":"https://auth.example/x","message":"sign in"}]}`
	cases := []struct {
		code, data string
		era        mcpspec.Era
		caps       json.RawMessage
		want       int
		wantData   string
		method     string // tools/call when empty
	}{
		// 2025-11-25's URL elicitation required reaches a Legacy client
		// that declared URL mode, with its elicitations; no other client.
		{"-32042", elicitations, mcpspec.EraLegacy, urlMode, wire.CodeURLElicitationRequired, elicitations, ""},
		{"-32042", elicitations, mcpspec.EraLegacy, json.RawMessage(`{"elicitation":{}}`), wire.CodeInternalError, "", ""},
		{"-32042", elicitations, mcpspec.EraLegacy, nil, wire.CodeInternalError, "", ""},
		{"-32042", elicitations, mcpspec.EraModern, urlMode, wire.CodeInternalError, "", ""},
		{"-32021", `{"requiredCapabilities":{"sampling":{}}}`, mcpspec.EraModern, nil, wire.CodeMissingCapability, `{"requiredCapabilities":{"sampling":{}}}`, ""},
		{"-32021", "", mcpspec.EraLegacy, nil, wire.CodeInternalError, "", ""},
		{"-32602", "", mcpspec.EraModern, nil, wire.CodeInvalidParams, "", ""},
		{"-32002", `{"uri":"x"}`, mcpspec.EraLegacy, nil, wire.CodeResourceNotFound, `{"uri":"x"}`, ""},
		{"-32002", "", mcpspec.EraModern, nil, wire.CodeInvalidParams, "", ""},
		// A resource not found the 2026-07-28 way (go-sdk's in both eras)
		// is 2025-11-25's -32002 for a Legacy client, without the
		// backend's data (the read names the URI asked for); other
		// invalid params stay so.
		{"-32602", `{"uri":"x"}`, mcpspec.EraLegacy, nil, wire.CodeResourceNotFound, "null", "resources/read"},
		{"-32602", `{"uri":"x"}`, mcpspec.EraModern, nil, wire.CodeInvalidParams, "null", "resources/read"},
		{"-32602", "", mcpspec.EraLegacy, nil, wire.CodeInvalidParams, "", "resources/read"},
		{"-32602", `{"uri":"x"}`, mcpspec.EraLegacy, nil, wire.CodeInvalidParams, `{"uri":"x"}`, "prompts/get"},
		// A backend without a method the gateway routed to it failed: the
		// gateway has the method (a 404 would say it has not).
		{"-32601", "", mcpspec.EraModern, nil, wire.CodeInternalError, "", ""},
		{"-32022", "", mcpspec.EraModern, nil, wire.CodeInternalError, "", ""},
		{"-32000", "", mcpspec.EraModern, nil, wire.CodeInternalError, "", ""},
		{"junk", "", mcpspec.EraModern, nil, wire.CodeInternalError, "", ""},
	}
	for _, tc := range cases {
		logs := &bytes.Buffer{}
		method := tc.method
		if method == "" {
			method = "tools/call"
		}
		got := FromCallError(context.Background(), slog.New(slog.NewTextHandler(logs, nil)), backendStatus(tc.code, tc.data).Err(), tc.era, method, tc.caps)
		data, _ := json.Marshal(got.Data)
		if got.Code != tc.want || logs.Len() > 0 || (tc.wantData != "" && string(data) != tc.wantData) {
			t.Errorf("%s/%s/%s: got %d %s (logged %q), want %d %s", tc.code, tc.era, method, got.Code, data, logs, tc.want, tc.wantData)
		}
	}
}

// TestHeaderMismatchReason: the aggregator's header check becomes -32020
// (HTTP 400 under Modern), other invalid arguments -32602.
func TestHeaderMismatchReason(t *testing.T) {
	const text = "header mismatch: Mcp-Param-Region: missing for argument region"
	st, _ := status.FromError(apierr.New(codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_HEADER_MISMATCH, text, "header", "Mcp-Param-Region"))
	got, internal := FromStatus(st, mcpspec.EraModern, "tools/call")
	if got.Code != wire.CodeHeaderMismatch || got.ModernStatus() != 400 || internal || got.Message != text {
		t.Fatalf("header mismatch: %+v internal=%v", got, internal)
	}
	st, _ = status.FromError(apierr.New(codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "bad"))
	if got, _ := FromStatus(st, mcpspec.EraModern, "tools/call"); got.Code != wire.CodeInvalidParams {
		t.Fatalf("invalid argument: %+v", got)
	}
}

// TestHiddenArgumentReason: the aggregator's refusal of a call that sets an
// argument a tool override hides is the client's -32602 (HTTP 400 under
// Modern) in both eras, with the aggregator's message naming the argument.
func TestHiddenArgumentReason(t *testing.T) {
	const msg = `argument "apiKey" is fixed by the server's configuration; a call may not set it`
	st, _ := status.FromError(apierr.New(codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_HIDDEN_ARGUMENT, msg, "argument", "apiKey"))
	for _, era := range []mcpspec.Era{mcpspec.EraModern, mcpspec.EraLegacy} {
		got, internal := FromStatus(st, era, "tools/call")
		if got.Code != wire.CodeInvalidParams || !strings.HasSuffix(got.Message, msg) || internal {
			t.Fatalf("%s: %+v internal=%v", era, got, internal)
		}
		if era == mcpspec.EraModern && got.ModernStatus() != http.StatusBadRequest {
			t.Fatalf("Modern HTTP %d", got.ModernStatus())
		}
	}
}

// TestRateLimited: a rate limit's refusal is error code 429 in HTTP 429 with
// Retry-After and data.retryAfterSeconds, in both eras, and is not an
// internal error (nothing is logged as a failure).
func TestRateLimited(t *testing.T) {
	for _, era := range []mcpspec.Era{mcpspec.EraModern, mcpspec.EraLegacy} {
		for _, method := range []string{"tools/call", "resources/read", "prompts/get"} {
			err := apierr.New(codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_RATE_LIMITED, "rate limit per-user exceeded",
				"retryAfterSeconds", "3", "limit", "per-user")
			got, internal := FromStatus(status.Convert(err), era, method)
			if internal || got.Code != wire.CodeRateLimited || got.ModernStatus() != http.StatusTooManyRequests || got.RetryAfter != 3 {
				t.Fatalf("%v %s: %+v internal=%v; want 429, 429, Retry-After 3", era, method, got, internal)
			}
			data, _ := json.Marshal(got.Data)
			if string(data) != `{"retryAfterSeconds":3}` {
				t.Fatalf("data %s", data)
			}
		}
	}
	// A missing or bad retry-after still tells the client to wait.
	for _, v := range []string{"", "x", "0", "-4"} {
		if e := RateLimited(v); e.RetryAfter != 1 {
			t.Fatalf("RateLimited(%q).RetryAfter = %d, want 1", v, e.RetryAfter)
		}
	}
	if e := RateLimited("99999"); e.RetryAfter != ratelimit.MaxRetryAfterSeconds {
		t.Fatalf("RetryAfter %d, want the bound %d", e.RetryAfter, ratelimit.MaxRetryAfterSeconds)
	}
	// Another RESOURCE_EXHAUSTED stays an internal error.
	if got, internal := FromStatus(status.New(codes.ResourceExhausted, "x"), mcpspec.EraModern, "tools/call"); got.Code != wire.CodeInternalError || !internal {
		t.Fatalf("plain RESOURCE_EXHAUSTED: %+v %v", got, internal)
	}
}

// A backend that answered 503 with Retry-After is unavailable, and the
// client is told when to come back in data.retryAfterSeconds (bounded as
// a limit's); one that said nothing is told to retry later, without data.
func TestBackendUnavailableRetryAfter(t *testing.T) {
	for meta, want := range map[string]string{"7": `{"retryAfterSeconds":7}`, "99999": fmt.Sprintf(`{"retryAfterSeconds":%d}`, ratelimit.MaxRetryAfterSeconds), "": "null", "x": "null"} {
		var kv []string
		if meta != "" {
			kv = []string{"retryAfterSeconds", meta}
		}
		err := apierr.New(codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_BACKEND_UNAVAILABLE, "backend unavailable", kv...)
		got, _ := FromStatus(status.Convert(err), mcpspec.EraModern, "tools/call")
		data, _ := json.Marshal(got.Data)
		if got.Code != wire.CodeInternalError || string(data) != want {
			t.Errorf("retryAfterSeconds %q: %+v, data %s; want %s", meta, got, data, want)
		}
		if meta == "7" && !strings.Contains(got.Message, "retry after 7s") {
			t.Errorf("message %q", got.Message)
		}
	}
}

// TestBackendResourceNotFoundLooksLikeADenial: a backend's own "resource
// not found" (go-sdk's -32602 naming the URI, or 2025-11-25's -32002) is
// the answer the gateway gives a URI the policy or a filter refuses, in
// each era: the same code and message, and no data of the backend's (the
// read names the URI the client asked for). The backend's message and its
// spelling of the URI told a URI refused by policy from one the backend
// lacks.
func TestBackendResourceNotFoundLooksLikeADenial(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	denied := status.New(codes.NotFound, "not found").Err()
	for _, era := range []mcpspec.Era{mcpspec.EraModern, mcpspec.EraLegacy} {
		want := FromError(context.Background(), log, denied, era, "resources/read")
		for _, code := range []int64{-32602, -32002} {
			missing := backenderr.New("backend error", &aggregatorv1.BackendError{Code: code, Message: "Resource not found", DataJson: `{"uri":"docs://items/7"}`})
			got := FromError(context.Background(), log, missing, era, "resources/read")
			if got.Code != want.Code || got.Message != want.Message || got.Data != nil {
				t.Errorf("%s, backend's %d: %d %q %v, want %d %q and no data, as for a denied URI", era, code, got.Code, got.Message, got.Data, want.Code, want.Message)
			}
		}
	}
}
