package server

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc"

	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// Who may call each RPC, besides its allow list: the one table of it,
// which the interceptors (AccessOptions) consult before any handler runs,
// for IndexerService and ClusterStateService alike (the deprecated
// IndexerService copies of the cluster-state RPCs are the same RPCs).
// An allow list says which RPCs a credential calls; this says whose state
// an RPC reaches, which decides whether a credential that may not assert
// principals (an internal client, acting as its own identity and never
// for someone else) may call it at all.
type access int

const (
	// ownIdentity: any caller its allow list lets in. The handler acts
	// for the principal svcauth resolved, or checks that what the request
	// names is the caller's own (its tasks, its audit events).
	ownIdentity access = iota + 1
	// assertsPrincipals: the RPC reaches every principal's state or the
	// cluster's (Legacy sessions, relays, request states, pinned tool
	// definitions, rate-limit buckets, running tasks), which only the
	// services' own credentials, which assert principals (the gateway's,
	// the aggregator's), may touch.
	assertsPrincipals
	// operatorOnly: what the people running the deployment read or
	// decide.
	operatorOnly
)

// methodAccess is the rule of every method of IndexerService and
// ClusterStateService, by method name. A method not listed is refused
// to every caller (TestEveryMethodHasAnAccessRule keeps it complete).
var methodAccess = map[string]access{
	// Search, scoped to the resolved principal; Stats counts documents
	// and scopes, no principal's.
	"Search": ownIdentity, "RefreshScope": ownIdentity, "Stats": ownIdentity,
	// Legacy sessions, relays between gateway replicas, request states:
	// keyed by digests of any principal's sessions and requests.
	"RevokeSession": assertsPrincipals, "CheckSession": assertsPrincipals, "WatchRevocations": assertsPrincipals,
	"ConsumeRequestState": assertsPrincipals, "ReleaseRequestState": assertsPrincipals,
	"UpdateSessionState": assertsPrincipals, "WatchSessionEvents": assertsPrincipals,
	"RelayInputResponse": assertsPrincipals, "RelayCancellation": assertsPrincipals,
	// Pinned tool definitions: what every aggregator quarantines.
	"RecordToolDefinitions": assertsPrincipals, "WatchToolDefinitions": assertsPrincipals,
	"ListToolDefinitions": operatorOnly, "ApproveToolDefinition": operatorOnly,
	// Rate-limit buckets, keyed by principals the caller names.
	"AcquireRateTokens": assertsPrincipals, "ListRateLimitBuckets": operatorOnly,
	// Audit events: a caller writes its own principal's (auditevents.go).
	"RecordAuditEvents": ownIdentity, "QueryAuditEvents": operatorOnly,
	// Tasks: reading and cancelling name the owner (ownerAllowed);
	// running one takes a runner's lease and bounds, and AdvanceTask and
	// RenewTaskLeases name no owner.
	"GetTask": ownIdentity, "ListTasks": ownIdentity, "CancelTask": ownIdentity,
	"CreateTask": assertsPrincipals, "AnswerTask": assertsPrincipals,
	"AdvanceTask": assertsPrincipals, "RenewTaskLeases": assertsPrincipals,
}

var (
	// errAssertingCallerOnly refuses an RPC of every principal's state to
	// a credential that may not assert principals.
	errAssertingCallerOnly = errors.New("only a service credential that asserts principals (the gateway's, an aggregator's) may call this: it reaches other principals' state")
	// errNoAccessRule refuses a method methodAccess does not list.
	errNoAccessRule = errors.New("no access rule for this method")
)

// AccessOptions are the server options that apply methodAccess: they
// come after the service authentication (rpc.NewServer's interceptors),
// which put the caller in the context.
func (s *Server) AccessOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			if err := s.checkAccess(ctx, info.FullMethod); err != nil {
				return nil, err
			}
			return handler(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			if err := s.checkAccess(ss.Context(), info.FullMethod); err != nil {
				return err
			}
			return handler(srv, ss)
		}),
	}
}

// indexerPackage prefixes the full names of the methods methodAccess
// rules; the health and reflection services are not the indexer's.
const indexerPackage = "/switchboard.indexer.v1."

// checkAccess refuses a call of fullMethod its caller may not make.
func (s *Server) checkAccess(ctx context.Context, fullMethod string) error {
	if !strings.HasPrefix(fullMethod, indexerPackage) {
		return nil
	}
	method := fullMethod[strings.LastIndexByte(fullMethod, '/')+1:]
	caller, _ := svcauth.CallerFrom(ctx)
	var err error
	switch methodAccess[method] {
	case ownIdentity:
	case assertsPrincipals:
		if !caller.AssertPrincipals {
			err = errAssertingCallerOnly
		}
	case operatorOnly:
		if !caller.Operator {
			err = errOperatorOnly
		}
	default:
		err = errNoAccessRule
	}
	return s.toStatus(ctx, method, err)
}
