package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// ExplainQueries are queries of every kind the ranking meets: natural
// requests, identifiers and misspellings, keywords, synonyms and topics,
// plurals, stop words, prefixes, non-English text, and synthetic
// requests over SyntheticTools' vocabulary.
func ExplainQueries(n int, seed uint64) []store.Query {
	queries := []store.Query{
		{Text: "could you please tell me whether it will rain in Paris tomorrow, weather-wise"},
		{Text: "create an issue"}, {Text: "post message"}, {Text: "which channel"},
		{Text: "wether_get_forcast"}, {Text: "githubcreateissue"}, {Text: "github_createIssue"},
		{Text: "post an issue", Keywords: []string{"slack"}}, {Text: "show my events"},
		{Text: "get weather", Keywords: []string{"forecast", "city"}}, {Text: "list", Keywords: []string{"calendar"}},
		{Text: "help me find the temperature for my trip"}, {Text: "upcoming meetings and appointments"},
		{Text: "repositories issues channels events"}, {Text: "weath"}, {Text: "rep"}, {Text: "to"},
		{Text: "the of and"}, {Text: "zzzz qqqq"}, {Text: "météo café"}, {Text: "東京の天気"},
		{Text: strings.Repeat("issue ", 50)}, {Keywords: []string{"weather", "forecast"}},
		{Text: "wether forcast for tomorow"}, {Text: "calender apointments", Keywords: []string{"upcomming"}},
	}
	r := rand.New(rand.NewPCG(seed, seed))
	for range n {
		queries = append(queries, store.Query{Text: SyntheticQuery(r)})
	}
	return queries
}

// ExplainRankings are the default ranking and variations of it that
// change what each part weighs and when trigram similarity and meaning
// count.
func ExplainRankings() map[string]store.Ranking {
	out := map[string]store.Ranking{"default": store.DefaultRanking}
	for name, change := range map[string]func(*store.Ranking){
		"by length":        func(r *store.Ranking) { r.Normalization = 2 | 32 },
		"no prefix":        func(r *store.Ranking) { r.PrefixWeight = 0 },
		"low threshold":    func(r *store.Ranking) { r.TrigramThreshold = 0.2 },
		"no threshold":     func(r *store.Ranking) { r.TrigramThreshold = 0 },
		"heavy expansions": func(r *store.Ranking) { r.SynonymBoost, r.RelatedBoost, r.KeywordBoost = 0.9, 0.8, 3 },
		"words alone":      func(r *store.Ranking) { r.MeaningWeight = 0 },
		"heavy meaning":    func(r *store.Ranking) { r.MeaningWeight = 3 },
		"no meaning floor": func(r *store.Ranking) { r.MeaningFloor = -1 },
		"no fuzzy":         func(r *store.Ranking) { r.FuzzyWeight = 0 },
		"heavy fuzzy":      func(r *store.Ranking) { r.FuzzyWeight = 2 },
	} {
		rk := store.DefaultRanking
		change(&rk)
		out[name] = rk
	}
	return out
}

// An explained search returns what Search returns, and each hit's parts
// add up to its score exactly: summed in order from zero, in float64, the
// contributions are the score, bit for bit. Each part is what it says it
// is: a lexical part's contribution follows from its boost, IDF, ranks
// and prefix weight by the documented formula, and its lexeme comes from
// the query words it names; a trigram part comes last.
func explainedSearch(t *testing.T, b Backing) {
	st := b.Open(t)
	scopes := map[string]store.Scope{
		"weather":   build(t, st, "weather", WeatherTools),
		"synthetic": build(t, st, "synthetic", SyntheticTools(400, 11)),
	}
	explained, parts := 0, 0
	for rname, r := range ExplainRankings() {
		for sname, sc := range scopes {
			for i, q := range ExplainQueries(60, 4) {
				q.Limit = []int{1, 8, 50}[i%3]
				hits, err := st.Search(t.Context(), sc, q, r)
				if err != nil {
					t.Fatal(err)
				}
				ex, err := st.SearchExplained(t.Context(), sc, q, r)
				if err != nil {
					t.Fatalf("%s/%s %+v: %v", rname, sname, q, err)
				}
				where := func() string { return rname + "/" + sname + " " + q.Text + " " + strings.Join(q.Keywords, ",") }
				if msg := CheckExplained(hits, ex, q, r); msg != "" {
					t.Errorf("%s: %s", where(), msg)
				}
				explained += len(ex.Hits)
				for _, h := range ex.Hits {
					parts += len(h.Parts)
				}
			}
		}
	}
	if explained < 1000 || parts < explained {
		t.Fatalf("%d hits with %d parts explained: the queries should find more", explained, parts)
	}
	if _, err := st.SearchExplained(t.Context(), store.Scope{ID: 999_999}, store.Query{Text: "weather", Limit: 8}, store.DefaultRanking); !errors.Is(err, store.ErrScopeNotFound) {
		t.Fatalf("explained search of an unknown scope: %v", err)
	}
}

// CheckExplained reports how ex, the explained search q with ranking r,
// differs from hits (Search's answer to it) or breaks the rules of an
// explanation, or "".
func CheckExplained(hits []store.Hit, ex store.Explained, q store.Query, r store.Ranking) string {
	if len(ex.Hits) != len(hits) {
		return fmt.Sprintf("explained %d hits, searched %d", len(ex.Hits), len(hits))
	}
	words, weights, key := r.Terms(q)
	if ex.TrigramKey != key || len(ex.Terms) != len(words) {
		return "terms or trigram key differ from Terms"
	}
	weight := map[string]float64{}
	for i, term := range ex.Terms {
		if term.Word != words[i] || term.Weight != weights[i] {
			return fmt.Sprintf("term %d is %s %v, Terms has %s %v", i, term.Word, term.Weight, words[i], weights[i])
		}
		weight[term.Word] = term.Weight
	}
	for i, h := range ex.Hits {
		if h.Hit != hits[i] {
			return fmt.Sprintf("hit %d %+v is not Search's %+v", i, h.Hit, hits[i])
		}
		if msg := checkPartOrder(h.Parts, r); msg != "" {
			return fmt.Sprintf("%s: %s (%+v)", h.Name, msg, h.Parts)
		}
		var sum float64
		for j, p := range h.Parts {
			sum += p.Contribution
			if msg := checkPart(p, ex, weight, r); msg != "" {
				return fmt.Sprintf("%s: part %d %+v: %s", h.Name, j, p, msg)
			}
		}
		if sum != h.Score {
			return fmt.Sprintf("%s: parts sum to %v, score %v (%+v)", h.Name, sum, h.Score, h.Parts)
		}
	}
	return ""
}

// checkPartOrder says how parts are out of the ranking's order, or "":
// the lexical parts, then the shorter-lexeme parts, then the fuzzy
// parts in byte order of their lexemes, then at most one trigram part, then at most one meaning part; a hit by meaning alone
// reached the floor.
func checkPartOrder(parts []store.ScorePart, r store.Ranking) string {
	stage := func(k store.PartKind) int {
		switch k {
		case store.PartShorter:
			return 1
		case store.PartFuzzy:
			return 2
		case store.PartTrigram:
			return 3
		case store.PartMeaning:
			return 4
		}
		return 0
	}
	for j := 1; j < len(parts); j++ {
		a, b := stage(parts[j-1].Kind), stage(parts[j].Kind)
		if b < a || (b == a && b > 2) || (b == a && b == 2 && parts[j-1].Lexeme >= parts[j].Lexeme) {
			return fmt.Sprintf("part %d out of order", j)
		}
	}
	if len(parts) == 1 && parts[0].Kind == store.PartMeaning && r.TrigramThreshold > 0 && parts[0].Similarity < float32(r.MeaningFloor) {
		return "a hit by meaning alone below the floor"
	}
	return ""
}

func checkPart(p store.ScorePart, ex store.Explained, weight map[string]float64, r store.Ranking) string {
	switch p.Kind {
	case store.PartMeaning:
		switch {
		case len(ex.MeaningWords) == 0:
			return "a meaning part of a query without meaning words"
		case r.MeaningWeight == 0 || p.MeaningWeight != r.MeaningWeight:
			return "a meaning part of another weight"
		case p.Similarity < -1.0001 || p.Similarity > 1.0001:
			return "similarity is not a cosine"
		case p.Contribution != float64(p.MeaningWeight*float64(p.Similarity)):
			return "contribution is not MeaningWeight × Similarity"
		}
	case store.PartTrigram:
		switch {
		case ex.TrigramKey == "":
			return "a trigram part of a query without a trigram key"
		case p.Similarity < float32(r.TrigramThreshold) || p.TrigramWeight != float32(r.TrigramWeight):
			return "similarity below the threshold, or another weight"
		case p.Contribution != float64(float32(p.TrigramWeight*p.Similarity)):
			return "contribution is not TrigramWeight × Similarity"
		}
	case store.PartShorter:
		if utf8.RuneCountInString(p.Lexeme) < 4 || !strings.HasPrefix(p.Begins, p.Lexeme) || p.Begins == p.Lexeme ||
			len(p.Matched) != 1 || p.Matched[0] != p.Lexeme || p.MatchedCount != 1 || len(p.Words) == 0 {
			return "a shorter part that is not a lexeme of four characters or more beginning a longer one"
		}
		heaviest, msg := heaviestOf(p.Words, p.Begins, ex, weight)
		if msg != "" {
			return msg + " it begins"
		}
		if slices.ContainsFunc(ex.Terms, func(t store.QueryTerm) bool { return slices.Contains(t.Lexemes, p.Lexeme) }) {
			return "the shorter lexeme is a query lexeme itself"
		}
		if p.Boost != heaviest || p.ExactRank != 0 || p.PrefixWeight != float32(r.PrefixWeight) || p.IDF <= 0 {
			return "boost, ranks, prefix weight or IDF out of place"
		}
		if p.Contribution != float64(p.Boost*p.IDF*float64(float32(p.PrefixWeight*p.PrefixRank))) {
			return "contribution is not Boost × IDF × PrefixWeight × PrefixRank"
		}
	case store.PartFuzzy:
		n := utf8.RuneCountInString(p.Near)
		if n < store.MinFuzzyRunes || n > store.MaxFuzzyRunes || EditDistance(p.Near, p.Lexeme) != 1 ||
			len(p.Matched) != 1 || p.Matched[0] != p.Lexeme || p.MatchedCount != 1 || len(p.Words) == 0 {
			return "a fuzzy part that is not a lexeme one edit from a query lexeme of six to 32 characters"
		}
		heaviest, msg := heaviestOf(p.Words, p.Near, ex, weight)
		if msg != "" {
			return msg + " it is near"
		}
		if !slices.ContainsFunc(p.Words, func(w string) bool {
			i := slices.IndexFunc(ex.Terms, func(t store.QueryTerm) bool { return t.Word == w })
			return ex.Terms[i].Caller()
		}) {
			return "the lexeme it is near is no word of the caller's"
		}
		if slices.ContainsFunc(ex.Terms, func(t store.QueryTerm) bool { return slices.Contains(t.Lexemes, p.Lexeme) }) {
			return "the fuzzy lexeme is a query lexeme itself"
		}
		if p.Boost != heaviest || p.ExactRank != 0 || p.FuzzyWeight != float32(r.FuzzyWeight) || p.IDF <= 0 {
			return "boost, ranks, fuzzy weight or IDF out of place"
		}
		if p.Contribution != float64(p.Boost*p.IDF*float64(float32(p.FuzzyWeight*p.PrefixRank))) {
			return "contribution is not Boost × IDF × FuzzyWeight × PrefixRank"
		}
	case store.PartExact, store.PartPrefix:
		if p.Lexeme == "" || len(p.Words) == 0 || len(p.Matched) == 0 || len(p.Matched) > store.MaxMatchedLexemes || p.MatchedCount < len(p.Matched) {
			return "a lexical part without its lexeme, words or matches"
		}
		heaviest, msg := heaviestOf(p.Words, p.Lexeme, ex, weight)
		if msg != "" {
			return msg
		}
		if p.Boost != heaviest {
			return "boost is not the heaviest weight of its words"
		}
		if (p.Kind == store.PartExact) != (p.Matched[0] == p.Lexeme) {
			return "kind exact is not the document holding the lexeme itself"
		}
		for _, m := range p.Matched {
			if !strings.HasPrefix(m, p.Lexeme) {
				return "matched " + m + " does not begin with the lexeme"
			}
		}
		if p.PrefixWeight != float32(r.PrefixWeight) || p.IDF <= 0 || p.PrefixRank < p.ExactRank {
			return "prefix weight, IDF or ranks out of place"
		}
		if p.Contribution != float64(p.Boost*p.IDF*float64(p.ExactRank+float32(p.PrefixWeight*p.PrefixRank))) {
			return "contribution is not Boost × IDF × (ExactRank + PrefixWeight × PrefixRank)"
		}
	default:
		return "unknown kind"
	}
	return ""
}

// heaviestOf is the heaviest weight of words, each of which must be a
// term of ex reduced to lexeme; or what is wrong.
func heaviestOf(words []string, lexeme string, ex store.Explained, weight map[string]float64) (float64, string) {
	heaviest := 0.0
	for _, w := range words {
		term := slices.IndexFunc(ex.Terms, func(t store.QueryTerm) bool { return t.Word == w })
		if term < 0 || !slices.Contains(ex.Terms[term].Lexemes, lexeme) {
			return 0, "word " + w + " is not a term reduced to the lexeme"
		}
		heaviest = max(heaviest, weight[w])
	}
	return heaviest, ""
}

// EditDistance is the Levenshtein distance of a and b, in characters, by
// the textbook recurrence.
func EditDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur := make([]int, len(rb)+1)
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			change := 1
			if ra[i-1] == rb[j-1] {
				change = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+change)
		}
		prev = cur
	}
	return prev[len(rb)]
}
