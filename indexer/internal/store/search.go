package store

import (
	"context"
	"fmt"
	"strings"
)

// Ranking holds the tunable weights of the ranking function. The defaults
// were chosen on the MetaTool development split as a whole (never per
// query); see docs/benchmarks-indexer.md.
type Ranking struct {
	// FieldWeights are ts_rank's weights for D, C, B, A: unused, parameter
	// text, description, name.
	FieldWeights [4]float32
	// Normalization is ts_rank's document-length normalization flags.
	Normalization int
	// KeywordBoost multiplies the weight of caller-supplied keywords.
	KeywordBoost float64
	// SynonymBoost is the weight of a word added by synonym expansion;
	// RelatedBoost that of a word from the same topic.
	SynonymBoost float64
	RelatedBoost float64
	// PrefixWeight is the weight of a prefix match ("weather" in
	// "weatherforecast") relative to an exact lexeme match.
	PrefixWeight float64
	// TrigramWeight scales trigram similarity between the query and the
	// tool name; TrigramThreshold is the similarity below which it counts
	// for nothing.
	TrigramWeight    float64
	TrigramThreshold float64
}

// DefaultRanking is the ranking the indexer serves with.
var DefaultRanking = Ranking{
	FieldWeights:     [4]float32{0, 0.2, 0.5, 1.0},
	Normalization:    1,
	KeywordBoost:     2,
	SynonymBoost:     0.4,
	RelatedBoost:     0.3,
	PrefixWeight:     0.3,
	TrigramWeight:    0.5,
	TrigramThreshold: 0.5,
}

// Query is one search.
type Query struct {
	Text     string
	Keywords []string
	Limit    int
}

// Hit is one ranked tool.
type Hit struct {
	Name            string
	Description     string
	InputSchemaJSON string
	Score           float64
}

const (
	// MaxQueryBytes bounds the query text plus keywords.
	MaxQueryBytes = 4096
	maxTerms      = 128
	// maxTrigramWords is the longest query (in words) compared by trigram
	// similarity with tool names.
	maxTrigramWords = 4
)

// queryTerms turns the query and keywords into weighted words: query words
// at weight 1, keywords at KeywordBoost, synonyms of either at
// SynonymBoost times their source. PostgreSQL then stems them and drops
// stop words.
func (r Ranking) queryTerms(q Query) (terms []string, boosts []float64, key string) {
	weight := map[string]float64{}
	var order []string
	add := func(w string, b float64) {
		if old, ok := weight[w]; !ok {
			order = append(order, w)
			weight[w] = b
		} else if b > old {
			weight[w] = b
		}
	}
	type source struct {
		word  string
		boost float64
	}
	var direct []source
	var keyParts []string
	for i, text := range append([]string{q.Text}, q.Keywords...) {
		b := 1.0
		if i > 0 {
			b = r.KeywordBoost
		}
		for _, w := range splitWords(text) {
			keyParts = append(keyParts, w)
			direct = append(direct, source{w, b})
		}
	}
	// The caller's own words first, so the cap below only ever drops
	// expansions.
	for _, d := range direct {
		add(d.word, d.boost)
	}
	for _, d := range direct {
		for _, syn := range synonyms[d.word] {
			add(syn, d.boost*r.SynonymBoost)
		}
		for _, rel := range related[d.word] {
			add(rel, d.boost*r.RelatedBoost)
		}
	}
	if len(order) > maxTerms {
		order = order[:maxTerms]
	}
	for _, w := range order {
		terms = append(terms, w)
		boosts = append(boosts, weight[w])
	}
	// Trigram similarity is for identifier-like queries ("get_wether",
	// "githubCreateIssue"): a few words at most. On a sentence it finds
	// nothing words do not, and it is the costliest part of a search.
	if len(keyParts) > maxTrigramWords {
		return terms, boosts, ""
	}
	return terms, boosts, strings.Join(keyParts, "")
}

// searchSQL ranks one scope's documents. Every query word (stemmed, stop
// words dropped) is ORed: a document matching any word is a candidate, so
// a natural-language query always finds something. Each matched word adds
// boost × IDF (from the scope's own statistics) × its weighted, length-
// normalized ts_rank; prefix matches add a fraction more. Trigram
// similarity between the tool name and the query catches identifier-like
// and misspelled queries. The query text arrives only as parameters.
const searchSQL = `
WITH terms AS MATERIALIZED (
	SELECT lex, max(t.boost) AS boost
	FROM unnest($2::text[], $3::float8[]) AS t(term, boost)
	CROSS JOIN LATERAL unnest(tsvector_to_array(to_tsvector('switchboard_en', t.term))) AS lex
	GROUP BY lex
),
weighted AS MATERIALIZED (
	SELECT t.boost,
	       ln(1 + (sc.tool_count - coalesce(l.ndoc, 0) + 0.5) / (coalesce(l.ndoc, 0) + 0.5)) AS idf,
	       quote_literal(t.lex)::tsquery AS exact,
	       (quote_literal(t.lex) || CASE WHEN length(t.lex) >= 3 THEN ':*' ELSE '' END)::tsquery AS prefix
	FROM terms t
	JOIN scopes sc ON sc.id = $1
	LEFT JOIN scope_lexemes l ON l.scope_id = sc.id AND l.lexeme = t.lex
),
any_term AS MATERIALIZED (
	SELECT string_agg(quote_literal(lex) || CASE WHEN length(lex) >= 3 THEN ':*' ELSE '' END, ' | ')::tsquery AS q
	FROM terms
),
candidates AS MATERIALIZED (
	SELECT d.id, d.name, d.description, d.input_schema_json, d.tsv, d.trgm
	FROM (
		SELECT d.id, d.name, d.description, d.input_schema_json, d.tsv,
		       CASE WHEN $4 = '' THEN 0
		            ELSE greatest(word_similarity(d.name_key, $4), word_similarity($4, d.name_key)) END AS trgm
		FROM scope_tools st JOIN tool_documents d ON d.id = st.doc_id
		WHERE st.scope_id = $1
	) d, any_term a
	WHERE (a.q IS NOT NULL AND d.tsv @@ a.q) OR d.trgm >= $8
),
lexical AS (
	SELECT c.id,
	       sum(w.boost * w.idf * (ts_rank($6::float4[], c.tsv, w.exact, $10) + $9 * ts_rank($6::float4[], c.tsv, w.prefix, $10))) AS score
	FROM candidates c JOIN weighted w ON c.tsv @@ w.prefix
	GROUP BY c.id
)
SELECT c.name, c.description, c.input_schema_json,
       coalesce(l.score, 0) + CASE WHEN c.trgm >= $8 THEN $7 * c.trgm ELSE 0 END AS score
FROM candidates c
LEFT JOIN lexical l ON l.id = c.id
ORDER BY score DESC, c.name
LIMIT $5`

// Search ranks the tools of scope against q with the ranking r.
func (s *Store) Search(ctx context.Context, scope Scope, q Query, r Ranking) ([]Hit, error) {
	terms, boosts, key := r.queryTerms(q)
	if len(terms) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, searchSQL, scope.ID, terms, boosts, key, q.Limit,
		r.FieldWeights[:], r.TrigramWeight, r.TrigramThreshold, r.PrefixWeight, r.Normalization)
	if err != nil {
		return nil, classify(fmt.Errorf("search: %w", err))
	}
	defer rows.Close()
	var hits []Hit
	for rows.Next() {
		var h Hit
		if err := rows.Scan(&h.Name, &h.Description, &h.InputSchemaJSON, &h.Score); err != nil {
			return nil, classify(fmt.Errorf("search: %w", err))
		}
		hits = append(hits, h)
	}
	if err := rows.Err(); err != nil {
		return nil, classify(fmt.Errorf("search: %w", err))
	}
	if len(hits) == 0 {
		// No hits is normal; a vanished scope (collected by another
		// replica) is not, and the caller rebuilds it.
		var exists bool
		if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM scopes WHERE id = $1)`, scope.ID).Scan(&exists); err != nil {
			return nil, classify(fmt.Errorf("search: %w", err))
		}
		if !exists {
			return nil, ErrScopeNotFound
		}
	}
	return hits, nil
}

// SearchSQLForExplain exposes the search statement to plan tests and
// benchmarks.
func SearchSQLForExplain() string { return searchSQL }
