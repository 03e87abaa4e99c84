package server

import (
	"context"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/services/ratelimit"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// WithLimiter applies l's rate limits to tools/call, resources/read and
// prompts/get; nil applies none.
func (s *Server) WithLimiter(l *ratelimit.Limiter) *Server {
	s.limiter = l
	return s
}

// limit takes the request's rate-limit tokens. It runs after the item is
// found and authorized (a missing or denied one is NOT_FOUND and costs
// nothing) and before the backend is called; a refusal is a
// *ratelimit.LimitedError (RESOURCE_EXHAUSTED, status.go).
func (s *Server) limit(ctx context.Context, method, server, tool string, b *backend.Client) error {
	if s.limiter == nil || ctx.Value(limitPaidKey{}) != nil {
		return nil
	}
	p := svcauth.PrincipalFrom(ctx)
	return s.limiter.Allow(ctx, ratelimit.Request{Method: method, Subject: p.GetSubject(), Groups: p.GetGroups(),
		Server: server, Tool: tool, Backend: b.Name()})
}

// limitPaidKey marks a call whose tokens were taken already: a retry a
// peer forwarded (ResumeHeldCall) paid on the replica that received it.
type limitPaidKey struct{}

func limitPaid(ctx context.Context) context.Context {
	return context.WithValue(ctx, limitPaidKey{}, true)
}
