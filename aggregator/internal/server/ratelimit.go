package server

import (
	"context"

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
// runs after the item is found, authorized and checked, and before the
// backend is called; a request refused before (missing, denied, invalid)
// takes its token from the limits per principal only (admit.go refused).
// A refusal is a *ratelimit.LimitedError (RESOURCE_EXHAUSTED, status.go).
func (s *Server) limit(ctx context.Context, r ratelimit.Request) error {
	if s.limiter == nil {
		return nil
	}
	p := svcauth.PrincipalFrom(ctx)
	r.Subject, r.Groups = p.GetSubject(), p.GetGroups()
	return s.limiter.Allow(ctx, r)
}
