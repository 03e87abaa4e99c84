package server

import (
	"context"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/services/ratelimit"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// WithLimiter applies l's rate limits to every admission (admit.go); nil
// applies none.
func (s *Server) WithLimiter(l *ratelimit.Limiter) *Server {
	s.limiter = l
	return s
}

// limit takes the request's rate-limit tokens: an admission's step. It
// runs after the item is found and authorized (a missing or denied one is NOT_FOUND and costs
// nothing) and before the backend is called; a refusal is a
// *ratelimit.LimitedError (RESOURCE_EXHAUSTED, status.go).
func (s *Server) limit(ctx context.Context, method, server, tool string, b *backend.Client) error {
	if s.limiter == nil {
		return nil
	}
	p := svcauth.PrincipalFrom(ctx)
	return s.limiter.Allow(ctx, ratelimit.Request{Method: method, Subject: p.GetSubject(), Groups: p.GetGroups(),
		Server: server, Tool: tool, Backend: b.Name()})
}
