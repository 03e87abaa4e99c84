package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// A caller that is not an operator holds at most 256 WatchRevocations
// streams open on one replica (each gateway replica holds one), as it does
// session event and approval streams: past it a stream is
// RESOURCE_EXHAUSTED; closing one makes room; an operator's credential is
// not held to the bound.
func TestWatchRevocationsPerCaller(t *testing.T) {
	h := start(t, env.NewDatabase(t))
	h.waitServing(t)
	h.readyWatch(t, "the revocation stream") // the replica has read the revocations
	open := func(c indexerv1.IndexerServiceClient) (context.CancelFunc, error) {
		ctx, cancel := context.WithCancel(t.Context())
		stream, err := c.WatchRevocations(ctx, &indexerv1.WatchRevocationsRequest{})
		if err == nil {
			_, err = stream.Recv()
		}
		if err != nil {
			cancel()
		}
		return cancel, err
	}
	var first context.CancelFunc
	for i := range rpc.DefaultStreamsPerCaller - 1 { // readyWatch's is open
		cancel, err := open(h.client)
		if err != nil {
			t.Fatalf("stream %d: %v", i+2, err)
		}
		if first == nil {
			first = cancel
		}
	}
	_, err := open(h.client)
	wantReason(t, err, codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED)
	if _, err := open(h.as(t, operatorToken)); err != nil {
		t.Fatalf("an operator's stream: %v", err)
	}
	first()
	testkit.Eventually(t, "a closed stream makes room", 10*time.Second, func() bool {
		_, err := open(h.client)
		return err == nil
	})
}

// A relayed input response names its principal's digest, by which the
// indexer bounds each principal's answers: without one (or with one that is
// no digest) it is INVALID_ARGUMENT, so no caller can step around that
// bound by leaving it out.
func TestRelayInputResponseRequiresThePrincipal(t *testing.T) {
	h := start(t, env.NewDatabase(t))
	h.waitServing(t)
	session, principal := strings.Repeat("3c", 32), strings.Repeat("4d", 32)
	at := timestamppb.New(time.Now().Add(time.Minute))
	relay := func(c indexerv1.IndexerServiceClient, principal, id string) error {
		_, err := c.RelayInputResponse(t.Context(), &indexerv1.RelayInputResponseRequest{OwnerReplica: "gw-1", ExpiresAt: at, PrincipalDigest: principal,
			Response: &indexerv1.RelayedInputResponse{SessionDigest: session, RequestIdJson: id, ResponseJson: `{"result":{}}`}})
		return err
	}
	for _, c := range []indexerv1.IndexerServiceClient{h.client, h.as(t, operatorToken)} {
		wantReason(t, relay(c, "", `"i1"`), codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	}
	if err := relay(h.client, principal, `"i1"`); err != nil {
		t.Fatalf("with the principal's digest: %v", err)
	}
}
