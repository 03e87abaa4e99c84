package server

import (
	"context"

	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

// Stats reports index counts.
func (s *Server) Stats(ctx context.Context, _ *indexerv1.StatsRequest) (*indexerv1.StatsResponse, error) {
	if err := s.checkReady(); err != nil {
		return nil, s.toStatus(ctx, "Stats", err)
	}
	st, err := s.Store.Stats(ctx)
	if err != nil {
		return nil, s.toStatus(ctx, "Stats", err)
	}
	return &indexerv1.StatsResponse{Documents: st.Documents, Scopes: st.Scopes, ScopeBuilds: st.ScopeBuilds}, nil
}
