package testkit

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

// FakeIndexer is an IndexerService that keeps in memory the state that
// the gateways share (revoked sessions, used request states) and sends
// tool definition approvals when the test says so (SendToolDefinitions);
// the other RPCs answer with the functions the test sets. Its zero value
// is ready; set the fields before it serves.
type FakeIndexer struct {
	indexerv1.UnimplementedIndexerServiceServer

	// Check, when set, runs first in every RPC, with the RPC's name
	// ("Search") and its request; an error is the RPC's answer.
	Check func(ctx context.Context, method string, req any) error

	// The RPCs the test answers itself; those it leaves unset answer
	// UNIMPLEMENTED.
	SearchFunc                func(context.Context, *indexerv1.SearchRequest) (*indexerv1.SearchResponse, error)
	RefreshScopeFunc          func(context.Context, *indexerv1.RefreshScopeRequest) (*indexerv1.RefreshScopeResponse, error)
	StatsFunc                 func(context.Context, *indexerv1.StatsRequest) (*indexerv1.StatsResponse, error)
	RecordToolDefinitionsFunc func(context.Context, *indexerv1.RecordToolDefinitionsRequest) (*indexerv1.RecordToolDefinitionsResponse, error)
	ListToolDefinitionsFunc   func(context.Context, *indexerv1.ListToolDefinitionsRequest) (*indexerv1.ListToolDefinitionsResponse, error)
	QueryAuditEventsFunc      func(context.Context, *indexerv1.QueryAuditEventsRequest) (*indexerv1.QueryAuditEventsResponse, error)

	calls calls

	mu          sync.Mutex
	revoked     map[string]bool // session digests
	consumed    map[string]bool // request state digests
	revocations watches[*indexerv1.WatchRevocationsResponse]
	definitions watches[*indexerv1.WatchToolDefinitionsResponse]
}

// Register registers x on a gRPC server (see Serve).
func (x *FakeIndexer) Register(s grpc.ServiceRegistrar) {
	indexerv1.RegisterIndexerServiceServer(s, x)
}

// Calls reports how many calls of method ("Search") x has had.
func (x *FakeIndexer) Calls(method string) int { return x.calls.count(method) }

// revocation is a revoked session as the watch sends it: it expires an
// hour from now.
func revocation(digest string) *indexerv1.SessionRevocation {
	return &indexerv1.SessionRevocation{SessionDigest: digest, ExpiresAt: timestamppb.New(time.Now().Add(time.Hour))}
}

// RevokeSession records the revocation and sends it on every
// WatchRevocations stream.
func (x *FakeIndexer) RevokeSession(ctx context.Context, req *indexerv1.RevokeSessionRequest) (*indexerv1.RevokeSessionResponse, error) {
	if err := x.calls.begin(ctx, x.Check, "RevokeSession", req); err != nil {
		return nil, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.revoked == nil {
		x.revoked = map[string]bool{}
	}
	x.revoked[req.GetSessionDigest()] = true
	x.revocations.send(&indexerv1.WatchRevocationsResponse{Revocations: []*indexerv1.SessionRevocation{revocation(req.GetSessionDigest())}})
	return &indexerv1.RevokeSessionResponse{}, nil
}

// CheckSession reports whether the session was revoked.
func (x *FakeIndexer) CheckSession(ctx context.Context, req *indexerv1.CheckSessionRequest) (*indexerv1.CheckSessionResponse, error) {
	if err := x.calls.begin(ctx, x.Check, "CheckSession", req); err != nil {
		return nil, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return &indexerv1.CheckSessionResponse{Revoked: x.revoked[req.GetSessionDigest()]}, nil
}

// WatchRevocations sends the revocations so far in one complete
// snapshot, then each new one, as the indexer does for every gateway.
func (x *FakeIndexer) WatchRevocations(req *indexerv1.WatchRevocationsRequest, stream grpc.ServerStreamingServer[indexerv1.WatchRevocationsResponse]) error {
	if err := x.calls.begin(stream.Context(), x.Check, "WatchRevocations", req); err != nil {
		return err
	}
	x.mu.Lock()
	snapshot := &indexerv1.WatchRevocationsResponse{SnapshotComplete: true}
	for d := range x.revoked {
		snapshot.Revocations = append(snapshot.Revocations, revocation(d))
	}
	w := open(&x.revocations)
	x.mu.Unlock()
	defer func() {
		x.mu.Lock()
		delete(x.revocations, w)
		x.mu.Unlock()
	}()
	return w.serve(stream.Context(), snapshot, stream.Send)
}

// ConsumeRequestState answers first_use true for the first use of a
// digest, false after.
func (x *FakeIndexer) ConsumeRequestState(ctx context.Context, req *indexerv1.ConsumeRequestStateRequest) (*indexerv1.ConsumeRequestStateResponse, error) {
	if err := x.calls.begin(ctx, x.Check, "ConsumeRequestState", req); err != nil {
		return nil, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.consumed == nil {
		x.consumed = map[string]bool{}
	}
	first := !x.consumed[req.GetStateDigest()]
	x.consumed[req.GetStateDigest()] = true
	return &indexerv1.ConsumeRequestStateResponse{FirstUse: first}, nil
}

// WatchToolDefinitions sends a message with resync set, then each
// message of SendToolDefinitions.
func (x *FakeIndexer) WatchToolDefinitions(req *indexerv1.WatchToolDefinitionsRequest, stream grpc.ServerStreamingServer[indexerv1.WatchToolDefinitionsResponse]) error {
	if err := x.calls.begin(stream.Context(), x.Check, "WatchToolDefinitions", req); err != nil {
		return err
	}
	x.mu.Lock()
	w := open(&x.definitions)
	x.mu.Unlock()
	defer func() {
		x.mu.Lock()
		delete(x.definitions, w)
		x.mu.Unlock()
	}()
	return w.serve(stream.Context(), &indexerv1.WatchToolDefinitionsResponse{Resync: true}, stream.Send)
}

// SendToolDefinitions sends m on every open WatchToolDefinitions stream.
func (x *FakeIndexer) SendToolDefinitions(m *indexerv1.WatchToolDefinitionsResponse) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.definitions.send(m)
}

// DefinitionWatchers reports the open WatchToolDefinitions streams.
func (x *FakeIndexer) DefinitionWatchers() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.definitions)
}

// Search answers with SearchFunc.
func (x *FakeIndexer) Search(ctx context.Context, req *indexerv1.SearchRequest) (*indexerv1.SearchResponse, error) {
	return answer(x.calls.begin(ctx, x.Check, "Search", req), x.SearchFunc, x.UnimplementedIndexerServiceServer.Search, ctx, req)
}

// RefreshScope answers with RefreshScopeFunc.
func (x *FakeIndexer) RefreshScope(ctx context.Context, req *indexerv1.RefreshScopeRequest) (*indexerv1.RefreshScopeResponse, error) {
	return answer(x.calls.begin(ctx, x.Check, "RefreshScope", req), x.RefreshScopeFunc, x.UnimplementedIndexerServiceServer.RefreshScope, ctx, req)
}

// Stats answers with StatsFunc.
func (x *FakeIndexer) Stats(ctx context.Context, req *indexerv1.StatsRequest) (*indexerv1.StatsResponse, error) {
	return answer(x.calls.begin(ctx, x.Check, "Stats", req), x.StatsFunc, x.UnimplementedIndexerServiceServer.Stats, ctx, req)
}

// RecordToolDefinitions answers with RecordToolDefinitionsFunc.
func (x *FakeIndexer) RecordToolDefinitions(ctx context.Context, req *indexerv1.RecordToolDefinitionsRequest) (*indexerv1.RecordToolDefinitionsResponse, error) {
	return answer(x.calls.begin(ctx, x.Check, "RecordToolDefinitions", req), x.RecordToolDefinitionsFunc, x.UnimplementedIndexerServiceServer.RecordToolDefinitions, ctx, req)
}

// ListToolDefinitions answers with ListToolDefinitionsFunc.
func (x *FakeIndexer) ListToolDefinitions(ctx context.Context, req *indexerv1.ListToolDefinitionsRequest) (*indexerv1.ListToolDefinitionsResponse, error) {
	return answer(x.calls.begin(ctx, x.Check, "ListToolDefinitions", req), x.ListToolDefinitionsFunc, x.UnimplementedIndexerServiceServer.ListToolDefinitions, ctx, req)
}

// QueryAuditEvents answers with QueryAuditEventsFunc.
func (x *FakeIndexer) QueryAuditEvents(ctx context.Context, req *indexerv1.QueryAuditEventsRequest) (*indexerv1.QueryAuditEventsResponse, error) {
	return answer(x.calls.begin(ctx, x.Check, "QueryAuditEvents", req), x.QueryAuditEventsFunc, x.UnimplementedIndexerServiceServer.QueryAuditEvents, ctx, req)
}
