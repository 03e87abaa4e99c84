package postgres

import (
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// BenchmarkFuzzyLexemes measures looking for a scope's lexemes one edit
// from four words of the caller's that it does not hold, in a lexicon of
// 30,000 lexemes of 3 to 14 letters (a catalog of some 10,000 tools of
// varied vocabulary holds about that many).
func BenchmarkFuzzyLexemes(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	word := func(n int) string {
		w := make([]byte, n)
		for i := range w {
			w[i] = byte('a' + r.IntN(26))
		}
		return string(w)
	}
	seen := map[string]bool{}
	var lexicon []string
	for len(lexicon) < 30000 {
		if w := word(3 + r.IntN(12)); !seen[w] {
			seen[w] = true
			lexicon = append(lexicon, w)
		}
	}
	sort.Strings(lexicon)
	ix := &scopeIndex{lexicon: lexicon, byRunes: lexemesByRunes(lexicon)}
	query := []string{"astrologi", "forcast", "tomorow", "recommand"}
	boost := map[string]float64{}
	for _, q := range query {
		boost[q] = 1
	}
	for b.Loop() {
		ix.fuzzyLexemes(query, boost, nil, store.DefaultRanking)
	}
}
