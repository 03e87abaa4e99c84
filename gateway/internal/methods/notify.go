package methods

import (
	"context"
	"encoding/json"
	"errors"
	"io"

	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
)

// A tools/call whose client asked for progress (_meta.progressToken) or log
// messages (Modern: _meta logLevel; Legacy: logging/setLevel) is answered
// over SSE: the backend's notifications for that call, in order, then the
// response. Notifications only ever go on the call's own response stream,
// never on a listen or GET stream.

// wantsNotifications reports whether a call's client asked for
// notifications the aggregator must stream.
func wantsNotifications(rc *aggregatorv1.RequestContext) bool {
	return rc.GetProgressTokenJson() != "" || rc.GetLogLevel() != ""
}

// callToolStreaming calls a tool with CallToolStream and sends each
// notification to the client as it arrives.
func (s *Server) callToolStreaming(ctx context.Context, resp Responder, call *aggregatorv1.CallToolRequest) (*aggregatorv1.CallToolResponse, error) {
	stream, err := s.agg.CallToolStream(ctx, &aggregatorv1.CallToolStreamRequest{Call: call, Principal: call.GetPrincipal()})
	if err != nil {
		return nil, err
	}
	gone := false
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil, errors.New("aggregator: call stream ended without a result")
		}
		if err != nil {
			return nil, err
		}
		if res := ev.GetResult(); res != nil {
			return res, nil
		}
		n := ev.GetNotification()
		if n == nil || !json.Valid([]byte(n.GetParamsJson())) {
			continue
		}
		// A client that cannot be written to is gone: a Modern call ends
		// with its stream (ctx), while a Legacy one runs on, since in that
		// era a disconnect is not a cancellation; what it says is dropped.
		if !gone && resp.Send(wire.Notification(n.GetMethod(), json.RawMessage(n.GetParamsJson()))) != nil {
			gone = true
		}
	}
}
