package methods

import (
	"context"
	"encoding/json"

	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
)

func (s *Server) readResource(ctx context.Context, req *Request, resp Responder) (json.RawMessage, *wire.Error) {
	uri, ok := req.Params.String("uri")
	if !ok || uri == "" {
		return nil, wire.InvalidParams("uri is required")
	}
	rt, rerr := s.roundTripParams(ctx, req, "resources/read", uri, nil)
	if rerr != nil {
		return nil, rerr
	}
	result, rerr := s.roundTrips(ctx, req, resp, rt, true, func(ctx context.Context, rt roundTrip) (backendResult, error) {
		out, err := s.agg.ReadResource(ctx, &aggregatorv1.ReadResourceRequest{
			Principal: req.Principal, Server: req.Server, Uri: uri, Context: rt.context,
			InputResponsesJson: rt.inputResponses, RequestState: rt.requestState,
		})
		return backendResult{json: out.GetResultJson(), resultType: out.GetResultType()}, err
	})
	if rerr != nil && (rerr.Code == wire.CodeInvalidParams || rerr.Code == wire.CodeResourceNotFound) && rerr.Data == nil && len(uri) <= maxEchoedURI {
		// A URI past the bound is not echoed: the answer is not made the
		// size of what the client sent.
		rerr.Data = map[string]string{"uri": uri}
	}
	return result, rerr
}

// maxEchoedURI bounds the URI a read's error names in its data.
const maxEchoedURI = 2048
