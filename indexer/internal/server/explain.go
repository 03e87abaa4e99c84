package server

import (
	"context"
	"errors"

	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// Explained searches (SearchRequest.explain) are for operators: the parts
// of a score show how the ranking weighs words, which is for the people
// who tune it, not for the services that search. A search that does not
// ask for an explanation runs none of this.

// errExplainOperatorOnly refuses explain to a caller that is not an
// operator.
var errExplainOperatorOnly = errors.New("explain is for operator credentials only")

// mayExplain refuses an explained search to every caller but an operator.
// It looks at the request and the credential only, so the refusal is the
// same whatever the principal's scope holds.
func mayExplain(ctx context.Context, req *indexerv1.SearchRequest) error {
	if !req.GetExplain() {
		return nil
	}
	if caller, _ := svcauth.CallerFrom(ctx); caller.Operator {
		return nil
	}
	return errExplainOperatorOnly
}

// rank is the store's Search, or, when explain is set, its
// SearchExplained (which returns the same hits).
func (s *Server) rank(ctx context.Context, sc store.Scope, q store.Query, explain bool) ([]store.Hit, store.Explained, error) {
	if !explain {
		hits, err := s.Store.Search(ctx, sc, q, s.Ranking)
		return hits, store.Explained{}, err
	}
	ex, err := s.Store.SearchExplained(ctx, sc, q, s.Ranking)
	if err != nil {
		return nil, store.Explained{}, err
	}
	hits := make([]store.Hit, len(ex.Hits))
	for i, h := range ex.Hits {
		hits[i] = h.Hit
	}
	return hits, ex, nil
}

// addExplanation fills the response's explanation fields from ex, whose
// hits are resp's, in order.
func addExplanation(resp *indexerv1.SearchResponse, ex store.Explained) {
	resp.TrigramKey = ex.TrigramKey
	for _, w := range ex.MeaningWords {
		resp.MeaningWords = append(resp.MeaningWords, &indexerv1.MeaningWord{Word: w.Word, Weight: w.Weight})
	}
	resp.Terms = make([]*indexerv1.QueryTerm, len(ex.Terms))
	for i, t := range ex.Terms {
		resp.Terms[i] = &indexerv1.QueryTerm{
			Word: t.Word, Weight: t.Weight, Source: termSource[t.Source], Expands: t.Expands, Lexemes: t.Lexemes,
		}
	}
	for i, h := range ex.Hits {
		parts := make([]*indexerv1.ScorePart, len(h.Parts))
		for j, p := range h.Parts {
			parts[j] = &indexerv1.ScorePart{
				Kind: partKind[p.Kind], Contribution: p.Contribution,
				Lexeme: p.Lexeme, Words: p.Words, Boost: p.Boost, Idf: p.IDF,
				ExactRank: float64(p.ExactRank), PrefixRank: float64(p.PrefixRank), PrefixWeight: float64(p.PrefixWeight),
				MatchedLexemes: p.Matched, MatchedLexemeCount: uint32(p.MatchedCount),
				NameKey: p.NameKey, Similarity: float64(p.Similarity), TrigramWeight: float64(p.TrigramWeight),
				MeaningWeight: p.MeaningWeight, Begins: p.Begins, Near: p.Near, FuzzyWeight: float64(p.FuzzyWeight),
			}
		}
		resp.Hits[i].Explanation = parts
	}
}

var termSource = map[store.TermSource]indexerv1.TermSource{
	store.SourceQuery:   indexerv1.TermSource_TERM_SOURCE_QUERY,
	store.SourceKeyword: indexerv1.TermSource_TERM_SOURCE_KEYWORD,
	store.SourceFraming: indexerv1.TermSource_TERM_SOURCE_FRAMING,
	store.SourceSynonym: indexerv1.TermSource_TERM_SOURCE_SYNONYM,
	store.SourceTopic:   indexerv1.TermSource_TERM_SOURCE_TOPIC,
}

var partKind = map[store.PartKind]indexerv1.ScorePartKind{
	store.PartExact:   indexerv1.ScorePartKind_SCORE_PART_KIND_EXACT,
	store.PartPrefix:  indexerv1.ScorePartKind_SCORE_PART_KIND_PREFIX,
	store.PartTrigram: indexerv1.ScorePartKind_SCORE_PART_KIND_TRIGRAM,
	store.PartMeaning: indexerv1.ScorePartKind_SCORE_PART_KIND_MEANING,
	store.PartShorter: indexerv1.ScorePartKind_SCORE_PART_KIND_SHORTER,
	store.PartFuzzy:   indexerv1.ScorePartKind_SCORE_PART_KIND_FUZZY,
}
