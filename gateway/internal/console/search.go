package console

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/switchboard-mcp/switchboard/services/config"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

type searchData struct {
	View     viewAs
	Query    string
	Keywords string
	// Limit is the hits asked for: gateway.optimizer.limit, find_tool's
	// own, unless the form says otherwise; at most MaxLimit, the
	// indexer's bound.
	Limit, MaxLimit int
	// Searched is set once a query ran.
	Searched bool
	Resp     *indexerv1.SearchResponse
}

var partKinds = map[indexerv1.ScorePartKind]string{
	indexerv1.ScorePartKind_SCORE_PART_KIND_EXACT:   "exact",
	indexerv1.ScorePartKind_SCORE_PART_KIND_PREFIX:  "prefix",
	indexerv1.ScorePartKind_SCORE_PART_KIND_TRIGRAM: "trigram",
}

var termSources = map[indexerv1.TermSource]string{
	indexerv1.TermSource_TERM_SOURCE_QUERY:   "query",
	indexerv1.TermSource_TERM_SOURCE_KEYWORD: "keyword",
	indexerv1.TermSource_TERM_SOURCE_FRAMING: "framing",
	indexerv1.TermSource_TERM_SOURCE_SYNONYM: "synonym",
	indexerv1.TermSource_TERM_SOURCE_TOPIC:   "topic",
}

// searchPage runs find_tool's search for a chosen principal with the
// ranking explained (SearchRequest.explain, an operator's right).
func (c *Console) searchPage(w http.ResponseWriter, r *http.Request, s session) {
	q := r.URL.Query()
	p := page{Title: "Search playground", Active: "search", Session: &s}
	v, err := c.readViewAs(q)
	// Keywords are find_tool's keyword array: one per line, or repeated
	// keywords= parameters (a keyword may hold a comma).
	keywords := readLines(q["keywords"])
	d := searchData{View: v, Query: q.Get("q"), Keywords: strings.Join(keywords, "\n"), Limit: c.live.Load().searchLimit, MaxLimit: config.MaxIndexerLimit}
	p.Data = &d
	if n, convErr := strconv.Atoi(q.Get("limit")); convErr == nil && n > 0 {
		d.Limit = min(n, config.MaxIndexerLimit)
	}
	switch {
	case err != nil:
		p.Error = err.Error()
	case len(d.Query) > maxQueryBytes || len(d.Keywords) > maxQueryBytes:
		p.Error = "the query or the keywords are too long"
	case len(keywords) > maxKeywords:
		p.Error = fmt.Sprintf("more than %d keywords", maxKeywords)
	case c.deps.Indexer == nil:
		p.Error = "gateway.indexer is not configured: there is no search."
	}
	if p.Error != "" {
		c.render(w, r, http.StatusBadRequest, "search", p)
		return
	}
	if strings.TrimSpace(d.Query) == "" && strings.TrimSpace(d.Keywords) == "" {
		c.render(w, r, http.StatusOK, "search", p)
		return
	}
	c.deps.Log.Info("console: search as", "operator", s.Operator, "subject", v.Subject, "groups", v.Groups, "server", v.Path(), "query", d.Query)
	ctx, cancel := rpcContext(r)
	defer cancel()
	d.Searched = true
	d.Resp, err = c.deps.Indexer.Search(ctx, &indexerv1.SearchRequest{
		Principal: v.Principal(), Server: v.Server, Query: d.Query, Keywords: keywords, Limit: uint32(d.Limit), Explain: true,
	})
	if err != nil {
		c.renderFailure(w, r, "search", p, "Search", err)
		return
	}
	c.render(w, r, http.StatusOK, "search", p)
}
