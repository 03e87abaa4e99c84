package server

import (
	"context"

	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// RefreshScope builds the calling principal's scope ahead of its first
// search.
func (s *Server) RefreshScope(ctx context.Context, req *indexerv1.RefreshScopeRequest) (*indexerv1.RefreshScopeResponse, error) {
	if err := s.checkReady(); err != nil {
		return nil, s.toStatus(ctx, "RefreshScope", err)
	}
	sc, built, err := s.Resolver.Resolve(ctx, svcauth.PrincipalFrom(ctx), req.GetServer())
	if err != nil {
		return nil, s.toStatus(ctx, "RefreshScope", err)
	}
	if built {
		s.Metrics.scopeBuilt()
	}
	return &indexerv1.RefreshScopeResponse{ToolsDigest: sc.Digest, ScopeSize: uint32(sc.ToolCount), Built: built}, nil
}
