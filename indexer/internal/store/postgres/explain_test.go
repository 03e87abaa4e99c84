package postgres_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
	"github.com/switchboard-mcp/switchboard/indexer/internal/store/postgres"
	"github.com/switchboard-mcp/switchboard/indexer/internal/storetest"
)

// storedDocument is a hit's document as PostgreSQL holds it.
type storedDocument struct {
	id      int64
	lexemes map[string][]uint8
	nameKey string
}

func stored(t *testing.T, st *postgres.Store, h store.Hit) storedDocument {
	t.Helper()
	hash := store.Tool{Name: h.Name, Description: h.Description, InputSchemaJSON: h.InputSchemaJSON}.Document().ContentHash
	var d storedDocument
	var tsv string
	if err := st.Pool().QueryRow(t.Context(), `SELECT id, tsv::text, name_key FROM tool_documents WHERE content_hash = $1`, hash).
		Scan(&d.id, &tsv, &d.nameKey); err != nil {
		t.Fatalf("document of %s: %v", h.Name, err)
	}
	var err error
	if d.lexemes, _, err = postgres.ParseTSVector(tsv); err != nil {
		t.Fatal(err)
	}
	return d
}

// Explanations are the ranking, checked against PostgreSQL itself: over
// the scopes and rankings the ranking's reference test uses, every hit's
// parts sum to its score exactly; every lexical part names lexemes the
// hit's stored tsvector holds (the query lexeme itself for an exact part,
// only longer ones it begins for a prefix part, and as many as it says);
// its ranks are ts_rank's of the lexeme and of the lexeme as a prefix, its
// IDF the scope's; a trigram part names the document's stored name key and
// has pg_trgm's similarity; and each query word's lexemes are what
// PostgreSQL stems it to.
func TestExplanationsAgreeWithPostgreSQL(t *testing.T) {
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
	queries := append(storetest.ExplainQueries(100, 9),
		store.Query{Text: "synthetic echo tool"}, store.Query{Text: "b3__tool_0042"}, store.Query{Text: "tool0042"},
		store.Query{Text: "http response v2"}, store.Query{Text: "s3 go"}, store.Query{Text: "it's quoted"},
		store.Query{Text: "aaaa"}, store.Query{Text: "1.2.3 user@example.com"},
		store.Query{Text: "wether forcast for tomorow"}, store.Query{Text: "synthetik echoes"})
	stems := map[string][]string{}
	parts, sqlChecked := 0, 0
	kinds := map[store.PartKind]int{}
	for rname, r := range storetest.ExplainRankings() {
		for sname, sc := range built {
			var toolCount float64
			if err := st.Pool().QueryRow(ctx, `SELECT tool_count FROM scopes WHERE id = $1`, sc.ID).Scan(&toolCount); err != nil {
				t.Fatal(err)
			}
			for i, q := range queries {
				q.Limit = []int{8, 50, 3}[i%3]
				where := rname + "/" + sname + " " + q.Text
				hits, err := st.Search(ctx, sc, q, r)
				if err != nil {
					t.Fatal(err)
				}
				ex, err := st.SearchExplained(ctx, sc, q, r)
				if err != nil {
					t.Fatalf("%s: %v", where, err)
				}
				if msg := storetest.CheckExplained(hits, ex, q, r); msg != "" {
					t.Errorf("%s: %s", where, msg)
					continue
				}
				for _, term := range ex.Terms {
					want, ok := stems[term.Word]
					if !ok {
						if err := st.Pool().QueryRow(ctx, `SELECT tsvector_to_array(to_tsvector('switchboard_en', $1))`, term.Word).Scan(&want); err != nil {
							t.Fatal(err)
						}
						stems[term.Word] = want
					}
					if !slices.Equal(term.Lexemes, want) {
						t.Errorf("%s: term %s reduced to %v, PostgreSQL stems it to %v", where, term.Word, term.Lexemes, want)
					}
				}
				// PostgreSQL's own figures, for the default ranking (the
				// others share the code) on every hit of a query.
				withSQL := rname == "default" || i%10 == 0
				for _, h := range ex.Hits {
					d := stored(t, st, h.Hit)
					for _, p := range h.Parts {
						parts++
						kinds[p.Kind]++
						if msg := checkAgainstDocument(p, d, ex.TrigramKey); msg != "" {
							t.Errorf("%s: %s, part %+v: %s", where, h.Name, p, msg)
						}
						if withSQL {
							sqlChecked++
							if msg := checkAgainstSQL(t, st, sc, toolCount, p, d, ex.TrigramKey, r); msg != "" {
								t.Errorf("%s: %s, part %+v: %s", where, h.Name, p, msg)
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d parts checked, %d against PostgreSQL's figures; by kind %v", parts, sqlChecked, kinds)
	for _, k := range []store.PartKind{store.PartExact, store.PartPrefix, store.PartShorter, store.PartFuzzy, store.PartTrigram, store.PartMeaning} {
		if kinds[k] == 0 {
			t.Errorf("no part of kind %d among %d: the queries should show every kind", k, parts)
		}
	}
	if sqlChecked < 5000 {
		t.Fatalf("only %d parts checked against PostgreSQL", sqlChecked)
	}
}

// checkAgainstDocument checks that a part names what the stored document
// holds.
func checkAgainstDocument(p store.ScorePart, d storedDocument, key string) string {
	if p.Kind == store.PartMeaning {
		// TestMeaningIsTheCosine works its similarity out independently.
		return ""
	}
	if p.Kind == store.PartTrigram {
		if p.NameKey != d.nameKey || key == "" {
			return "name key is not the document's " + d.nameKey
		}
		return ""
	}
	if p.Kind == store.PartShorter || p.Kind == store.PartFuzzy {
		if _, held := d.lexemes[p.Lexeme]; !held {
			return "the document does not hold the shorter or fuzzy lexeme"
		}
		return ""
	}
	_, held := d.lexemes[p.Lexeme]
	if held != (p.Kind == store.PartExact) {
		return "kind disagrees with whether the document holds the lexeme"
	}
	var begun []string
	for lex := range d.lexemes {
		if lex == p.Lexeme || utf8.RuneCountInString(p.Lexeme) >= 3 && strings.HasPrefix(lex, p.Lexeme) {
			begun = append(begun, lex)
		}
	}
	slices.Sort(begun)
	if p.MatchedCount != len(begun) || !slices.Equal(p.Matched, begun[:min(len(begun), store.MaxMatchedLexemes)]) {
		return "matched lexemes are not the document's " + strings.Join(begun, " ")
	}
	return ""
}

// checkAgainstSQL checks a part's figures against ts_rank, the scope's
// lexeme statistics and pg_trgm.
func checkAgainstSQL(t *testing.T, st *postgres.Store, sc store.Scope, toolCount float64, p store.ScorePart, d storedDocument, key string, r store.Ranking) string {
	t.Helper()
	ctx := t.Context()
	if p.Kind == store.PartMeaning {
		return ""
	}
	if p.Kind == store.PartTrigram {
		var sim float32
		if err := st.Pool().QueryRow(ctx, `SELECT greatest(word_similarity(name_key, $2), word_similarity($2, name_key)) FROM tool_documents WHERE id = $1`,
			d.id, key).Scan(&sim); err != nil {
			t.Fatal(err)
		}
		if sim != p.Similarity {
			return "pg_trgm's similarity is " + fmt.Sprint(float64(sim))
		}
		return ""
	}
	if p.Kind == store.PartFuzzy {
		var rank float32
		var idf float64
		var distance, holders int
		err := st.Pool().QueryRow(ctx, `
			SELECT ts_rank($2::float4[], d.tsv, quote_literal($3)::tsquery, $4),
			       ln(1 + ($6 - l.ndoc + 0.5) / (l.ndoc + 0.5))::float8,
			       levenshtein($3, $7),
			       (SELECT count(*) FROM scope_lexemes h WHERE h.scope_id = $5 AND left(h.lexeme, length($7)) = $7)
			FROM tool_documents d
			JOIN scope_lexemes l ON l.scope_id = $5 AND l.lexeme = $3
			WHERE d.id = $1`,
			d.id, r.FieldWeights[:], p.Lexeme, r.Normalization, sc.ID, toolCount, p.Near).Scan(&rank, &idf, &distance, &holders)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case rank != p.PrefixRank:
			return "ts_rank of the fuzzy lexeme is " + fmt.Sprint(float64(rank))
		case math.Abs(idf-p.IDF) > 1e-12*idf:
			return "the scope's IDF of the fuzzy lexeme is " + fmt.Sprint(idf)
		case distance != 1:
			return "levenshtein of the two lexemes is " + fmt.Sprint(distance)
		case holders != 0:
			return "the scope holds the query lexeme, or a longer one it begins"
		}
		return ""
	}
	if p.Kind == store.PartShorter {
		var rank float32
		var idf float64
		err := st.Pool().QueryRow(ctx, `
			SELECT ts_rank($2::float4[], d.tsv, quote_literal($3)::tsquery, $4),
			       ln(1 + ($6 - coalesce(l.ndoc, 0) + 0.5) / (coalesce(l.ndoc, 0) + 0.5))::float8
			FROM tool_documents d
			LEFT JOIN scope_lexemes l ON l.scope_id = $5 AND l.lexeme = $7
			WHERE d.id = $1`,
			d.id, r.FieldWeights[:], p.Lexeme, r.Normalization, sc.ID, toolCount, p.Begins).Scan(&rank, &idf)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case rank != p.PrefixRank:
			return "ts_rank of the shorter lexeme is " + fmt.Sprint(float64(rank))
		case math.Abs(idf-p.IDF) > 1e-12*idf:
			return "the scope's IDF of the lexeme it begins is " + fmt.Sprint(idf)
		}
		return ""
	}
	var exact, prefix float32
	var idf float64
	err := st.Pool().QueryRow(ctx, `
		SELECT ts_rank($2::float4[], d.tsv, quote_literal($3)::tsquery, $4),
		       ts_rank($2::float4[], d.tsv, (quote_literal($3) || CASE WHEN length($3) >= 3 THEN ':*' ELSE '' END)::tsquery, $4),
		       ln(1 + ($6 - coalesce(l.ndoc, 0) + 0.5) / (coalesce(l.ndoc, 0) + 0.5))::float8
		FROM tool_documents d
		LEFT JOIN scope_lexemes l ON l.scope_id = $5 AND l.lexeme = $3
		WHERE d.id = $1`,
		d.id, r.FieldWeights[:], p.Lexeme, r.Normalization, sc.ID, toolCount).Scan(&exact, &prefix, &idf)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case exact != p.ExactRank:
		return "ts_rank of the lexeme is " + fmt.Sprint(float64(exact))
	case prefix != p.PrefixRank:
		return "ts_rank of the lexeme as a prefix is " + fmt.Sprint(float64(prefix))
	// PostgreSQL computes the IDF in numeric.
	case math.Abs(idf-p.IDF) > 1e-12*idf:
		return "the scope's IDF is " + fmt.Sprint(idf)
	}
	return ""
}
