package server

import (
	"context"
	"time"

	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

// maxRequestStateTTL bounds how far ahead a request state record may
// expire: gateways seal states for ten minutes, and a record outliving
// its state would only take space.
const maxRequestStateTTL = time.Hour

// ConsumeRequestState records one use of a gateway's sealed request state
// and says whether it was the first, across every replica.
func (s *Server) ConsumeRequestState(ctx context.Context, req *indexerv1.ConsumeRequestStateRequest) (*indexerv1.ConsumeRequestStateResponse, error) {
	err := s.checkReady()
	if err == nil && validDigest(req.GetStateDigest()) != nil {
		err = invalidArgument("state_digest must be a hex SHA-256 (64 characters)")
	}
	at := req.GetExpiresAt()
	switch {
	case err != nil:
	case at == nil:
		err = invalidArgument("expires_at is required")
	case at.CheckValid() != nil:
		err = invalidArgument("expires_at is not a valid timestamp")
	case at.AsTime().After(s.now().Add(maxRequestStateTTL + clockSkew)):
		err = invalidArgument("expires_at is further ahead than a request state lives (" + maxRequestStateTTL.String() + ")")
	}
	var first bool
	if err == nil {
		first, err = s.Store.ConsumeRequestState(ctx, req.GetStateDigest(), at.AsTime())
	}
	if err != nil {
		return nil, s.toStatus(ctx, "ConsumeRequestState", err)
	}
	return &indexerv1.ConsumeRequestStateResponse{FirstUse: first}, nil
}
