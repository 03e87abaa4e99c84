package server

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/catalog"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// resultJSON encodes a backend result for the API.
func resultJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

func resultType(needsInput bool) string {
	if needsInput {
		return "input_required"
	}
	return "complete"
}

// clientCapabilities declares the client's capabilities on a backend
// request, so that a Modern backend asks only for input the client can
// give (per-request _meta, which the SDK leaves in place of its own). The
// backend session is shared by every caller, so a Legacy backend still sees
// the capabilities the aggregator declared at initialize (none): it cannot
// send a caller a request the caller did not declare, because it can send
// none at all.
func clientCapabilities(rc *aggregatorv1.RequestContext) (mcp.Meta, error) {
	raw := rc.GetClientCapabilitiesJson()
	if raw == "" {
		return nil, nil
	}
	var caps map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &caps); err != nil || caps == nil {
		return nil, invalidArgument("client_capabilities_json must be a JSON object")
	}
	return mcp.Meta{mcp.MetaKeyClientCapabilities: json.RawMessage(raw)}, nil
}

func inputResponses(raw string) (mcp.InputResponseMap, error) {
	if raw == "" {
		return nil, nil
	}
	var m mcp.InputResponseMap
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return nil, invalidArgument("input_responses_json is not a valid map of input responses")
	}
	return m, nil
}

// CallTool calls a tool on its owning backend under its original name.
func (s *Server) CallTool(ctx context.Context, req *aggregatorv1.CallToolRequest) (*aggregatorv1.CallToolResponse, error) {
	resp, err := s.callTool(ctx, req)
	return resp, s.fail(ctx, "CallTool", err)
}

func (s *Server) callTool(ctx context.Context, req *aggregatorv1.CallToolRequest) (*aggregatorv1.CallToolResponse, error) {
	b, params, err := s.toolCall(ctx, req)
	if err != nil {
		return nil, err
	}
	call := func() (*mcp.CallToolResult, error) { return b.CallTool(ctx, params) }
	owner := svcauth.PrincipalFrom(ctx).GetSubject() + "\x00" + req.GetName()
	if state := req.GetRequestState(); strings.HasPrefix(state, backend.HeldStatePrefix) {
		var responses map[string]json.RawMessage
		if raw := req.GetInputResponsesJson(); raw != "" {
			if err := json.Unmarshal([]byte(raw), &responses); err != nil {
				return nil, invalidArgument("input_responses_json is not a valid map of input responses")
			}
		}
		call = func() (*mcp.CallToolResult, error) { return b.ResumeHeld(ctx, state, owner, responses) }
	} else if caps := askableCapabilities(req.GetContext()); caps != nil && b.IsLegacy() {
		// A Legacy backend asks for input mid-call; the call is held open
		// across the client's retry (see backend.CallToolAsking).
		call = func() (*mcp.CallToolResult, error) { return b.CallToolAsking(ctx, params, caps, owner) }
	}
	res, err := timed(s, b, "tools/call", call)
	if errors.Is(err, backend.ErrHeldCallGone) {
		return nil, invalidArgument("requestState names a call that is no longer held: it ended, its input did not come in time, or the retry reached another aggregator replica; call again without requestState")
	}
	if err != nil {
		return nil, err
	}
	return callToolResponse(b, res)
}

// askableCapabilities are the client's capabilities when they let a
// backend ask it for input (elicitation or sampling), else nil.
func askableCapabilities(rc *aggregatorv1.RequestContext) *mcp.ClientCapabilities {
	raw := rc.GetClientCapabilitiesJson()
	if raw == "" {
		return nil
	}
	var caps mcp.ClientCapabilities
	if json.Unmarshal([]byte(raw), &caps) != nil || (caps.Elicitation == nil && caps.Sampling == nil) {
		return nil
	}
	return &caps
}

// toolCall resolves a call's backend and builds its backend params.
func (s *Server) toolCall(ctx context.Context, req *aggregatorv1.CallToolRequest) (*backend.Client, *mcp.CallToolParams, error) {
	snap, _ := s.e.Snapshot()
	it, found := snap.Tool(req.GetName())
	var bname string
	if found {
		bname = it.Backend
	}
	b, err := s.e.Owner(snap, svcauth.PrincipalFrom(ctx), catalog.KindTools, req.GetName(), bname, found)
	if err != nil {
		return nil, nil, err
	}
	params := &mcp.CallToolParams{Name: it.Original, RequestState: req.GetRequestState()}
	if params.Meta, err = clientCapabilities(req.GetContext()); err != nil {
		return nil, nil, err
	}
	if raw := req.GetArgumentsJson(); raw != "" {
		var args map[string]json.RawMessage
		if err := json.Unmarshal([]byte(raw), &args); err != nil || args == nil {
			return nil, nil, invalidArgument("arguments_json must be a JSON object")
		}
		params.Arguments = json.RawMessage(raw)
	}
	if params.InputResponses, err = inputResponses(req.GetInputResponsesJson()); err != nil {
		return nil, nil, err
	}
	return b, params, nil
}

func callToolResponse(b *backend.Client, res *mcp.CallToolResult) (*aggregatorv1.CallToolResponse, error) {
	text, err := resultJSON(res)
	if err != nil {
		return nil, err
	}
	// A held call's input_required result is made here, not decoded from a
	// backend's answer, so its input requests say what it is.
	needsInput := res.NeedsInput() || len(res.InputRequests) > 0
	return &aggregatorv1.CallToolResponse{ResultJson: text, IsError: res.IsError, ResultType: resultType(needsInput), Backend: b.Name()}, nil
}

// CallToolStream calls a tool like CallTool and streams the progress and
// log notifications the backend sends for that call before the result.
func (s *Server) CallToolStream(req *aggregatorv1.CallToolStreamRequest, stream grpc.ServerStreamingServer[aggregatorv1.CallToolStreamResponse]) error {
	ctx := stream.Context()
	resp, err := s.callToolStream(ctx, req.GetCall(), stream)
	if err != nil {
		return s.fail(ctx, "CallToolStream", err)
	}
	return stream.Send(&aggregatorv1.CallToolStreamResponse{Event: &aggregatorv1.CallToolStreamResponse_Result{Result: resp}})
}

func (s *Server) callToolStream(ctx context.Context, req *aggregatorv1.CallToolRequest, stream grpc.ServerStreamingServer[aggregatorv1.CallToolStreamResponse]) (*aggregatorv1.CallToolResponse, error) {
	rc := req.GetContext()
	token := rc.GetProgressTokenJson()
	if token != "" && !json.Valid([]byte(token)) {
		return nil, invalidArgument("progress_token_json is not JSON")
	}
	level := mcp.LoggingLevel(rc.GetLogLevel())
	if level != "" && !backend.ValidLevel(level) {
		return nil, invalidArgument("log_level is not an MCP log level")
	}
	b, params, err := s.toolCall(ctx, req)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(req.GetRequestState(), backend.HeldStatePrefix) || (askableCapabilities(rc) != nil && b.IsLegacy()) {
		// A call that may be held for the client's input runs as a plain
		// call; it relays no notifications.
		return s.callTool(ctx, req)
	}
	var sendErr error
	emit := func(method string, p any) {
		text, err := notificationParams(p, token)
		if err != nil || sendErr != nil {
			return
		}
		sendErr = stream.Send(&aggregatorv1.CallToolStreamResponse{Event: &aggregatorv1.CallToolStreamResponse_Notification{
			Notification: &aggregatorv1.Notification{Method: method, ParamsJson: text},
		}})
	}
	res, err := timed(s, b, "tools/call", func() (*mcp.CallToolResult, error) {
		return b.CallToolStreamed(ctx, params, token != "", level, emit)
	})
	if err != nil {
		return nil, err
	}
	if sendErr != nil {
		return nil, sendErr
	}
	return callToolResponse(b, res)
}

// notificationParams encodes a backend notification's params for the
// caller: without the backend's _meta, and with the caller's own progress
// token in place of the one the aggregator sent.
func notificationParams(p any, token string) (string, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
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
