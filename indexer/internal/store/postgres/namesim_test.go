package postgres

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// nameSimilarity skips the walk of the query when it cannot matter; its
// answer is the greater word_similarity either way round all the same,
// for names and queries of every kind, hostile ones included.
func TestNameSimilaritySkipsOnlyWhatCannotMatter(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"github", "issue", "create", "weather", "get", "list", "hub", "git", "forecast", "city", "repo", "pull", "request"}
	phrase := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(words[rng.IntN(len(words))])
			b.WriteString([]string{"_", " ", "", "-"}[rng.IntN(4)])
		}
		return b.String()
	}
	queries := []string{strings.Repeat("github", 43)[:256], "create a github issue", "gi", "weather in oslo", strings.Repeat("hubgit", 40)}
	for range 200 {
		queries = append(queries, phrase(1+rng.IntN(6)))
	}
	var scratch simScratch
	for i := range 300 {
		name := phrase(1 + rng.IntN(4))
		if i%3 == 0 {
			name = "github_" + name
		}
		d := &document{nameTrigrams: newTrigramText(name)}
		for _, query := range queries {
			q := newTrigramText(query)
			want := max(wordSimilarity(d.nameTrigrams, q, &scratch), wordSimilarity(q, d.nameTrigrams, &scratch))
			if got := nameSimilarity(d, q, &scratch); got != want {
				t.Fatalf("name %q, query %q: %v, want %v", name, query, got, want)
			}
		}
	}
}

// A query of one long word repeating the prefix every tool of a backend
// shares: word_similarity(name, query) walks the query for each trigram
// the name has, quadratic in the query's length.
func BenchmarkNameSimilarityLongQuery(b *testing.B) {
	q := newTrigramText(strings.Repeat("github", 43)[:256])
	docs := make([]*document, 1000)
	for i := range docs {
		docs[i] = &document{nameTrigrams: newTrigramText(fmt.Sprintf("github_create_issue_%d", i))}
	}
	var scratch simScratch
	b.ResetTimer()
	for b.Loop() {
		for _, d := range docs {
			nameSimilarity(d, q, &scratch)
		}
	}
}
