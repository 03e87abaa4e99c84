package server

import (
	"context"
	"time"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// ReadResource reads a resource from its owning backend, passed through
// raw like tools/call.
func (s *Server) ReadResource(ctx context.Context, req *aggregatorv1.ReadResourceRequest) (*aggregatorv1.ReadResourceResponse, error) {
	start := time.Now()
	resp, err := s.readResource(ctx, req)
	s.auditCall(ctx, audit.KindResourceRead, start, req.GetServer(), req.GetUri(), "", resp.GetBackend(), false, err)
	return resp, s.fail(ctx, "ReadResource", err)
}

func (s *Server) readResource(ctx context.Context, req *aggregatorv1.ReadResourceRequest) (*aggregatorv1.ReadResourceResponse, error) {
	uri := req.GetUri()
	if uri == "" {
		return nil, invalidArgument("uri is required")
	}
	snap, _, err := s.e.ServerSnapshot(req.GetServer())
	if err != nil {
		return nil, err
	}
	b, err := s.e.ResourceOwner(snap, svcauth.PrincipalFrom(ctx), uri)
	if err != nil {
		return nil, err
	}
	if ctx, err = b.WithCaller(ctx, svcauth.PrincipalFrom(ctx).GetSubject(), req.GetContext().GetSubjectToken()); err != nil {
		return nil, err
	}
	if err := s.limit(ctx, config.RateMethodResourceRead, req.GetServer(), "", b); err != nil {
		return nil, err
	}
	caps, err := capabilities(req.GetContext())
	if err != nil {
		return nil, err
	}
	var p backend.ParamsBuilder
	p.String("uri", uri)
	if err := mrtrParams(&p, req.GetInputResponsesJson(), req.GetRequestState()); err != nil {
		return nil, err
	}
	call := &backend.Call{Method: "resources/read", Name: uri, Params: p.Bytes(), ClientCapabilities: caps}
	res, err := timed(s, b, "resources/read", func() (*backend.Result, error) { return b.Call(ctx, call) })
	if err != nil {
		return nil, err
	}
	return &aggregatorv1.ReadResourceResponse{ResultJson: res.JSON, ResultType: resultType(res.ResultType), Backend: b.Name()}, nil
}
