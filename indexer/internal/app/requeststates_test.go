package app_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

// A request state consumed through one replica is a replay through the
// other; the expiry is bounded and the digest checked.
func TestRequestStateConsumedOnceAcrossReplicas(t *testing.T) {
	db := env.NewDatabase(t)
	a := start(t, db)
	b := a.replica(t, db)
	a.waitServing(t)
	b.waitServing(t)
	consume := func(h *harness, digest string, at time.Time) (bool, error) {
		resp, err := h.client.ConsumeRequestState(t.Context(), &indexerv1.ConsumeRequestStateRequest{StateDigest: digest, ExpiresAt: timestamppb.New(at)})
		return resp.GetFirstUse(), err
	}
	digest := strings.Repeat("1f", 32)
	in := time.Now().Add(10 * time.Minute)
	if first, err := consume(a, digest, in); err != nil || !first {
		t.Fatalf("first use through a: %v, %v", first, err)
	}
	for name, h := range map[string]*harness{"a": a, "b": b} {
		if first, err := consume(h, digest, in); err != nil || first {
			t.Fatalf("a replay through %s: first %v, %v", name, first, err)
		}
	}
	_, err := consume(b, strings.Repeat("2e", 32), time.Now().Add(2*time.Hour))
	wantReason(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	_, err = consume(b, "not-a-digest", in)
	wantReason(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	_, err = b.client.ConsumeRequestState(t.Context(), &indexerv1.ConsumeRequestStateRequest{StateDigest: strings.Repeat("3d", 32)})
	wantReason(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
}
