package server

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// ReadResource reads a resource from its owning backend.
func (s *Server) ReadResource(ctx context.Context, req *aggregatorv1.ReadResourceRequest) (*aggregatorv1.ReadResourceResponse, error) {
	resp, err := s.readResource(ctx, req)
	return resp, s.fail(ctx, "ReadResource", err)
}

func (s *Server) readResource(ctx context.Context, req *aggregatorv1.ReadResourceRequest) (*aggregatorv1.ReadResourceResponse, error) {
	uri := req.GetUri()
	if uri == "" {
		return nil, invalidArgument("uri is required")
	}
	snap, _ := s.e.Snapshot()
	b, err := s.e.ResourceOwner(snap, svcauth.PrincipalFrom(ctx), uri)
	if err != nil {
		return nil, err
	}
	params := &mcp.ReadResourceParams{URI: uri, RequestState: req.GetRequestState()}
	if params.Meta, err = clientCapabilities(req.GetContext()); err != nil {
		return nil, err
	}
	if params.InputResponses, err = inputResponses(req.GetInputResponsesJson()); err != nil {
		return nil, err
	}
	res, err := timed(s, b, "resources/read", func() (*mcp.ReadResourceResult, error) { return b.ReadResource(ctx, params) })
	if err != nil {
		return nil, err
	}
	text, err := resultJSON(res)
	if err != nil {
		return nil, err
	}
	return &aggregatorv1.ReadResourceResponse{ResultJson: text, ResultType: resultType(res.NeedsInput()), Backend: b.Name()}, nil
}
