package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"

	"github.com/switchboard-mcp/switchboard/indexer/internal/revocation"
	"github.com/switchboard-mcp/switchboard/indexer/internal/scope"
	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

func TestToStatus(t *testing.T) {
	var logs strings.Builder
	s := &Server{Deps: Deps{Log: slog.New(slog.NewTextHandler(&logs, nil))}}
	const detail = "dial tcp 10.0.0.7:5432: connection refused"
	cases := []struct {
		err    error
		code   codes.Code
		reason commonv1.ErrorReason
	}{
		{invalidArgument("query is required"), codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT},
		{errNotReady, codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_NOT_READY},
		{errExplainOperatorOnly, codes.PermissionDenied, commonv1.ErrorReason_ERROR_REASON_OPERATOR_ONLY},
		{revocation.ErrNotSynced, codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_NOT_READY},
		{errFellBehind, codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED},
		{fmt.Errorf("search: %w", &store.UnavailableError{Err: errors.New(detail)}), codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_INDEX_UNAVAILABLE},
		{&scope.AggregatorError{Op: "discover", Err: status.Error(codes.Unavailable, detail)}, codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_NOT_READY},
		{&scope.AggregatorError{Op: "list tools", Err: status.Error(codes.PermissionDenied, detail)}, codes.Internal, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED},
		{scope.ErrViewUnsettled, codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_NOT_READY},
		{fmt.Errorf("wrapped: %w", context.Canceled), codes.Canceled, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED},
		{context.DeadlineExceeded, codes.DeadlineExceeded, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED},
		{errors.New(detail), codes.Internal, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED},
	}
	for _, c := range cases {
		err := s.toStatus(context.Background(), "Search", c.err)
		if status.Code(err) != c.code || apierr.Reason(err) != c.reason {
			t.Errorf("%v → %v (%s), want %s / %s", c.err, err, apierr.Reason(err), c.code, c.reason)
		}
		if strings.Contains(status.Convert(err).Message(), "10.0.0.7") {
			t.Errorf("%v: internal detail reaches the client: %q", c.err, status.Convert(err).Message())
		}
	}
	if s.toStatus(context.Background(), "Search", nil) != nil {
		t.Error("nil error became a status")
	}
	// The detail is logged for operators instead.
	if !strings.Contains(logs.String(), "10.0.0.7") {
		t.Errorf("internal detail not logged: %s", logs.String())
	}
}

func TestValidDigest(t *testing.T) {
	for d, ok := range map[string]bool{
		strings.Repeat("a", 64):       true,
		strings.Repeat("F", 64):       true,
		strings.Repeat("a", 63):       false,
		strings.Repeat("g", 64):       false,
		"":                            false,
		strings.Repeat("a", 63) + "'": false,
	} {
		if err := validDigest(d); (err == nil) != ok {
			t.Errorf("validDigest(%q) = %v, want ok=%v", d, err, ok)
		}
	}
}
