package store

import "testing"

// A word weighs by how rare it is in English: common words much less than
// the words that name what a request is about, a word English does not
// know (a name, an identifier) fully, and every word alike when
// RarityWeight is 0.
func TestRarityFollowsEnglishFrequency(t *testing.T) {
	r := DefaultRanking
	said, currently, thermostat := r.Rarity("said"), r.Rarity("currently"), r.Rarity("thermostat")
	if !(0 < said && said < currently && currently < thermostat && thermostat <= 1) {
		t.Errorf("said %.3f, currently %.3f, thermostat %.3f: want 0 < said < currently < thermostat <= 1", said, currently, thermostat)
	}
	if said > 0.3 || thermostat < 0.9 {
		t.Errorf("said %.3f, thermostat %.3f: want under 0.3 and over 0.9", said, thermostat)
	}
	if got := r.Rarity("githubcreateissue"); got != 1 {
		t.Errorf("an unknown word weighs %v, want 1", got)
	}
	r.RarityWeight = 0
	if got := r.Rarity("said"); got != 1 {
		t.Errorf("without RarityWeight a common word weighs %v, want 1", got)
	}
	words, weights, _ := DefaultRanking.Terms(Query{Text: "currently thermostat", Keywords: []string{"thermostat"}})
	for i, w := range words {
		if w == "thermostat" && weights[i] != DefaultRanking.KeywordBoost*thermostat {
			t.Errorf("the keyword thermostat weighs %v, want KeywordBoost × its rarity %v", weights[i], DefaultRanking.KeywordBoost*thermostat)
		}
	}
}
