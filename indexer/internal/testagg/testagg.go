// Package testagg is an in-process AggregatorService backed by data its
// owner controls: the tools of the catalog and which of them each subject
// may call. Tests and the search-quality harness run it behind a real gRPC
// server with real service authentication, in place of the aggregator, to
// drive the indexer through exactly the RPCs it uses: Discover, ListTools
// and WatchCatalog.
package testagg

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// Token is the service credential the aggregator accepts from the indexer.
const Token = "testagg-indexer-token"

// Server is the fake aggregator.
type Server struct {
	aggregatorv1.UnimplementedAggregatorServiceServer

	mu       sync.Mutex
	version  uint64
	tools    map[string]*aggregatorv1.Tool
	views    map[string][]string // subject → tool names; absent: every tool
	watchers map[chan *aggregatorv1.WatchCatalogResponse]struct{}

	// ListToolsCalls counts ListTools pages served.
	ListToolsCalls atomic.Int64
}

// New returns an empty catalog at version 1.
func New() *Server {
	return &Server{version: 1, tools: map[string]*aggregatorv1.Tool{}, views: map[string][]string{},
		watchers: map[chan *aggregatorv1.WatchCatalogResponse]struct{}{}}
}

// Serve serves on lis until ctx ends.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	auth := svcauth.NewAuthenticator([]config.ServiceCredential{{Name: "indexer", Token: Token, AssertPrincipals: true, Allow: config.IndexerMethods}})
	srv, err := rpc.NewServer(auth, config.TLS{}, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	aggregatorv1.RegisterAggregatorServiceServer(srv.Server, s)
	srv.SetServing()
	return srv.ServeListener(ctx, lis, time.Second)
}

// SetTools replaces the catalog.
func (s *Server) SetTools(tools []*aggregatorv1.Tool) {
	s.mu.Lock()
	s.tools = map[string]*aggregatorv1.Tool{}
	for _, t := range tools {
		s.tools[t.GetName()] = t
	}
	s.changedLocked()
	s.mu.Unlock()
}

// SetView limits subject to the named tools (a policy change).
func (s *Server) SetView(subject string, names []string) {
	s.mu.Lock()
	s.views[subject] = slices.Clone(names)
	s.changedLocked()
	s.mu.Unlock()
}

func (s *Server) changedLocked() {
	s.version++
	ev := &aggregatorv1.WatchCatalogResponse{CatalogVersion: s.version, Changed: []aggregatorv1.CatalogKind{aggregatorv1.CatalogKind_CATALOG_KIND_TOOLS}}
	for ch := range s.watchers {
		select {
		case ch <- ev:
		default: // a slow watcher catches up from the next event's version
		}
	}
}

// view returns the subject's tools sorted by name, and the version.
func (s *Server) view(subject string) ([]*aggregatorv1.Tool, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*aggregatorv1.Tool
	if names, ok := s.views[subject]; ok {
		for _, n := range names {
			if t, ok := s.tools[n]; ok {
				out = append(out, t)
			}
		}
	} else {
		for _, t := range s.tools {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b *aggregatorv1.Tool) int {
		switch {
		case a.GetName() < b.GetName():
			return -1
		case a.GetName() > b.GetName():
			return 1
		}
		return 0
	})
	return out, s.version
}

// Discover reports the principal's tool digest.
func (s *Server) Discover(ctx context.Context, _ *aggregatorv1.DiscoverRequest) (*aggregatorv1.DiscoverResponse, error) {
	tools, version := s.view(svcauth.PrincipalFrom(ctx).GetSubject())
	h := sha256.New()
	for _, t := range tools {
		h.Write([]byte(t.GetName() + "\x00" + t.GetDescription() + "\x00" + t.GetInputSchemaJson() + "\x00"))
	}
	return &aggregatorv1.DiscoverResponse{CatalogVersion: version, ToolCount: uint32(len(tools)), ToolsDigest: hex.EncodeToString(h.Sum(nil))}, nil
}

// ListTools serves one page; the cursor is the offset.
func (s *Server) ListTools(ctx context.Context, req *aggregatorv1.ListToolsRequest) (*aggregatorv1.ListToolsResponse, error) {
	s.ListToolsCalls.Add(1)
	tools, version := s.view(svcauth.PrincipalFrom(ctx).GetSubject())
	start := 0
	if req.GetCursor() != "" {
		var err error
		if start, err = strconv.Atoi(req.GetCursor()); err != nil || start < 0 || start > len(tools) {
			return nil, status.Error(codes.InvalidArgument, "invalid cursor")
		}
	}
	size := int(req.GetPageSize())
	if size <= 0 {
		size = 1000
	}
	end := min(start+size, len(tools))
	resp := &aggregatorv1.ListToolsResponse{Tools: tools[start:end], CatalogVersion: version}
	if end < len(tools) {
		resp.NextCursor = strconv.Itoa(end)
	}
	return resp, nil
}

// WatchCatalog sends the current version, then one event per change.
func (s *Server) WatchCatalog(_ *aggregatorv1.WatchCatalogRequest, stream aggregatorv1.AggregatorService_WatchCatalogServer) error {
	ch := make(chan *aggregatorv1.WatchCatalogResponse, 16)
	s.mu.Lock()
	s.watchers[ch] = struct{}{}
	first := &aggregatorv1.WatchCatalogResponse{CatalogVersion: s.version}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.watchers, ch)
		s.mu.Unlock()
	}()
	if err := stream.Send(first); err != nil {
		return err
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case ev := <-ch:
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
	}
}
