// Package server implements the indexer's two gRPC services, one file per
// RPC family: IndexerService, the search (search.go, scopes.go, stats.go),
// and ClusterStateService, the state the cluster's services share
// (sessions.go and sessionstates.go for Legacy sessions, requeststates.go,
// cancellations.go for relays, tooldefinitions.go, ratelimit.go and
// ratebuckets.go, auditevents.go, tasks.go and taskrequests.go for the
// aggregators' MCP tasks); access.go is the one place that decides who may
// call each RPC beyond its allow list, and errors.go the one place errors
// become gRPC statuses.
package server

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/services/audit"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/ratelimit"
	"github.com/switchboard-mcp/switchboard/services/rpc"

	"github.com/switchboard-mcp/switchboard/indexer/internal/approvals"
	"github.com/switchboard-mcp/switchboard/indexer/internal/revocation"
	"github.com/switchboard-mcp/switchboard/indexer/internal/scope"
	"github.com/switchboard-mcp/switchboard/indexer/internal/sessionevents"
	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// Limits bound the number of hits a search returns.
type Limits struct {
	Default, Max int
}

// Deps are the server's collaborators and settings.
type Deps struct {
	Store       store.Store
	Resolver    *scope.Resolver
	Revocations *revocation.Hub
	// SessionEvents holds the Legacy session states and routes relayed
	// input responses.
	SessionEvents *sessionevents.Hub
	// Approvals streams tool definition approvals to aggregators.
	Approvals *approvals.Hub
	// ReviewNewTools, when it holds true (aggregator.pinning.newTools
	// review in the indexer's configuration, applied live), records every
	// new tool of a backend with tools recorded as pending, whether or
	// not the aggregator asks (new_tools_pending); nil: only when asked.
	ReviewNewTools *atomic.Bool
	// SessionLimits and MaxSessionStateBytes bound session states as the
	// gateway does (gateway.sessions).
	SessionLimits        store.SessionStateLimits
	MaxSessionStateBytes int64
	Ranking              store.Ranking
	Limits               Limits
	// RevocationTTL holds, as a time.Duration, as long as a session lives
	// (config.RevocationTTL, applied live): a revocation expiring later
	// (beyond clock skew) is clamped.
	RevocationTTL *atomic.Int64
	// MaxRevocationsPerCaller bounds the live revocations a caller that is
	// not an operator may have recorded through this replica.
	MaxRevocationsPerCaller int
	// Stopping closes when the indexer shuts down; open streams end then.
	Stopping <-chan struct{}
	Log      *slog.Logger
	// Metrics may be nil.
	Metrics *Metrics
	// Limiter applies the rate limits of find_tool to Search; nil: none.
	Limiter *ratelimit.Limiter
	// Audit records each find_tool (Search); nil: none.
	Audit *audit.Writer
	// AuditEvents stores the trail in PostgreSQL (RecordAuditEvents,
	// QueryAuditEvents); nil: audit.database is off, and both RPCs are
	// FAILED_PRECONDITION.
	AuditEvents store.AuditEvents
}

// Server serves IndexerService (search: search.go, scopes.go, stats.go)
// and ClusterStateService (the state the services share: every other
// file), with one set of handlers: IndexerService's copies of the
// cluster-state RPCs are deprecated aliases, served for one release.
type Server struct {
	indexerv1.UnimplementedIndexerServiceServer
	indexerv1.UnimplementedClusterStateServiceServer
	Deps
	ready atomic.Bool
	now   func() time.Time
	quota *revocationQuota
	// answers bounds the live relayed input responses of each caller.
	answers *revocationQuota
	// requestStates bounds the live request state records of each
	// caller.
	requestStates *revocationQuota
	// principalRequestStates bounds them for each principal behind a
	// caller (requeststates.go).
	principalRequestStates *revocationQuota
	// cancellations bounds the rate of each caller's relayed
	// cancellations.
	cancellations *rateQuota
	// watchers bounds the open WatchSessionEvents streams of each caller
	// that is not an operator, at rpc.DefaultStreamsPerCaller (the zero
	// value's bound): each gateway replica holds one, all of them may
	// share one credential, and a stream may queue up to 64 MiB of events.
	// approvalWatchers and revocationWatchers do the same for their RPCs.
	watchers rpc.StreamQuota
	// approvalWatchers bounds the open WatchToolDefinitions streams of
	// each caller.
	approvalWatchers rpc.StreamQuota
	// revocationWatchers bounds the open WatchRevocations streams of each
	// caller.
	revocationWatchers rpc.StreamQuota
	// relays bounds the live relayed input responses of each principal.
	relays relayQuota
}

// New returns a server; it answers NOT_READY until SetReady.
func New(d Deps) *Server {
	return &Server{Deps: d, now: time.Now, quota: newRevocationQuota(d.MaxRevocationsPerCaller),
		answers:                newLiveQuota(maxInputResponsesPerCaller, errTooManyInputResponses),
		requestStates:          newLiveQuota(maxRequestStatesPerCaller, errTooManyRequestStates),
		principalRequestStates: newLiveQuota(maxRequestStatesPerPrincipal, errTooManyPrincipalRequestStates),
		cancellations:          newRateQuota(cancellationRate, cancellationBurst, maxCancellationCallers)}
}

// SetReady lets requests through once the schema is migrated.
func (s *Server) SetReady() {
	s.ready.Store(true)
	s.Metrics.setReady()
}

// Ready reports whether SetReady was called.
func (s *Server) Ready() bool { return s.ready.Load() }

var errNotReady = errors.New("not ready")

func (s *Server) checkReady() error {
	if !s.ready.Load() {
		return errNotReady
	}
	return nil
}

// pageSize is a paged operator read's page size: 0 asks for the RPC's
// default, and more than its bound is refused (INVALID_ARGUMENT) rather
// than cut, so a caller learns the bound instead of reading short pages.
func pageSize(requested uint32, def, limit int) (int, error) {
	switch size := int(requested); {
	case size == 0:
		return def, nil
	case size > limit:
		return 0, invalidArgument(fmt.Sprintf("page_size is at most %d", limit))
	default:
		return size, nil
	}
}
