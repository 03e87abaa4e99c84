package store

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// WeightedTerms is Terms with origins: the same words, weights and key,
// for queries of every kind.
func TestWeightedTermsAreTerms(t *testing.T) {
	queries := []Query{
		{Text: "please help me find the weather in Paris", Keywords: []string{"city"}},
		{Text: "wether_get_forcast"}, {Text: "githubCreateIssue"}, {Text: ""}, {Text: "the of and"},
		{Text: "show my stocks and bitcoin", Keywords: []string{"finance", "stocks"}},
		{Text: strings.Repeat("weather stock house music travel job ", 30)},
		{Keywords: []string{"find", "help"}},
	}
	for _, verb := range []string{"get", "list", "find", "create", "send"} {
		for _, noun := range []string{"files", "properties", "boxes", "songs", "weather"} {
			queries = append(queries, Query{Text: fmt.Sprintf("can you %s the %s for me", verb, noun)})
		}
	}
	rankings := []Ranking{DefaultRanking, {KeywordBoost: 3, SynonymBoost: 0.9, RelatedBoost: 0.95, FramingWeight: 1.5},
		{KeywordBoost: 2, SynonymBoost: 0.4, RelatedBoost: 0.3, FramingWeight: 0.3, RarityWeight: 2}}
	for _, r := range rankings {
		for _, q := range queries {
			words, weights, key := r.Terms(q)
			terms, tkey := r.WeightedTerms(q)
			if tkey != key || len(terms) != len(words) {
				t.Fatalf("%+v: WeightedTerms gives %d terms and key %q, Terms %d and %q", q, len(terms), tkey, len(words), key)
			}
			for i, term := range terms {
				if term.Word != words[i] || term.Weight != weights[i] {
					t.Errorf("%+v: term %d is %s %v, Terms has %s %v", q, i, term.Word, term.Weight, words[i], weights[i])
				}
				if term.Source < SourceQuery || term.Source > SourceTopic {
					t.Errorf("%+v: term %s has no source", q, term.Word)
				}
				if expansion := term.Source == SourceSynonym || term.Source == SourceTopic; expansion != (term.Expands != "") {
					t.Errorf("%+v: term %s from %d expands %q", q, term.Word, term.Source, term.Expands)
				}
				// The origin accounts for the weight: a word of the
				// caller's at its own weight (its rarity, times the
				// keyword boost for a keyword), an expansion at its boost
				// times a weight the caller's word it expands can have.
				ownWeights := func(w string) []float64 {
					return []float64{r.Rarity(w), r.KeywordBoost * r.Rarity(w), r.FramingWeight}
				}
				var implied []float64
				switch term.Source {
				case SourceQuery:
					implied = ownWeights(term.Word)[:1]
				case SourceKeyword:
					implied = ownWeights(term.Word)[1:2]
				case SourceFraming:
					implied = ownWeights(term.Word)[2:]
				case SourceSynonym, SourceTopic:
					boost := r.SynonymBoost
					if term.Source == SourceTopic {
						boost = r.RelatedBoost
					}
					for _, w := range ownWeights(term.Expands) {
						implied = append(implied, w*boost)
					}
				}
				if !slices.Contains(implied, term.Weight) {
					t.Errorf("%+v: term %s from %d weighs %v, not one of %v", q, term.Word, term.Source, term.Weight, implied)
				}
			}
		}
	}
}

// Each term's origin is the way it got its weight: the heaviest of the
// ways the query reaches it.
func TestWeightedTermsOrigins(t *testing.T) {
	r := DefaultRanking
	terms, _ := r.WeightedTerms(Query{Text: "please help me with the weather and my stocks", Keywords: []string{"city", "weather"}})
	byWord := map[string]QueryTerm{}
	for _, term := range terms {
		byWord[term.Word] = term
	}
	want := map[string]QueryTerm{
		"please": {Word: "please", Weight: r.FramingWeight, TermOrigin: TermOrigin{Source: SourceFraming}},
		"help":   {Word: "help", Weight: r.FramingWeight, TermOrigin: TermOrigin{Source: SourceFraming}},
		"me":     {Word: "me", Weight: r.Rarity("me"), TermOrigin: TermOrigin{Source: SourceQuery}},
		"stocks": {Word: "stocks", Weight: r.Rarity("stocks"), TermOrigin: TermOrigin{Source: SourceQuery}},
		"city":   {Word: "city", Weight: r.KeywordBoost * r.Rarity("city"), TermOrigin: TermOrigin{Source: SourceKeyword}},
		// In the query text and the keywords: the keyword weighs more.
		"weather": {Word: "weather", Weight: r.KeywordBoost * r.Rarity("weather"), TermOrigin: TermOrigin{Source: SourceKeyword}},
		// A synonym and a topic word of the keyword "weather": the
		// synonym weighs more.
		"forecast": {Word: "forecast", Weight: r.KeywordBoost * r.Rarity("weather") * r.SynonymBoost, TermOrigin: TermOrigin{Source: SourceSynonym, Expands: "weather"}},
		"rain":     {Word: "rain", Weight: r.KeywordBoost * r.Rarity("weather") * r.RelatedBoost, TermOrigin: TermOrigin{Source: SourceTopic, Expands: "weather"}},
		"map":      {Word: "map", Weight: r.KeywordBoost * r.Rarity("city") * r.RelatedBoost, TermOrigin: TermOrigin{Source: SourceTopic, Expands: "city"}},
		// A plural expands like its singular.
		"invest": {Word: "invest", Weight: r.Rarity("stocks") * r.SynonymBoost, TermOrigin: TermOrigin{Source: SourceSynonym, Expands: "stocks"}},
	}
	for w, term := range want {
		got, ok := byWord[w]
		if !ok || got.Word != term.Word || got.Weight != term.Weight || got.TermOrigin != term.TermOrigin {
			t.Errorf("term %s = %+v (present %v), want %+v", w, got, ok, term)
		}
	}
	// The caller's own words come first, in their order.
	var own []string
	for _, term := range terms[:7] {
		own = append(own, term.Word)
	}
	if want := []string{"please", "help", "me", "with", "the", "weather", "and"}; !slices.Equal(own, want) {
		t.Errorf("first terms %v, want %v", own, want)
	}
}
