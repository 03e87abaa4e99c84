package backenderr_test

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	"github.com/switchboard-mcp/switchboard/services/backenderr"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// TestRoundTrip: what New puts in a status, From reads back, also after
// the status crossed the wire (proto round trip) and was wrapped.
func TestRoundTrip(t *testing.T) {
	want := &aggregatorv1.BackendError{Code: -32602, Message: "unknown tool", DataJson: `{"name":"x"}`}
	err := backenderr.New("backend error: unknown tool", want)
	if status.Code(err) != codes.Unknown || apierr.Reason(err) != commonv1.ErrorReason_ERROR_REASON_BACKEND_ERROR {
		t.Fatalf("status %v, reason %v", err, apierr.Reason(err))
	}
	wire, _ := proto.Marshal(status.Convert(err).Proto())
	var decoded = status.Convert(err).Proto()
	if err := proto.Unmarshal(wire, decoded); err != nil {
		t.Fatal(err)
	}
	for name, e := range map[string]error{"direct": err, "from wire": status.ErrorProto(decoded), "wrapped": fmt.Errorf("call: %w", err)} {
		got, ok := backenderr.From(e)
		if !ok || !proto.Equal(got, want) {
			t.Errorf("%s: From = %v, %v", name, got, ok)
		}
	}
}

func TestFromOtherErrors(t *testing.T) {
	for name, err := range map[string]error{
		"nil":          nil,
		"plain":        errors.New("x"),
		"other status": apierr.New(codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND, "not found"),
	} {
		if be, ok := backenderr.From(err); ok || be != nil {
			t.Errorf("%s: From = %v, %v", name, be, ok)
		}
	}
}
