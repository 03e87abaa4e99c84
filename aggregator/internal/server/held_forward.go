package server

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/peer"
	"github.com/switchboard-mcp/switchboard/services/apierr"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// A Legacy backend's call held for the client's input lives on the replica
// that made it; its requestState names that replica (backend.HeldOwner).
// A retry that reaches another replica is forwarded to the owner with
// ResumeHeldCall (package peer); the owner resumes it like a retry of its
// own. An owner that is not a known peer, or that cannot be reached, is a
// call that is no longer held: the same error as a hold that expired.

// peerStatus is a status a peer answered a forwarded retry with. The peer
// mapped it in its own one place, so it is passed on unchanged.
type peerStatus struct{ err error }

func (e peerStatus) Error() string { return e.err.Error() }

// peerRefused is a peer that refused this replica itself: its credential
// (aggregator.peers.token, or what the peer's serviceAuth allows it) or
// its TLS. The client was authenticated here, so this is the cluster's
// misconfiguration, not the client's error, and not an owner gone.
type peerRefused struct {
	owner string
	err   error
}

func (e peerRefused) Error() string {
	return "aggregator peer " + e.owner + " refused this replica: " + e.err.Error()
}

// tlsFailed reports whether err is a failed TLS handshake with the peer:
// grpc-go reports it as UNAVAILABLE with this text, and no ErrorInfo.
func tlsFailed(err error) bool {
	return status.Code(err) == codes.Unavailable && strings.Contains(status.Convert(err).Message(), "authentication handshake failed")
}

// forwardHeld forwards the retry req, which names a call held by owner;
// a streamed retry's notifications, which the owner relays, go to n.
func (s *Server) forwardHeld(ctx context.Context, owner string, req *aggregatorv1.CallToolRequest, n *notifier) (*aggregatorv1.CallToolResponse, error) {
	var onNotification func(*aggregatorv1.Notification)
	if n != nil {
		onNotification = n.pass
	}
	resp, err := s.peers.Resume(ctx, owner, svcauth.PrincipalFrom(ctx), req, onNotification)
	if err == nil && n != nil && n.err != nil {
		return nil, n.err
	}
	switch {
	case err == nil:
		return resp, nil
	case errors.Is(err, peer.ErrNotAPeer):
		s.log.WarnContext(ctx, "retry names a held call on an aggregator that is not a known peer; refused", "owner", owner)
		return nil, errHeldCallGone
	case status.Code(err) == codes.Unauthenticated, status.Code(err) == codes.PermissionDenied, tlsFailed(err):
		return nil, peerRefused{owner: owner, err: err}
	case status.Code(err) == codes.Unavailable && apierr.Reason(err) == commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED:
		// The owner is gone (a dead replica takes its held calls with it);
		// a backend that is down answers with a reason of its own instead.
		s.log.InfoContext(ctx, "retry of a held call: the aggregator holding it cannot be reached", "owner", owner, "err", err)
		return nil, errHeldCallGone
	default:
		return nil, peerStatus{err: err}
	}
}

// fromPeer reports whether the caller is an aggregator replica: the only
// caller whose forwarded retry was limited and recorded before it came
// (the replica that received it did both), so that it is not again. A
// peer presents the aggregators' own credential (aggregator.peers.token):
// one that asserts principals and may not call tools itself (it allows
// exactly config.AggregatorMethods). Any other caller may call tools, and
// sends its retries with CallTool, limited and recorded.
func fromPeer(ctx context.Context) bool {
	caller, _ := svcauth.CallerFrom(ctx)
	return caller.AssertPrincipals && !caller.MayCall(aggregatorv1.AggregatorService_CallTool_FullMethodName)
}

// ResumeHeldCall resumes, for a peer, a held call of this replica.
func (s *Server) ResumeHeldCall(ctx context.Context, req *aggregatorv1.ResumeHeldCallRequest) (*aggregatorv1.ResumeHeldCallResponse, error) {
	if !fromPeer(ctx) {
		return nil, s.fail(ctx, "ResumeHeldCall", errPeersOnly)
	}
	call := req.GetCall()
	// Only a call that names this replica is resumed here, never forwarded
	// again: a forwarded retry cannot travel on.
	if _, _, owner, ok := backend.ParseHeldState(call.GetRequestState()); !ok || owner == "" || owner != s.peers.Self() {
		return nil, s.fail(ctx, "ResumeHeldCall", errHeldCallGone)
	}
	resp, err := s.callTool(ctx, call, nil, true)
	if err != nil {
		return nil, s.fail(ctx, "ResumeHeldCall", err)
	}
	return &aggregatorv1.ResumeHeldCallResponse{Result: resp}, nil
}

// ResumeHeldCallStream is ResumeHeldCall for a streamed retry: the
// backend's notifications for the call go to the forwarding replica as
// they come, as CallToolStream sends them.
func (s *Server) ResumeHeldCallStream(req *aggregatorv1.ResumeHeldCallStreamRequest, stream grpc.ServerStreamingServer[aggregatorv1.ResumeHeldCallStreamResponse]) error {
	ctx := stream.Context()
	if !fromPeer(ctx) {
		return s.fail(ctx, "ResumeHeldCallStream", errPeersOnly)
	}
	call := req.GetCall()
	if _, _, owner, ok := backend.ParseHeldState(call.GetRequestState()); !ok || owner == "" || owner != s.peers.Self() {
		return s.fail(ctx, "ResumeHeldCallStream", errHeldCallGone)
	}
	q := newNoteQueue(func(n *aggregatorv1.Notification) error {
		return stream.Send(&aggregatorv1.ResumeHeldCallStreamResponse{Event: &aggregatorv1.ResumeHeldCallStreamResponse_Notification{Notification: n}})
	})
	resp, err := s.callToolStream(ctx, call, q.put, true)
	q.close()
	if err != nil {
		return s.fail(ctx, "ResumeHeldCallStream", err)
	}
	return stream.Send(&aggregatorv1.ResumeHeldCallStreamResponse{Event: &aggregatorv1.ResumeHeldCallStreamResponse_Result{Result: resp}})
}
