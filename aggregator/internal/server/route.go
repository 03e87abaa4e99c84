package server

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// callRoute is one way an admitted tools/call runs. Which one is decided
// by routeOf alone; routeToolCall runs it. Every route runs under the
// admitted context (the caller's credentials, its cancellation, the
// tool's timeout), relays a streamed call's progress and log messages and
// reports errors the same way (status.go);
// route_test.go holds every route to each of these.
type callRoute int

const (
	// routePlain passes the call through raw on the backend's HTTP
	// client (backend.Client.Call), relaying a streamed call's progress
	// and, for a Modern backend, its log messages.
	routePlain callRoute = iota
	// routeHeld runs the call with go-sdk so that a Legacy backend can
	// ask the client for input (elicitation, sampling) mid-call; the call
	// is held open across the client's retry (backend.CallToolAsking).
	routeHeld
	// routeResume carries on a call held on this replica with the
	// client's answers (backend.ResumeHeld). The backend was asked for
	// progress when the call began, and is asked for log messages from
	// the lowest level a round wants; each round gets them as it asks
	// itself.
	routeResume
	// routeForward sends the retry of a call held on another replica to
	// that replica (held_forward.go), a streamed retry with
	// ResumeHeldCallStream, whose notifications the holder relays.
	routeForward
	// routeOwnSession runs a streamed call that wants a Legacy backend's
	// log messages on a go-sdk session of its own: a Legacy backend's log
	// level is per session (backend.CallToolStreamed).
	routeOwnSession
)

var routeNames = [...]string{"plain", "held", "resume", "forward", "own-session"}

func (r callRoute) String() string { return routeNames[r] }

// routeOf decides how an admitted call runs, from the request and the
// backend; replica is the peer holding the call for routeForward, caps
// the client's capabilities the backend may ask of for routeHeld.
func (s *Server) routeOf(req *aggregatorv1.CallToolRequest, tc *toolCall, stream *notifier) (route callRoute, replica string, caps *mcp.ClientCapabilities) {
	if state := req.GetRequestState(); strings.HasPrefix(state, backend.HeldStatePrefix) {
		if _, _, replica, _ := backend.ParseHeldState(state); !s.peers.Local(replica) {
			return routeForward, replica, nil
		}
		return routeResume, "", nil
	}
	b := tc.b
	if tc.plain {
		return routePlain, "", nil
	}
	if b.IsLegacy() {
		if caps := askableCapabilities(req.GetContext()); caps != nil {
			return routeHeld, "", caps
		}
	}
	if stream != nil && stream.level != "" && !b.SpeaksModern() {
		return routeOwnSession, "", nil
	}
	return routePlain, "", nil
}

// heldOwner binds a held call to the principal that started it, the
// server it was called through and its tool: only the same may resume
// it (another server may show the same backend's tool under the same
// name, under other filters, policy, limits and overrides).
func heldOwner(ctx context.Context, req *aggregatorv1.CallToolRequest) string {
	return svcauth.PrincipalFrom(ctx).GetSubject() + "\x00" + req.GetServer() + "\x00" + req.GetName()
}

// routeToolCall runs an admitted call on its route.
func (s *Server) routeToolCall(ctx context.Context, req *aggregatorv1.CallToolRequest, tc *toolCall, stream *notifier) (*aggregatorv1.CallToolResponse, error) {
	b := tc.b
	route, replica, caps := s.routeOf(req, tc, stream)
	switch route {
	case routeForward:
		return s.forwardHeld(ctx, replica, req, stream)
	case routeResume:
		if req.GetReleaseHeld() {
			return heldResponse(b, nil, s.e.Holder(b, req.GetRequestState()).ReleaseHeld(req.GetRequestState(), heldOwner(ctx, req)))
		}
		var responses map[string]json.RawMessage
		if raw := req.GetInputResponsesJson(); raw != "" {
			if err := json.Unmarshal([]byte(raw), &responses); err != nil {
				return nil, invalidArgument("input_responses_json is not a valid map of input responses")
			}
		}
		holder := s.e.Holder(b, req.GetRequestState())
		res, err := timed(s, b, "tools/call", func() (*mcp.CallToolResult, error) {
			return holder.ResumeHeld(ctx, req.GetRequestState(), heldOwner(ctx, req), responses, stream.relay())
		})
		// The holder, which may be a client a reload retired, holds a
		// question asked again for its own inputWait.
		return heldResponse(holder, res, stream.failed(err))
	case routeHeld:
		params, err := sdkParams(tc, req)
		if err != nil {
			return nil, err
		}
		res, err := timed(s, b, "tools/call", func() (*mcp.CallToolResult, error) {
			return b.CallToolAsking(ctx, params, caps, heldOwner(ctx, req), stream.relay())
		})
		return heldResponse(b, res, stream.failed(err))
	case routeOwnSession:
		params, err := sdkParams(tc, req)
		if err != nil {
			return nil, err
		}
		n := stream.relay()
		res, err := timed(s, b, "tools/call", func() (*mcp.CallToolResult, error) {
			return b.CallToolStreamed(ctx, params, n.Progress, n.Level, n.Emit)
		})
		return heldResponse(b, res, stream.failed(err))
	}
	if stream != nil {
		tc.call.Progress, tc.call.LogLevel, tc.call.Notify = stream.progress, stream.level, stream.emit
	}
	res, err := timed(s, b, "tools/call", func() (*backend.Result, error) { return b.Call(ctx, &tc.call) })
	if err = stream.failed(err); err != nil {
		return nil, err
	}
	return &aggregatorv1.CallToolResponse{ResultJson: res.JSON, IsError: res.IsError, ResultType: resultType(res.ResultType), Backend: b.Name()}, nil
}
