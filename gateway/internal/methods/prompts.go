package methods

import (
	"context"
	"encoding/json"

	"github.com/switchboard-mcp/switchboard/gateway/internal/mcperr"
	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
)

func (s *Server) getPrompt(ctx context.Context, req *Request, resp Responder) (json.RawMessage, *wire.Error) {
	name, ok := req.Params.String("name")
	if !ok || name == "" {
		return nil, wire.InvalidParams("name is required")
	}
	var args map[string]string
	raw, ok := req.Params["arguments"]
	if ok && string(raw) != "null" {
		// Each value a string: a null one would decode as "" and pass a
		// backend's check of a required argument.
		var values map[string]*string
		if json.Unmarshal(raw, &values) != nil {
			return nil, wire.InvalidParams("prompt arguments must map names to strings")
		}
		args = make(map[string]string, len(values))
		for name, v := range values {
			if v == nil {
				return nil, wire.InvalidParams("prompt arguments must map names to strings")
			}
			args[name] = *v
		}
	}
	rt, rerr := s.roundTripParams(ctx, req, "prompts/get", name, raw)
	if rerr != nil {
		return nil, rerr
	}
	return s.roundTrips(ctx, req, resp, rt, false, func(ctx context.Context, rt roundTrip) (backendResult, error) {
		out, err := s.agg.GetPrompt(ctx, &aggregatorv1.GetPromptRequest{
			Principal: req.Principal, Server: req.Server, Name: name, Arguments: args, Context: rt.context,
			InputResponsesJson: rt.inputResponses, RequestState: rt.requestState,
		})
		return backendResult{json: out.GetResultJson(), resultType: out.GetResultType()}, err
	})
}

// complete serves completion/complete: the params, less _meta and any
// requestState or inputResponses, go to the
// aggregator, which routes them by their ref.
func (s *Server) complete(ctx context.Context, req *Request, _ Responder) (json.RawMessage, *wire.Error) {
	// The aggregator reads the rest; its refusals of these would name its
	// own API's fields.
	if _, ok := req.Params.Object("ref"); !ok {
		return nil, wire.InvalidParams("ref is required: an object (ref/prompt or ref/resource)")
	}
	if _, ok := req.Params.Object("argument"); !ok {
		return nil, wire.InvalidParams("argument is required: an object with name and value")
	}
	params := wire.Object{}
	for k, v := range req.Params {
		// Backends see only request states they issued, sealed and
		// checked on the way back (roundtrip.go); completion/complete is
		// not a multi-round-trip request, so a client's own is dropped.
		if k != "_meta" && k != "requestState" && k != "inputResponses" {
			params[k] = v
		}
	}
	req.Trail.Asked = true
	out, err := s.agg.Complete(ctx, &aggregatorv1.CompleteRequest{Principal: req.Principal, Server: req.Server, ParamsJson: string(params.Encode()), SubjectToken: req.SubjectToken})
	if err != nil {
		return nil, mcperr.FromError(ctx, s.log, err, req.Era, req.Method)
	}
	return s.shape(req, []byte(out.GetResultJson()), false)
}
