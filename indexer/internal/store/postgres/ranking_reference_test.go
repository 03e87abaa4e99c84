package postgres_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
	"github.com/switchboard-mcp/switchboard/indexer/internal/store/postgres"
	"github.com/switchboard-mcp/switchboard/indexer/internal/storetest"
)

// referenceSQL is the ranking Search evaluates in process, as one SQL
// statement: how the indexer ranked before, kept as the definition the
// in-process evaluation must agree with. Every query word (stemmed, stop
// words dropped) is ORed; each matched word adds boost × IDF (from the
// scope's own statistics) × its weighted, length-normalized ts_rank, and
// prefix matches add a fraction more, and so does a shorter lexeme that
// begins a query lexeme and a lexeme one edit from a lexeme of the
// caller's words that the scope holds no other way; trigram similarity
// between the tool name and the query catches identifier-like and
// misspelled queries.
const referenceSQL = `
WITH terms AS MATERIALIZED (
	SELECT lex, max(t.boost) AS boost, bool_or(t.i <= $11) AS own
	FROM unnest($2::text[], $3::float8[]) WITH ORDINALITY AS t(term, boost, i)
	CROSS JOIN LATERAL unnest(tsvector_to_array(to_tsvector('switchboard_en', t.term))) AS lex
	GROUP BY lex
),
shorter AS MATERIALIZED (
	SELECT DISTINCT ON (p.lex) p.lex, t.lex AS from_lex, t.boost
	FROM terms t
	CROSS JOIN LATERAL generate_series(4, length(t.lex) - 1) AS n
	CROSS JOIN LATERAL (SELECT left(t.lex, n) AS lex) p
	JOIN scope_lexemes l ON l.scope_id = $1 AND l.lexeme = p.lex
	WHERE p.lex NOT IN (SELECT lex FROM terms)
	ORDER BY p.lex, t.boost DESC, t.lex COLLATE "C"
),
fuzzy AS MATERIALIZED (
	-- A lexeme of the scope one edit from a lexeme of the caller's words
	-- that the scope holds no other way, weighing as the heaviest such.
	SELECT DISTINCT ON (l.lexeme) l.lexeme AS lex, t.boost
	FROM terms t
	JOIN scope_lexemes l ON l.scope_id = $1
	     AND length(l.lexeme) BETWEEN length(t.lex) - 1 AND length(t.lex) + 1
	     AND levenshtein(t.lex, l.lexeme) = 1
	WHERE t.own AND length(t.lex) BETWEEN 6 AND 32
	  AND NOT EXISTS (SELECT 1 FROM scope_lexemes h WHERE h.scope_id = $1 AND left(h.lexeme, length(t.lex)) = t.lex)
	  AND NOT EXISTS (SELECT 1 FROM shorter s WHERE left(t.lex, length(s.lex)) = s.lex)
	  AND l.lexeme NOT IN (SELECT lex FROM terms)
	  AND l.lexeme NOT IN (SELECT lex FROM shorter)
	ORDER BY l.lexeme, t.boost DESC, t.lex COLLATE "C"
),
weighted AS MATERIALIZED (
	SELECT t.boost,
	       ln(1 + (sc.tool_count - coalesce(l.ndoc, 0) + 0.5) / (coalesce(l.ndoc, 0) + 0.5)) AS idf,
	       quote_literal(t.lex)::tsquery AS exact,
	       (quote_literal(t.lex) || CASE WHEN length(t.lex) >= 3 THEN ':*' ELSE '' END)::tsquery AS prefix,
	       0 AS kind, $9::float4 AS weight, t.lex
	FROM terms t
	JOIN scopes sc ON sc.id = $1
	LEFT JOIN scope_lexemes l ON l.scope_id = sc.id AND l.lexeme = t.lex
	UNION ALL
	-- A shorter lexeme that begins a query lexeme: as a prefix rank, of
	-- the lexeme alone, with the IDF of the query lexeme it weighs as.
	SELECT s.boost,
	       ln(1 + (sc.tool_count - coalesce(l.ndoc, 0) + 0.5) / (coalesce(l.ndoc, 0) + 0.5)),
	       NULL, quote_literal(s.lex)::tsquery, 1, $9::float4, s.lex
	FROM shorter s
	JOIN scopes sc ON sc.id = $1
	LEFT JOIN scope_lexemes l ON l.scope_id = sc.id AND l.lexeme = s.from_lex
	UNION ALL
	-- A fuzzy lexeme: as a shorter one, with its own IDF and FuzzyWeight.
	SELECT f.boost,
	       ln(1 + (sc.tool_count - l.ndoc + 0.5) / (l.ndoc + 0.5)),
	       NULL, quote_literal(f.lex)::tsquery, 2, $12::float4, f.lex
	FROM fuzzy f
	JOIN scopes sc ON sc.id = $1
	JOIN scope_lexemes l ON l.scope_id = sc.id AND l.lexeme = f.lex
	WHERE $12 > 0
),
any_term AS MATERIALIZED (
	SELECT string_agg(q, ' | ')::tsquery AS q
	FROM (SELECT quote_literal(lex) || CASE WHEN length(lex) >= 3 THEN ':*' ELSE '' END AS q FROM terms
	      UNION ALL SELECT quote_literal(lex) FROM shorter
	      UNION ALL SELECT quote_literal(lex) FROM fuzzy WHERE $12 > 0) a
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
	       sum(w.boost * w.idf * (CASE WHEN w.kind > 0 THEN 0::float4 ELSE ts_rank($6::float4[], c.tsv, w.exact, $10) END
	                              + w.weight * ts_rank($6::float4[], c.tsv, w.prefix, $10))
	           -- One order for every document: documents with the same
	           -- addends get the same sum, and tie in name order.
	           ORDER BY w.kind, w.lex COLLATE "C") AS score
	FROM candidates c JOIN weighted w ON c.tsv @@ w.prefix
	GROUP BY c.id
)
SELECT c.name, c.description, c.input_schema_json,
       coalesce(l.score, 0) + CASE WHEN c.trgm >= $8 THEN $7 * c.trgm ELSE 0 END AS score
FROM candidates c
LEFT JOIN lexical l ON l.id = c.id
ORDER BY score DESC, c.name
LIMIT $5`

// referenceSearch ranks with referenceSQL.
func referenceSearch(t *testing.T, st *postgres.Store, sc store.Scope, q store.Query, r store.Ranking) []store.Hit {
	t.Helper()
	terms, boosts, own, key := r.CallerTerms(q)
	if len(terms) == 0 {
		return nil
	}
	rows, err := st.Pool().Query(t.Context(), referenceSQL, sc.ID, terms, boosts, key, q.Limit,
		r.FieldWeights[:], r.TrigramWeight, r.TrigramThreshold, r.PrefixWeight, r.Normalization, own, r.FuzzyWeight)
	if err != nil {
		t.Fatalf("reference search: %v", err)
	}
	defer rows.Close()
	var hits []store.Hit
	for rows.Next() {
		var h store.Hit
		if err := rows.Scan(&h.Name, &h.Description, &h.InputSchemaJSON, &h.Score); err != nil {
			t.Fatal(err)
		}
		hits = append(hits, h)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return hits
}

// echoTools are the load harness's synthetic catalog: every tool shares
// most words with every other.
func echoTools(n int) []store.Tool {
	tools := make([]store.Tool, n)
	for i := range tools {
		tools[i] = store.Tool{
			Name:            fmt.Sprintf("b%d__tool_%04d", i/200, i%200),
			Description:     fmt.Sprintf("Synthetic echo tool number %d.", i%200),
			InputSchemaJSON: `{"type":"object","properties":{"text":{"type":"string","description":"Text to echo back"}}}`,
		}
	}
	return tools
}

// unusualTools have names and descriptions outside plain English ASCII.
var unusualTools = []store.Tool{
	{Name: "météo_prévisions", Description: "Prévisions météo pour une ville, café compris.", InputSchemaJSON: `{"type":"object","properties":{"ville":{"type":"string"}}}`},
	{Name: "東京_天気", Description: "東京の天気予報を取得します。", InputSchemaJSON: `{"type":"object"}`},
	{Name: "getHTTPResponse_v2", Description: "Fetch an HTTP response (v2) from a URL like https://example.com/a/b.", InputSchemaJSON: `{"type":"object","properties":{"url":{"type":"string","description":"e.g. user@example.com or 1.2.3"}}}`},
	{Name: "it's_a_quote", Description: `It's "quoted" text with a back\slash and an apostrophe's worth.`, InputSchemaJSON: `{"type":"object"}`},
	{Name: "x", Description: "", InputSchemaJSON: `{"type":"object"}`},
	{Name: "___", Description: "Only separators in the name; go to s3 and do it.", InputSchemaJSON: `{"type":"object","properties":{"go":{"description":"a"}}}`},
	{Name: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", Description: "Repeated letters aaaa aaaa aaaa.", InputSchemaJSON: `{"type":"object"}`},
}

// The in-process ranking agrees with the reference SQL: the same hits in
// the same order with the same scores, for many queries, scopes and
// rankings. Scores may differ in the last bits (PostgreSQL computes the
// IDF in numeric, and sums in an order of its choosing), so documents
// whose scores are equal to within that may come in either order.
func TestRankingMatchesReferenceSQL(t *testing.T) {
	st := env.OpenStore(t)
	ctx := t.Context()
	withLevenshtein(t, st)
	scopes := map[string][]store.Tool{
		"weather":   append(slices.Clone(storetest.WeatherTools), unusualTools...),
		"synthetic": storetest.SyntheticTools(1500, 7),
		"echo":      echoTools(1000),
	}
	built := map[string]store.Scope{}
	for name, tools := range scopes {
		sc, _, err := st.BuildScope(ctx, name, 1, tools)
		if err != nil {
			t.Fatal(err)
		}
		built[name] = sc
	}
	r := rand.New(rand.NewPCG(8, 8))
	queries := []store.Query{
		{Text: "synthetic echo tool"}, {Text: "echo tool number 42"}, {Text: "tool number 7"}, {Text: "echo the text back"},
		{Text: "synthetic number 199"}, {Text: "b3__tool_0042"}, {Text: "tool0042"}, {Text: "tool"}, {Text: "to"},
		{Text: "wether_get_forcast"}, {Text: "githubcreateissue"}, {Text: "post an issue", Keywords: []string{"slack"}},
		{Text: "could you please tell me whether it will rain in Paris tomorrow, weather-wise"},
		{Text: "show my events"}, {Text: "the of and"}, {Text: "météo café"}, {Text: "東京の天気"}, {Text: "http response v2"},
		{Text: "s3 go"}, {Text: "it's quoted"}, {Text: "aaaa"}, {Text: "x"}, {Text: "1.2.3 user@example.com"},
		{Text: "get weather", Keywords: []string{"forecast", "city"}}, {Text: "list", Keywords: []string{"calendar"}},
		{Text: "open an issue in my repositories"}, {Text: "weatherly forecasting"}, {Text: "calendars"},
		{Text: "wether forcast for tomorow"}, {Text: "synthetik echoes", Keywords: []string{"nummber"}},
		{Text: "méteo prévisionz"}, {Text: "tomorow"},
		{Text: strings.Repeat("issue ", 50)},
	}
	for range 150 {
		queries = append(queries, store.Query{Text: storetest.SyntheticQuery(r)})
	}
	rankings := map[string]store.Ranking{"default": store.DefaultRanking}
	for name, change := range map[string]func(*store.Ranking){
		"no normalization": func(r *store.Ranking) { r.Normalization = 0 },
		"by length":        func(r *store.Ranking) { r.Normalization = 2 },
		"unique words":     func(r *store.Ranking) { r.Normalization = 8 | 16 | 32 },
		"default weights":  func(r *store.Ranking) { r.FieldWeights = [4]float32{-1, -1, 0.3, -1} },
		"no prefix":        func(r *store.Ranking) { r.PrefixWeight = 0 },
		"low threshold":    func(r *store.Ranking) { r.TrigramThreshold = 0.2 },
		"no threshold":     func(r *store.Ranking) { r.TrigramThreshold = 0 },
		"heavy expansions": func(r *store.Ranking) { r.SynonymBoost, r.RelatedBoost = 0.9, 0.8 },
		"no fuzzy":         func(r *store.Ranking) { r.FuzzyWeight = 0 },
	} {
		rk := store.DefaultRanking
		change(&rk)
		rankings[name] = rk
	}
	// The reference is the ranking by words: the meaning part, which SQL
	// cannot compute, is off here, and TestMeaningIsTheCosine checks it.
	for name, rk := range rankings {
		rk.MeaningWeight = 0
		rankings[name] = rk
	}
	compared := 0
	for rname, rk := range rankings {
		for sname, sc := range built {
			for i, q := range queries {
				// Most rankings on a sample of the queries: the
				// default on all of them.
				if rname != "default" && i%5 != 0 {
					continue
				}
				q.Limit = []int{1, 8, 50}[i%3]
				got, err := st.Search(ctx, sc, q, rk)
				if err != nil {
					t.Fatalf("%s/%s %q: %v", rname, sname, q.Text, err)
				}
				// The reference with a longer list shows the whole group
				// of equal scores at the limit.
				long := q
				long.Limit += 50
				want := referenceSearch(t, st, sc, long, rk)
				if msg := agree(got, want, q.Limit); msg != "" {
					t.Errorf("ranking %s, scope %s, query %q %v (limit %d): %s", rname, sname, q.Text, q.Keywords, q.Limit, msg)
				}
				compared++
			}
		}
	}
	t.Logf("%d searches compared", compared)
}

// agree reports how got (a search with limit) differs from want (the
// reference with a longer limit), or "".
func agree(got, want []store.Hit, limit int) string {
	if n := min(len(want), limit); len(got) != n {
		return fmt.Sprintf("%d hits, reference %d:\n got %v\nwant %v", len(got), n, scored(got), scored(want[:n]))
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }
	for i := range got {
		if !near(got[i].Score, want[i].Score) {
			return fmt.Sprintf("hit %d scores %v, reference %v:\n got %v\nwant %v", i, got[i].Score, want[i].Score, scored(got), scored(want[:len(got)]))
		}
	}
	// Equal scores: the same names, in any order; at the limit, names the
	// reference has in that group.
	for i := 0; i < len(got); {
		j := i
		for j < len(got) && near(got[j].Score, got[i].Score) {
			j++
		}
		k := j
		for k < len(want) && near(want[k].Score, got[i].Score) {
			k++
		}
		group := storetest.HitNames(want[i:k])
		for _, h := range got[i:j] {
			if !slices.Contains(group, h.Name) {
				return fmt.Sprintf("hit %s (score %v) is not among the reference's %v", h.Name, h.Score, group)
			}
		}
		if j < len(got) && k != j {
			return fmt.Sprintf("hits %v tie with the reference's %v", storetest.HitNames(got[i:j]), group)
		}
		for _, h := range got[i:j] {
			for _, w := range want[i:k] {
				if w.Name == h.Name && (w.Description != h.Description || w.InputSchemaJSON != h.InputSchemaJSON) {
					return fmt.Sprintf("hit %s differs from the reference's definition", h.Name)
				}
			}
		}
		i = j
	}
	return ""
}

func scored(hits []store.Hit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, fmt.Sprintf("%s=%.6g", h.Name, h.Score))
	}
	return out
}

// withLevenshtein gives the test database fuzzystrmatch's levenshtein, the
// reference's definition of one edit (the indexer itself needs nothing).
func withLevenshtein(t *testing.T, st *postgres.Store) {
	t.Helper()
	if _, err := st.Pool().Exec(t.Context(), `CREATE EXTENSION IF NOT EXISTS fuzzystrmatch`); err != nil {
		t.Fatalf("fuzzystrmatch (PostgreSQL's contrib modules): %v", err)
	}
}
