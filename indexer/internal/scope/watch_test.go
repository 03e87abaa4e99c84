package scope

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// watchStream is a catalog watch stream fed from events; closed, it breaks.
type watchStream struct {
	grpc.ServerStreamingClient[aggregatorv1.WatchCatalogResponse]
	ctx    context.Context
	events chan *aggregatorv1.WatchCatalogResponse
}

func (s *watchStream) Recv() (*aggregatorv1.WatchCatalogResponse, error) {
	select {
	case ev, ok := <-s.events:
		if !ok {
			return nil, errors.New("stream broken")
		}
		return ev, nil
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
}

// watchedAggregator answers Discover with its current view digest, and
// each WatchCatalog with the next stream of streams.
type watchedAggregator struct {
	aggregatorv1.AggregatorServiceClient
	mu      sync.Mutex
	digest  string
	streams chan chan *aggregatorv1.WatchCatalogResponse
}

func (a *watchedAggregator) Discover(context.Context, *aggregatorv1.DiscoverRequest, ...grpc.CallOption) (*aggregatorv1.DiscoverResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return &aggregatorv1.DiscoverResponse{CatalogVersion: 1, ToolsDigest: a.digest}, nil
}

func (a *watchedAggregator) WatchCatalog(ctx context.Context, _ *aggregatorv1.WatchCatalogRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[aggregatorv1.WatchCatalogResponse], error) {
	select {
	case events := <-a.streams:
		return &watchStream{ctx: ctx, events: events}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// A policy change keeps the catalog version and, made while the watch
// was down, is named by no event. A scope resolved in that gap (from a
// replica still on the old policy) was served until scopeTTL, since the
// new stream's first event changed nothing; the first event of every
// stream now drops the cached scopes.
func TestWatchInvalidatesOnEveryNewStream(t *testing.T) {
	agg := &watchedAggregator{digest: "old-policy", streams: make(chan chan *aggregatorv1.WatchCatalogResponse)}
	r := New(agg, nil, 10*time.Minute, slog.New(slog.NewTextHandler(io.Discard, nil)))
	r.byDigest["old-policy"] = store.Scope{ID: 1, Digest: "old-policy"}
	r.byDigest["new-policy"] = store.Scope{ID: 2, Digest: "new-policy"}
	alice := &commonv1.Principal{Subject: "alice"}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	generation := func() uint64 {
		r.mu.Lock()
		defer r.mu.Unlock()
		return uint64(r.generation)
	}
	go r.Watch(ctx)
	first := make(chan *aggregatorv1.WatchCatalogResponse, 1)
	agg.streams <- first
	first <- &aggregatorv1.WatchCatalogResponse{CatalogVersion: 1}
	testkit.Eventually(t, "the first event taken", 5*time.Second, func() bool { return generation() >= 1 })
	close(first) // the stream breaks; the watch waits for another
	testkit.Eventually(t, "the broken stream seen", 5*time.Second, func() bool { return generation() >= 2 })
	if sc, _, err := r.Resolve(ctx, alice, ""); err != nil || sc.Digest != "old-policy" {
		t.Fatalf("resolve in the gap: %v, %v", sc, err)
	}
	agg.mu.Lock()
	agg.digest = "new-policy"
	agg.mu.Unlock()
	second := make(chan *aggregatorv1.WatchCatalogResponse, 1)
	second <- &aggregatorv1.WatchCatalogResponse{CatalogVersion: 1}
	agg.streams <- second
	testkit.Eventually(t, "alice's scope resolved again once the watch is back", 5*time.Second, func() bool {
		sc, _, err := r.Resolve(ctx, alice, "")
		return err == nil && sc.Digest == "new-policy"
	})
}
