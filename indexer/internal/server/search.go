package server

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/audit"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// Search ranks the calling principal's tools.
func (s *Server) Search(ctx context.Context, req *indexerv1.SearchRequest) (*indexerv1.SearchResponse, error) {
	start := time.Now()
	resp, err := s.search(ctx, req)
	err = s.toStatus(ctx, "Search", err)
	outcome := "ok"
	if err != nil {
		outcome = status.Code(err).String()
	}
	s.Metrics.searched(outcome, time.Since(start))
	s.auditSearch(ctx, req, start, len(resp.GetHits()), err)
	return resp, err
}

// auditSearch records a find_tool: the principal, the server, the
// digest of the query (its arguments: description and keywords) and how
// many tools it found.
func (s *Server) auditSearch(ctx context.Context, req *indexerv1.SearchRequest, start time.Time, hits int, err error) {
	if s.Audit == nil {
		return
	}
	e := audit.Call(ctx, audit.KindFindTool, svcauth.PrincipalFrom(ctx), start)
	e.Server, e.Tool = req.GetServer(), "find_tool"
	args, _ := json.Marshal(struct {
		Description string   `json:"description"`
		Keywords    []string `json:"keywords,omitempty"`
	}{req.GetQuery(), req.GetKeywords()}) // strings always encode
	e.RawArguments = string(args)
	e.Outcome = audit.OutcomeOfCode(status.Code(err))
	if err == nil {
		e.Detail = strconv.Itoa(hits) + " tools found"
	}
	e.Since(time.Now())
	s.Audit.Record(e)
}

func (s *Server) search(ctx context.Context, req *indexerv1.SearchRequest) (*indexerv1.SearchResponse, error) {
	if err := mayExplain(ctx, req); err != nil {
		return nil, err
	}
	if err := s.checkReady(); err != nil {
		return nil, err
	}
	q := store.Query{Text: req.GetQuery(), Keywords: req.GetKeywords(), Limit: s.limit(req.GetLimit())}
	size := len(q.Text)
	for _, k := range q.Keywords {
		size += len(k)
	}
	p := svcauth.PrincipalFrom(ctx)
	var refused error
	switch {
	case strings.TrimSpace(q.Text) == "" && len(q.Keywords) == 0:
		refused = invalidArgument("query is required")
	case size > store.MaxQueryBytes:
		refused = invalidArgument("query and keywords are too long (at most 4096 bytes)")
	case len(req.GetKeywords()) > store.MaxKeywords:
		refused = invalidArgument("too many keywords (at most 32)")
	}
	if refused != nil {
		// Refused, it is still an event of the trail: it takes its token
		// from the limits per principal, as every refused request does.
		if !operatorLooking(ctx, req) {
			if err := s.limitSearch(ctx, p, req.GetServer(), true); err != nil {
				return nil, err
			}
		}
		return nil, refused
	}
	// A scope can vanish between lookup and search (collected by another
	// replica); forget it and rebuild once.
	for attempt := 0; ; attempt++ {
		sc, built, err := s.Resolver.Resolve(ctx, p, req.GetServer())
		if err != nil {
			return nil, err
		}
		if built {
			s.Metrics.scopeBuilt()
		}
		if attempt == 0 && !operatorLooking(ctx, req) {
			// After the server is found (a missing one costs nothing),
			// before the search; an operator's look costs nobody.
			if err := s.limitSearch(ctx, p, req.GetServer(), false); err != nil {
				return nil, err
			}
		}
		hits, explained, err := s.rank(ctx, sc, q, req.GetExplain())
		if errors.Is(err, store.ErrScopeNotFound) && attempt == 0 {
			s.Resolver.Forget(p, req.GetServer(), sc)
			continue
		}
		if err != nil {
			return nil, err
		}
		resp := &indexerv1.SearchResponse{
			ScopeSize:      uint32(sc.ToolCount),
			BaselineTokens: uint64(sc.BaselineTokens),
			CatalogVersion: sc.CatalogVersion,
			Hits:           make([]*indexerv1.SearchHit, 0, len(hits)),
		}
		for _, h := range hits {
			resp.Hits = append(resp.Hits, &indexerv1.SearchHit{
				Name: h.Name, Description: h.Description, InputSchemaJson: h.InputSchemaJSON, MetaJson: h.MetaJSON, Score: h.Score,
				Title: h.Title, AnnotationsJson: h.AnnotationsJSON, OutputSchemaJson: h.OutputSchemaJSON,
			})
		}
		if req.GetExplain() {
			addExplanation(resp, explained)
		}
		return resp, nil
	}
}

// limit applies the default to 0 and the maximum to anything larger.
func (s *Server) limit(requested uint32) int {
	if requested == 0 {
		return s.Limits.Default
	}
	return min(int(requested), s.Limits.Max)
}
