package server

import (
	"context"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/catalog"
	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
)

// ReadResource reads a resource from its owning backend, passed through
// raw like tools/call.
func (s *Server) ReadResource(ctx context.Context, req *aggregatorv1.ReadResourceRequest) (*aggregatorv1.ReadResourceResponse, error) {
	resp, err := s.readResource(ctx, req)
	return resp, s.fail(ctx, "ReadResource", err)
}

func (s *Server) readResource(ctx context.Context, req *aggregatorv1.ReadResourceRequest) (*aggregatorv1.ReadResourceResponse, error) {
	uri := req.GetUri()
	var call backend.Call
	r := admission{
		method: config.RateMethodResourceRead, trail: audit.KindResourceRead, server: req.GetServer(),
		kind: catalog.KindResources, key: uri, subjectToken: req.GetContext().GetSubjectToken(),
		prepare: func(*admitted) error {
			caps, err := capabilities(req.GetContext())
			if err != nil {
				return err
			}
			var p backend.ParamsBuilder
			p.String("uri", uri)
			if err := mrtrParams(&p, req.GetInputResponsesJson(), req.GetRequestState()); err != nil {
				return err
			}
			call = backend.Call{Method: "resources/read", Name: uri, Params: p.Bytes(), ClientCapabilities: caps}
			return nil
		},
	}
	if uri == "" {
		r.malformed = invalidArgument("uri is required")
	}
	return serve(ctx, s, r, func(a *admitted) (*aggregatorv1.ReadResourceResponse, error) {
		res, err := timed(s, a.b, "resources/read", func() (*backend.Result, error) { return a.b.Call(a.ctx, &call) })
		if err != nil {
			return nil, err
		}
		return &aggregatorv1.ReadResourceResponse{ResultJson: res.JSON, ResultType: resultType(res.ResultType), Backend: a.b.Name()}, nil
	})
}
