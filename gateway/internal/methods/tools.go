package methods

import (
	"context"
	"encoding/json"
	"time"

	"google.golang.org/grpc"

	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

// toolCallParams reads tools/call params: the name, and the arguments as
// the client sent them (an object, or nothing).
func toolCallParams(params wire.Object) (name string, args json.RawMessage, rerr *wire.Error) {
	name, ok := params.String("name")
	if !ok || name == "" {
		return "", nil, wire.InvalidParams("name is required")
	}
	if raw, ok := params["arguments"]; ok && string(raw) != "null" {
		if !wire.IsObjectText(raw) {
			return "", nil, wire.InvalidParams("arguments must be an object")
		}
		args = raw
	}
	return name, args, nil
}

func (s *Server) callTool(ctx context.Context, req *Request, resp Responder) (json.RawMessage, *wire.Error) {
	if req.View == ViewOptimized {
		return s.callOptimizerTool(ctx, req, resp)
	}
	name, args, rerr := toolCallParams(req.Params)
	if rerr != nil {
		return nil, rerr
	}
	return s.callNamedTool(ctx, req, resp, name, args)
}

// callNamedTool calls the tool the client named, as the raw view lists
// it. In the optimizer view it serves the calls an MCP App makes (through
// its host) of its own server's tools: the model knows only find_tool and
// call_tool there, but an app found through a find_tool hit calls its
// tools by name.
func (s *Server) callNamedTool(ctx context.Context, req *Request, resp Responder, name string, args json.RawMessage) (json.RawMessage, *wire.Error) {
	call := toolCall{name: name, args: args}
	var rerr *wire.Error
	if call.task, rerr = taskRequest(req); rerr != nil {
		return nil, rerr
	}
	rt, rerr := s.roundTripParams(ctx, req, "tools/call", name, args)
	if rerr != nil {
		return nil, rerr
	}
	if req.Era == mcpspec.EraModern {
		// The aggregator checks them against the tool's x-mcp-header
		// arguments after authorization, so a tool the caller may not call
		// answers like a missing one whatever headers it carries.
		if call.paramHeaders, rerr = wire.ParamHeaders(req.Header); rerr != nil {
			return nil, rerr
		}
	}
	return s.callAggregatorTool(ctx, req, resp, call, rt)
}

// toolCall is one call of a tool as the client asked for it.
type toolCall struct {
	name string
	// args are the arguments as the client sent them.
	args json.RawMessage
	// paramHeaders are the Modern request's Mcp-Param-* headers (nil for
	// Legacy and for call_tool, whose client mirrors nothing).
	paramHeaders map[string]string
	// task says the client takes a task for an answer (taskRequest).
	task *aggregatorv1.TaskRequest
	// forModel marks call_tool's call, the model's with no host between
	// (CallToolRequest.for_model).
	forModel bool
}

// callAggregatorTool calls a tool as the request's principal; it serves
// tools/call and the optimizer's call_tool.
func (s *Server) callAggregatorTool(ctx context.Context, req *Request, resp Responder, c toolCall, rt roundTrip) (json.RawMessage, *wire.Error) {
	return s.roundTrips(ctx, req, resp, rt, false, func(ctx context.Context, rt roundTrip) (backendResult, error) {
		call := &aggregatorv1.CallToolRequest{
			Principal: req.Principal, Server: req.Server, Name: c.name, ArgumentsJson: string(c.args), Context: rt.context,
			InputResponsesJson: rt.inputResponses, RequestState: rt.requestState, ReleaseHeld: rt.release,
			ParamHeaders: c.paramHeaders, CheckParamHeaders: c.paramHeaders != nil, ForModel: c.forModel,
		}
		if !rt.release {
			call.Task = c.task
		}
		invoke := s.agg.CallTool
		if wantsNotifications(rt.context) && !rt.release {
			invoke = func(ctx context.Context, call *aggregatorv1.CallToolRequest, _ ...grpc.CallOption) (*aggregatorv1.CallToolResponse, error) {
				return s.callToolStreaming(ctx, resp, call)
			}
		}
		out, err := invoke(ctx, call)
		return backendResult{json: out.GetResultJson(), resultType: out.GetResultType(), task: out.GetTask(),
			held: out.GetHeld(), heldFor: time.Duration(out.GetHeldForMs()) * time.Millisecond}, err
	})
}
