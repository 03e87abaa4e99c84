package storetest

import (
	"slices"
	"testing"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// fuzzyTools hold a misspelling ("strology") and pairs of words one edit
// apart ("rental", "dental").
var fuzzyTools = []store.Tool{
	{Name: "StrologyTool", Description: "Povides strology services for you."},
	{Name: "car_rental", Description: "Book a rental car at any airport."},
	{Name: "dentist", Description: "Find a dental clinic near you."},
	{Name: "weather_forecast", Description: "Tomorrow's forecast for a city."},
	{Name: "bat_facts", Description: "Facts about bats and where they live."},
}

// A word of the caller's that the scope holds in no form matches a
// tool's word one edit away, by words alone; a word the scope holds, a
// short word and a word two edits away do not.
func fuzzyMatchesOneEditAway(t *testing.T, b Backing) {
	st := b.Open(t)
	sc := build(t, st, "fuzzy", fuzzyTools)
	noFuzzy := store.DefaultRanking
	noFuzzy.MeaningWeight, noFuzzy.FuzzyWeight = 0, 0
	for q, want := range map[string]string{
		"astrological predictions": "StrologyTool", // astrolog → strolog
		"the wether in Paris":      "weather_forecast",
		"forcast for tomorow":      "weather_forecast",
	} {
		got := searchByWords(t, st, sc, q)
		if len(got) == 0 || got[0] != want {
			t.Errorf("%q by words: %v, want %s first", q, got, want)
		}
		if without := searchWith(t, st, sc, q, noFuzzy); slices.Contains(without, want) {
			t.Errorf("%q without fuzzy lexemes: %v, want no %s (the test must need them)", q, without, want)
		}
	}
	// Fuzzy lexemes add nothing to these: "dental" is held ("rental" is
	// one edit away but not looked for), so is "rentals" (as "rental"),
	// "cats" is one edit from "bats" but too short, "astronomical" three
	// edits from "strology".
	byWords := noFuzzy
	byWords.FuzzyWeight = store.DefaultRanking.FuzzyWeight
	for _, q := range []string{"dental", "rentals", "cats", "astronomical"} {
		with := searchHits(t, st, sc, q, byWords)
		if without := searchHits(t, st, sc, q, noFuzzy); !slices.Equal(with, without) {
			t.Errorf("%q: %v, without fuzzy lexemes %v: want the same", q, with, without)
		}
	}
}

func searchHits(t *testing.T, st store.Store, sc store.Scope, text string, r store.Ranking) []store.Hit {
	t.Helper()
	hits, err := st.Search(t.Context(), sc, store.Query{Text: text, Limit: 8}, r)
	if err != nil {
		t.Fatalf("search %q: %v", text, err)
	}
	return hits
}

func searchWith(t *testing.T, st store.Store, sc store.Scope, text string, r store.Ranking) []string {
	t.Helper()
	hits, err := st.Search(t.Context(), sc, store.Query{Text: text, Limit: 8}, r)
	if err != nil {
		t.Fatalf("search %q: %v", text, err)
	}
	return HitNames(hits)
}
