package methods

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
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
	trace.SpanFromContext(ctx).SetAttributes(attribute.String("gen_ai.tool.name", name))
	rt, rerr := s.roundTripParams(ctx, req, "tools/call", name, args)
	if rerr != nil {
		return nil, rerr
	}
	var headers map[string]string
	if req.Era == mcpspec.EraModern {
		// The aggregator checks them against the tool's x-mcp-header
		// arguments after authorization, so a tool the caller may not call
		// answers like a missing one whatever headers it carries.
		if headers, rerr = wire.ParamHeaders(req.Header); rerr != nil {
			return nil, rerr
		}
	}
	return s.callAggregatorTool(ctx, req, resp, name, args, headers, rt)
}

// callAggregatorTool calls a tool as the request's principal, with its
// arguments as the client sent them; it serves tools/call and the
// optimizer's call_tool.
// paramHeaders are the Modern request's Mcp-Param-* headers (nil for
// Legacy and for call_tool, whose client mirrors nothing).
func (s *Server) callAggregatorTool(ctx context.Context, req *Request, resp Responder, name string, args json.RawMessage, paramHeaders map[string]string, rt roundTrip) (json.RawMessage, *wire.Error) {
	return s.roundTrips(ctx, req, resp, rt, false, func(ctx context.Context, rt roundTrip) (string, string, error) {
		call := &aggregatorv1.CallToolRequest{
			Principal: req.Principal, Server: req.Server, Name: name, ArgumentsJson: string(args), Context: rt.context,
			InputResponsesJson: rt.inputResponses, RequestState: rt.requestState,
			ParamHeaders: paramHeaders, CheckParamHeaders: paramHeaders != nil,
		}
		invoke := s.agg.CallTool
		if wantsNotifications(rt.context) {
			invoke = func(ctx context.Context, call *aggregatorv1.CallToolRequest, _ ...grpc.CallOption) (*aggregatorv1.CallToolResponse, error) {
				return s.callToolStreaming(ctx, resp, call)
			}
		}
		out, err := invoke(ctx, call)
		return out.GetResultJson(), out.GetResultType(), err
	})
}
