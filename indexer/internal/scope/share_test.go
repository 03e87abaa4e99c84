package scope

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// splitReplicas answers as two aggregator replicas behind round robin
// while they disagree: Discover gives alice and bob one view ("d-public",
// public_report alone); ListTools comes from the other replica, where
// alice's view also holds secret_payroll and bob's does not. Alice's
// listing waits for release.
type splitReplicas struct {
	aggregatorv1.AggregatorServiceClient
	release chan struct{}
}

func (a *splitReplicas) Discover(context.Context, *aggregatorv1.DiscoverRequest, ...grpc.CallOption) (*aggregatorv1.DiscoverResponse, error) {
	return &aggregatorv1.DiscoverResponse{CatalogVersion: 1, ToolsDigest: "d-public"}, nil
}

func (a *splitReplicas) ListTools(_ context.Context, req *aggregatorv1.ListToolsRequest, _ ...grpc.CallOption) (*aggregatorv1.ListToolsResponse, error) {
	if req.GetPrincipal().GetSubject() == "alice" {
		<-a.release
		return &aggregatorv1.ListToolsResponse{CatalogVersion: 2, ToolsDigest: "d-alice",
			Tools: []*aggregatorv1.Tool{{Name: "public_report"}, {Name: "secret_payroll"}}}, nil
	}
	return &aggregatorv1.ListToolsResponse{CatalogVersion: 2, ToolsDigest: "d-bob", Tools: []*aggregatorv1.Tool{{Name: "public_report"}}}, nil
}

// scopeStore keeps the scopes built, by digest.
type scopeStore struct {
	store.Index
	mu    sync.Mutex
	built map[string]store.Scope
}

func (s *scopeStore) LookupScope(_ context.Context, digest string) (store.Scope, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sc, ok := s.built[digest]; ok {
		return sc, nil
	}
	return store.Scope{}, store.ErrScopeNotFound
}

func (s *scopeStore) BuildScope(_ context.Context, digest string, _ uint64, _ []store.Tool) (store.Scope, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sc, ok := s.built[digest]; ok {
		return sc, false, nil
	}
	sc := store.Scope{ID: int64(len(s.built) + 1), Digest: digest}
	s.built[digest] = sc
	return sc, true, nil
}

// TestASharedBuildOfAnotherViewIsNotUsed: bob's first search joins the
// build of alice's, begun for the view Discover gave both; alice's
// listing comes back as her own, larger view. Bob must search his own
// view, never hers.
func TestASharedBuildOfAnotherViewIsNotUsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		agg := &splitReplicas{release: make(chan struct{})}
		r := New(agg, nil, time.Hour, slog.New(slog.DiscardHandler))
		r.store = &scopeStore{built: map[string]store.Scope{}}
		resolve := func(subject string, out chan<- store.Scope) {
			p := &commonv1.Principal{Subject: subject}
			sc, _, err := r.Resolve(context.Background(), p, "")
			if err != nil {
				t.Error(err)
			}
			out <- sc
		}
		alice, bob := make(chan store.Scope, 1), make(chan store.Scope, 1)
		go resolve("alice", alice)
		synctest.Wait() // alice's build lists her view
		go resolve("bob", bob)
		synctest.Wait() // bob waits on alice's build
		close(agg.release)
		if sc := <-alice; sc.Digest != "d-alice" {
			t.Errorf("alice's scope %s, want her view's", sc.Digest)
		}
		if sc := <-bob; sc.Digest != "d-bob" {
			t.Errorf("bob's scope %s, want his own view's, not another principal's", sc.Digest)
		}
	})
}
