// Package server implements the IndexerService gRPC API on top of the
// search store and the scope resolver.
package server

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/status"

	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"

	"github.com/switchboard-mcp/switchboard/indexer/internal/scope"
	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// Limits bound the number of hits a search returns.
type Limits struct {
	Default, Max int
}

// Server serves IndexerService.
type Server struct {
	indexerv1.UnimplementedIndexerServiceServer
	store    *store.Store
	resolver *scope.Resolver
	ranking  store.Ranking
	limits   Limits
	log      *slog.Logger
	metrics  *Metrics
	ready    atomic.Bool
}

// New returns a server; it answers NOT_READY until SetReady. metrics may be
// nil.
func New(st *store.Store, resolver *scope.Resolver, ranking store.Ranking, limits Limits, log *slog.Logger, metrics *Metrics) *Server {
	return &Server{store: st, resolver: resolver, ranking: ranking, limits: limits, log: log, metrics: metrics}
}

// SetReady lets requests through once the schema is migrated.
func (s *Server) SetReady() {
	s.ready.Store(true)
	s.metrics.setReady()
}

// Ready reports whether SetReady was called.
func (s *Server) Ready() bool { return s.ready.Load() }

// Search ranks the calling principal's tools.
func (s *Server) Search(ctx context.Context, req *indexerv1.SearchRequest) (*indexerv1.SearchResponse, error) {
	start := time.Now()
	resp, err := s.search(ctx, req)
	err = s.toStatus(ctx, "Search", err)
	outcome := "ok"
	if err != nil {
		outcome = status.Code(err).String()
	}
	s.metrics.searched(outcome, time.Since(start))
	return resp, err
}

func (s *Server) search(ctx context.Context, req *indexerv1.SearchRequest) (*indexerv1.SearchResponse, error) {
	if err := s.checkReady(); err != nil {
		return nil, err
	}
	q := store.Query{Text: req.GetQuery(), Keywords: req.GetKeywords(), Limit: s.limit(req.GetLimit())}
	size := len(q.Text)
	for _, k := range q.Keywords {
		size += len(k)
	}
	switch {
	case strings.TrimSpace(q.Text) == "" && len(q.Keywords) == 0:
		return nil, invalidArgument("query is required")
	case size > store.MaxQueryBytes:
		return nil, invalidArgument("query and keywords are too long (at most 4096 bytes)")
	case len(req.GetKeywords()) > 32:
		return nil, invalidArgument("too many keywords (at most 32)")
	}
	p := svcauth.PrincipalFrom(ctx)
	// A scope can vanish between lookup and search (collected by another
	// replica); forget it and rebuild once.
	for attempt := 0; ; attempt++ {
		sc, built, err := s.resolver.Resolve(ctx, p)
		if err != nil {
			return nil, err
		}
		if built {
			s.metrics.scopeBuilt()
		}
		hits, err := s.store.Search(ctx, sc, q, s.ranking)
		if errors.Is(err, store.ErrScopeNotFound) && attempt == 0 {
			s.resolver.Forget(p)
			continue
		}
		if err != nil {
			return nil, err
		}
		resp := &indexerv1.SearchResponse{
			ScopeSize:      uint32(sc.ToolCount),
			BaselineTokens: uint64(sc.BaselineTokens),
			CatalogVersion: sc.CatalogVersion,
		}
		for _, h := range hits {
			resp.Hits = append(resp.Hits, &indexerv1.SearchHit{
				Name: h.Name, Description: h.Description, InputSchemaJson: h.InputSchemaJSON, Score: h.Score,
			})
		}
		return resp, nil
	}
}

// limit applies the default to 0 and the maximum to anything larger.
func (s *Server) limit(requested uint32) int {
	if requested == 0 {
		return s.limits.Default
	}
	return min(int(requested), s.limits.Max)
}

// RefreshScope builds the calling principal's scope ahead of its first
// search.
func (s *Server) RefreshScope(ctx context.Context, _ *indexerv1.RefreshScopeRequest) (*indexerv1.RefreshScopeResponse, error) {
	if err := s.checkReady(); err != nil {
		return nil, s.toStatus(ctx, "RefreshScope", err)
	}
	sc, built, err := s.resolver.Resolve(ctx, svcauth.PrincipalFrom(ctx))
	if err != nil {
		return nil, s.toStatus(ctx, "RefreshScope", err)
	}
	if built {
		s.metrics.scopeBuilt()
	}
	return &indexerv1.RefreshScopeResponse{ToolsDigest: sc.Digest, ScopeSize: uint32(sc.ToolCount), Built: built}, nil
}

// Stats reports index counts.
func (s *Server) Stats(ctx context.Context, _ *indexerv1.StatsRequest) (*indexerv1.StatsResponse, error) {
	if err := s.checkReady(); err != nil {
		return nil, s.toStatus(ctx, "Stats", err)
	}
	st, err := s.store.Stats(ctx)
	if err != nil {
		return nil, s.toStatus(ctx, "Stats", err)
	}
	return &indexerv1.StatsResponse{Documents: st.Documents, Scopes: st.Scopes, ScopeBuilds: st.ScopeBuilds}, nil
}

// RevokeSession records a deleted gateway session.
func (s *Server) RevokeSession(ctx context.Context, req *indexerv1.RevokeSessionRequest) (*indexerv1.RevokeSessionResponse, error) {
	err := s.checkReady()
	if err == nil {
		err = validDigest(req.GetSessionDigest())
	}
	if err == nil && req.GetExpiresAt() == nil {
		err = invalidArgument("expires_at is required")
	}
	if err == nil {
		err = s.store.RevokeSession(ctx, req.GetSessionDigest(), req.GetExpiresAt().AsTime())
	}
	if err != nil {
		return nil, s.toStatus(ctx, "RevokeSession", err)
	}
	return &indexerv1.RevokeSessionResponse{}, nil
}

// CheckSession reports whether a session was revoked.
func (s *Server) CheckSession(ctx context.Context, req *indexerv1.CheckSessionRequest) (*indexerv1.CheckSessionResponse, error) {
	err := s.checkReady()
	if err == nil {
		err = validDigest(req.GetSessionDigest())
	}
	var revoked bool
	if err == nil {
		revoked, err = s.store.SessionRevoked(ctx, req.GetSessionDigest())
	}
	if err != nil {
		return nil, s.toStatus(ctx, "CheckSession", err)
	}
	return &indexerv1.CheckSessionResponse{Revoked: revoked}, nil
}

// validDigest accepts a hex SHA-256.
func validDigest(d string) error {
	if len(d) != 64 {
		return invalidArgument("session_digest must be a hex SHA-256 (64 characters)")
	}
	for _, c := range d {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return invalidArgument("session_digest must be a hex SHA-256 (64 characters)")
		}
	}
	return nil
}

var errNotReady = errors.New("not ready")

func (s *Server) checkReady() error {
	if !s.ready.Load() {
		return errNotReady
	}
	return nil
}
