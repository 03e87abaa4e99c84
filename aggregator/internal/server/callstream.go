package server

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
)

// CallToolStream calls a tool like CallTool and streams the progress and
// log notifications the backend sends for that call before the result.
func (s *Server) CallToolStream(req *aggregatorv1.CallToolStreamRequest, stream grpc.ServerStreamingServer[aggregatorv1.CallToolStreamResponse]) error {
	ctx := stream.Context()
	q := newNoteQueue(func(n *aggregatorv1.Notification) error {
		return stream.Send(&aggregatorv1.CallToolStreamResponse{Event: &aggregatorv1.CallToolStreamResponse_Notification{Notification: n}})
	})
	resp, err := s.callToolStream(ctx, req.GetCall(), q.put, false)
	q.close()
	if err != nil {
		return s.fail(ctx, "CallToolStream", err)
	}
	return stream.Send(&aggregatorv1.CallToolStreamResponse{Event: &aggregatorv1.CallToolStreamResponse_Result{Result: resp}})
}

// notifier relays a streamed call's notifications to its gRPC stream.
type notifier struct {
	progress bool
	level    mcp.LoggingLevel
	// token is the caller's progress token (JSON), put back in place of
	// the one the aggregator sent to the backend.
	token string
	// send puts a notification on the caller's stream.
	send func(*aggregatorv1.Notification) error
	// err is the first failure to send; the call then fails with it.
	err error
}

func (n *notifier) emit(method string, params []byte) {
	if n.err != nil {
		return
	}
	text, err := notificationParams(params, n.token)
	if err != nil {
		return
	}
	n.err = n.send(&aggregatorv1.Notification{Method: method, ParamsJson: text})
}

// pass puts a notification that is the caller's already (a peer relayed
// it, with the caller's token) on the caller's stream.
func (n *notifier) pass(note *aggregatorv1.Notification) {
	if n.err == nil {
		n.err = n.send(note)
	}
}

// relay is what the caller wants of the backend's notifications on a
// route that calls with go-sdk; nothing for an unstreamed call.
func (n *notifier) relay() backend.Notify {
	if n == nil {
		return backend.Notify{}
	}
	return backend.Notify{Progress: n.progress, Level: n.level, Emit: func(method string, p any) {
		if raw, err := json.Marshal(p); err == nil {
			n.emit(method, raw)
		}
	}}
}

// failed is the call's outcome err, or else the failure to relay one of
// its notifications.
func (n *notifier) failed(err error) error {
	if err == nil && n != nil && n.err != nil {
		return n.err
	}
	return err
}

// callToolStream admits and runs a streamed call, whose notifications go
// to send; forwarded marks a peer's forwarded retry (ResumeHeldCallStream).
func (s *Server) callToolStream(ctx context.Context, req *aggregatorv1.CallToolRequest, send func(*aggregatorv1.Notification) error, forwarded bool) (*aggregatorv1.CallToolResponse, error) {
	rc := req.GetContext()
	token := rc.GetProgressTokenJson()
	level := mcp.LoggingLevel(rc.GetLogLevel())
	n := &notifier{progress: token != "", level: level, token: token, send: send}
	return s.callTool(ctx, req, n, forwarded)
}

// malformedContext is the refusal of a call whose context names a
// progress token or log level that cannot be one, or capabilities past
// what a task stores of a call, or nil. A unary call relays no
// notification, but its request is as malformed: it is refused alike, in
// the call's admission, so that it is audited like any other refusal.
func malformedContext(rc *aggregatorv1.RequestContext) error {
	if token := rc.GetProgressTokenJson(); token != "" && !progressToken(token) {
		return invalidArgument(fmt.Sprintf("progress_token_json is not a JSON string or number of at most %d bytes", config.MaxRequestIDBytes))
	}
	if len(rc.GetClientCapabilitiesJson()) > config.MaxTaskCallBytes {
		return invalidArgument(fmt.Sprintf("client_capabilities_json is over %d KiB", config.MaxTaskCallBytes>>10))
	}
	if level := mcp.LoggingLevel(rc.GetLogLevel()); level != "" && !backend.ValidLevel(level) {
		return invalidArgument("log_level is not an MCP log level")
	}
	return nil
}

// progressToken reports whether token is one MCP allows (a string or a
// number), bounded as a request id is: the aggregator echoes it in every
// progress notification of the call.
func progressToken(token string) bool {
	if len(token) > config.MaxRequestIDBytes {
		return false
	}
	var v any
	if json.Unmarshal([]byte(token), &v) != nil {
		return false
	}
	switch v.(type) {
	case string, float64:
		return true
	}
	return false
}

// notificationParams encodes a backend notification's params for the
// caller: without the backend's _meta, and with the caller's own progress
// token in place of the one the aggregator sent.
func notificationParams(raw []byte, token string) (string, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return "", err
	}
	delete(fields, "_meta")
	if _, ok := fields["progressToken"]; ok {
		fields["progressToken"] = json.RawMessage(token)
	}
	out, err := json.Marshal(fields)
	return string(out), err
}
