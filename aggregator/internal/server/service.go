// Package server serves the engine as the AggregatorService gRPC API, one
// file per RPC family: discover.go, list.go, call.go and callstream.go
// (tools/call, plain and streamed), held_forward.go (ResumeHeldCall, and
// the retry of a call held on another replica), resources.go, prompts.go
// (prompts/get and completion/complete), watch.go and backends.go.
// admit.go is the one way a request reaches a backend for a caller
// (ratelimit.go and audit.go are two of its steps), route.go decides how
// an admitted tools/call runs, and status.go is the one place where errors
// become gRPC statuses.
//
// Every handler acts for svcauth.PrincipalFrom(ctx), which the auth
// interceptor has resolved from the caller's credential.
package server

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/engine"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/peer"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/traffic"
	"github.com/switchboard-mcp/switchboard/services/audit"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/ratelimit"
	"github.com/switchboard-mcp/switchboard/services/rpc"
)

// Server implements aggregatorv1.AggregatorServiceServer on an Engine.
type Server struct {
	aggregatorv1.UnimplementedAggregatorServiceServer
	e   *engine.Engine
	log *slog.Logger
	// peers forwards retries of calls held by other replicas; nil: none.
	peers *peer.Forwarder
	// limiter applies the rate limits (ratelimit.go); nil: none.
	limiter *ratelimit.Limiter
	// audit records calls, reads and prompt gets (audit.go); nil: none.
	audit *audit.Writer
	// groupsClaim is the claim of a caller's token holding its groups
	// (gateway.auth.oidc.groupsClaim), for binding the token to the
	// principal asserted with it (admit.go); a reload may change it, as
	// the gateway applies it live.
	groupsClaim atomic.Pointer[string]
	// watchers bounds the open WatchCatalog streams of each caller that
	// is not an operator (aggregator.maxWatchesPerCaller).
	watchers *rpc.StreamQuota
	// tasks runs the calls that become tasks (taskrun.go); nil: none do.
	tasks *taskRunner
	// code runs code mode's programs (codemode.go); nil: code mode is off.
	code *codeMode
	// traffic counts the tool calls for GetTraffic (traffic.go), replica
	// naming this replica there; nil: none.
	traffic *traffic.Recorder
	replica string
	// stopping is closed when the replica starts to shut down: the
	// catalog watches end then (watch.go), as their callers open them
	// again on another replica, rather than hold the graceful stop for
	// all of aggregator.shutdownGrace. Nil: never.
	stopping <-chan struct{}
}

// New serves e.
func New(e *engine.Engine) *Server {
	return &Server{e: e, log: e.Log(), watchers: &rpc.StreamQuota{Max: e.Options().MaxWatchesPerCaller}}
}

// WithShutdown ends the catalog watches when stopping is closed (the
// replica's shutdown begins), so that the graceful stop waits only for
// the calls in flight.
func (s *Server) WithShutdown(stopping <-chan struct{}) *Server {
	s.stopping = stopping
	return s
}

// WithPeers makes retries of calls held by another replica go to it
// through f (see held_forward.go).
func (s *Server) WithPeers(f *peer.Forwarder) *Server {
	s.peers = f
	return s
}

// WithGroupsClaim names the claim of a caller's token that holds its
// groups, as the gateway reads it; unset, callerid.DefaultGroupsClaim.
func (s *Server) WithGroupsClaim(claim string) *Server {
	s.SetGroupsClaim(claim)
	return s
}

// SetGroupsClaim puts a new groups claim in force (a reload of
// gateway.auth.oidc.groupsClaim) for the admissions that start after it.
func (s *Server) SetGroupsClaim(claim string) { s.groupsClaim.Store(&claim) }

// GroupsClaim is the groups claim in force.
func (s *Server) GroupsClaim() string {
	if c := s.groupsClaim.Load(); c != nil {
		return *c
	}
	return ""
}

var _ aggregatorv1.AggregatorServiceServer = (*Server)(nil)

func (s *Server) fail(ctx context.Context, method string, err error) error {
	return toStatus(ctx, s.log, method, err)
}

// timed runs a backend request and records its metric.
func timed[T any](s *Server, b *backend.Client, method string, f func() (T, error)) (T, error) {
	start := time.Now()
	res, err := f()
	s.e.Options().Metrics.BackendRequest(b.Name(), method, err, time.Since(start))
	return res, err
}
