package storetest

import (
	"testing"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// meaningTools share no word, and no synonym or topic word, with
// meaningQueries: only their meaning relates them.
var meaningTools = []store.Tool{
	{Name: "recipe_finder", Description: "Suggests dishes to cook from the ingredients you have."},
	{Name: "legal_advisor", Description: "Answers questions about contracts, leases and lawsuits."},
	{Name: "stargazer", Description: "Shows which planets and constellations are visible tonight."},
	{Name: "pet_care", Description: "Advice on feeding, training and grooming dogs and cats."},
	{Name: "flight_status", Description: "Tracks departures, arrivals and delays at airports."},
}

var meaningQueries = map[string]string{
	"is Jupiter up right now":                        "stargazer",
	"my parrot is sick":                              "pet_care",
	"spaghetti carbonara":                            "recipe_finder",
	"what can I make with leftover chicken and rice": "recipe_finder",
}

// A request that shares no word with any tool finds the tool it is about
// by meaning; words alone find nothing for it. A query of the commonest
// words only has no meaning to compare and finds nothing either way.
func meaningFindsWhatSharesNoWord(t *testing.T, b Backing) {
	st := b.Open(t)
	sc := build(t, st, "meaning", meaningTools)
	for q, want := range meaningQueries {
		if got := searchByWords(t, st, sc, q); len(got) != 0 {
			t.Errorf("%q by words: %v, want nothing (the query must share no word with the tools)", q, got)
		}
		if got := search(t, st, sc, q); len(got) == 0 || got[0] != want {
			t.Errorf("%q: %v, want %s first", q, got, want)
		}
	}
	for _, q := range []string{"the of and", "to", "it is what it is"} {
		if got := search(t, st, sc, q); len(got) != 0 {
			t.Errorf("%q: %v, want nothing", q, got)
		}
	}
}
