package store

import (
	"bytes"
	"crypto/sha256"
	"slices"
	"strings"
	"testing"
)

func TestSplitWords(t *testing.T) {
	cases := map[string][]string{
		"get_weather":         {"get", "weather"},
		"getHTTPResponse":     {"get", "http", "response"},
		"github.list-issues":  {"github", "list", "issues"},
		"s3Upload2Bucket":     {"s", "3", "upload", "2", "bucket"},
		"  spaced  words ":    {"spaced", "words"},
		"Crème_Brûlée":        {"crème", "brûlée"},
		"":                    nil,
		"___":                 nil,
		"fetchURLContentFast": {"fetch", "url", "content", "fast"},
	}
	for in, want := range cases {
		if got := SplitWords(in); !slices.Equal(got, want) {
			t.Errorf("SplitWords(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParamText(t *testing.T) {
	got := ParamText(`{"type":"object","properties":{"zipCode":{"type":"string","description":"US ZIP code"},
		"options":{"type":"object","properties":{"units_system":{"description":"metric or imperial"}}}}}`)
	for _, want := range []string{"zip code", "US ZIP code", "units system", "metric or imperial", "options"} {
		if !strings.Contains(got, want) {
			t.Errorf("paramText missing %q: %q", want, got)
		}
	}
	if got := ParamText(`not json`); got != "" {
		t.Errorf("ParamText(invalid) = %q, want empty", got)
	}
}

func TestQueryTerms(t *testing.T) {
	r := DefaultRanking
	terms, boosts, key := r.Terms(Query{Text: "Find the weather", Keywords: []string{"get_forecast"}})
	weight := map[string]float64{}
	for i, term := range terms {
		weight[term] = boosts[i]
	}
	if weight["weather"] != r.Rarity("weather") || weight["forecast"] != r.KeywordBoost*r.Rarity("forecast") || weight["get"] != r.KeywordBoost*r.Rarity("get") {
		t.Errorf("weights %v", weight)
	}
	// A synonym of a query word comes in at reduced weight; one of a
	// keyword keeps the keyword's boost relative to it. "find" frames the
	// request, so it and its synonyms weigh FramingWeight as much.
	if weight["find"] != r.FramingWeight || weight["search"] != r.FramingWeight*r.SynonymBoost || weight["fetch"] != r.KeywordBoost*r.Rarity("get")*r.SynonymBoost {
		t.Errorf("synonym weights %v", weight)
	}
	// A framing word given as a keyword is what the caller asked for.
	if terms, boosts, _ := r.Terms(Query{Text: "x", Keywords: []string{"find"}}); !slices.Contains(terms, "find") || boosts[slices.Index(terms, "find")] != r.KeywordBoost*r.Rarity("find") {
		t.Errorf("keyword find: %v %v", terms, boosts)
	}
	// Five words: a sentence, not an identifier, so no trigram key.
	if key != "" {
		t.Errorf("key %q for a five-word query", key)
	}
	if _, _, key := r.Terms(Query{Text: "get_Wether", Keywords: []string{"forcast"}}); key != "getwetherforcast" {
		t.Errorf("key %q", key)
	}
	// A long identifier is cut like a name key.
	if _, _, key := r.Terms(Query{Text: strings.Repeat("é", 3000)}); len([]rune(key)) != MaxNameKeyRunes {
		t.Errorf("key of a 3000-rune word has %d runes", len([]rune(key)))
	}
	var words []string
	for i := range 200 {
		words = append(words, "w"+string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	long := strings.Join(words, " ")
	if terms, _, _ := r.Terms(Query{Text: long}); len(terms) > MaxTerms {
		t.Errorf("%d terms, cap is %d", len(terms), MaxTerms)
	}
}

// The expansion groups are written in the singular; a regular plural in a
// query expands like its singular.
func TestPluralsExpand(t *testing.T) {
	r := DefaultRanking
	for _, c := range []struct{ word, singular string }{
		{"properties", "property"}, {"laptops", "laptop"}, {"boxes", "box"}, {"recipes", "recipe"}, {"photos", "photo"},
	} {
		plural, _, _ := r.Terms(Query{Text: c.word})
		single, _, _ := r.Terms(Query{Text: c.singular})
		for _, w := range single[1:] {
			if !slices.Contains(plural, w) {
				t.Errorf("%q does not expand to %q as %q does (%v)", c.word, w, c.singular, plural)
			}
		}
	}
	// Only regular plurals: "glass" and "bus" are not plurals of anything
	// in the groups, and "news" stays itself.
	if got := baseForms("glass"); !slices.Equal(got, []string{"glass"}) {
		t.Errorf("baseForms(glass) = %v", got)
	}
	if got := baseForms("news"); got[0] != "news" {
		t.Errorf("baseForms(news) = %v", got)
	}
}

func TestNameKey(t *testing.T) {
	if got := NameKey("github.Create_issue"); got != "githubcreateissue" {
		t.Errorf("NameKey = %q", got)
	}
	if got := []rune(NameKey(strings.Repeat("é", 1000))); len(got) != MaxNameKeyRunes {
		t.Errorf("NameKey of a 1000-rune name has %d runes", len(got))
	}
}

// TestWordGroupsAreWellFormed: every word of the synonym and topic groups
// is one lowercase token (a query word is matched against them as such)
// and no group names a word twice.
func TestWordGroupsAreWellFormed(t *testing.T) {
	for i, g := range slices.Concat(synonymGroups, topicGroups) {
		seen := map[string]bool{}
		for _, w := range g {
			if split := SplitWords(w); len(split) != 1 || split[0] != w {
				t.Errorf("group %d (%s): %q is not one lowercase word (%v)", i, g[0], w, split)
			}
			if seen[w] {
				t.Errorf("group %d (%s) names %q twice", i, g[0], w)
			}
			seen[w] = true
		}
	}
}

// TestTopicWordsReachTheirField: a request naming a thing expands to the
// words a tool of its field is described with.
func TestTopicWordsReachTheirField(t *testing.T) {
	for _, c := range []struct{ word, field string }{
		{"blender", "product"}, {"condo", "apartment"}, {"telescope", "astronomy"}, {"novel", "book"},
		{"vaccine", "health"}, {"sudoku", "game"}, {"lawsuit", "legal"}, {"calculator", "math"},
	} {
		terms, _, _ := DefaultRanking.Terms(Query{Text: c.word})
		if !slices.Contains(terms, c.field) {
			t.Errorf("%q does not expand to %q: %v", c.word, c.field, terms)
		}
	}
}

// A prefixed tool's name is folded both as advertised and as its backend
// names it, so that a query beginning the tool's own name matches.
func TestNameWordsFoldTheBackendsName(t *testing.T) {
	for _, c := range []struct{ name, original, want string }{
		{"acme_weatherForecast", "weatherForecast", "acme weather forecast acmeweatherforecast weatherforecast"},
		{"getWeather", "", "get weather getweather"},
		{"getWeather", "getWeather", "get weather getweather"},
		{"acme_search", "search", "acme search acmesearch"},
		{"search", "", "search"},
	} {
		if got := NameWords(c.name, c.original); got != c.want {
			t.Errorf("NameWords(%q, %q) = %q, want %q", c.name, c.original, got, c.want)
		}
	}
	// A tool advertised under its own name is the document it always was;
	// under another, another document.
	plain := Tool{Name: "getWeather", Description: "Weather."}
	same := plain
	same.OriginalName = "getWeather"
	renamed := plain
	renamed.OriginalName = "weather"
	if !bytes.Equal(plain.Document().ContentHash, same.Document().ContentHash) {
		t.Error("naming the advertised name as the original changed the document")
	}
	if bytes.Equal(plain.Document().ContentHash, renamed.Document().ContentHash) {
		t.Error("another original name left the document as it was")
	}
}

// The fields a hit carries beyond name, description and schema make a
// document of their own, each told apart from the others by its label; a
// tool with none keeps the hash it always had.
func TestDocumentHashCoversListedFields(t *testing.T) {
	plain := Tool{Name: "purge", Description: "Purge an account."}
	before := sha256.New()
	for _, part := range []string{"purge", "Purge an account.", `{"type":"object"}`} {
		before.Write([]byte(part))
		before.Write([]byte{0})
	}
	if !bytes.Equal(plain.Document().ContentHash, before.Sum(nil)) {
		t.Error("a tool with no listed fields changed its hash")
	}
	seen := map[string]string{string(plain.Document().ContentHash): "plain"}
	for name, tool := range map[string]Tool{
		"title":               {Name: "purge", Description: "Purge an account.", Title: `{"destructiveHint":true}`},
		"annotations":         {Name: "purge", Description: "Purge an account.", AnnotationsJSON: `{"destructiveHint":true}`},
		"output schema":       {Name: "purge", Description: "Purge an account.", OutputSchemaJSON: `{"destructiveHint":true}`},
		"_meta":               {Name: "purge", Description: "Purge an account.", MetaJSON: `{"destructiveHint":true}`},
		"other annotations":   {Name: "purge", Description: "Purge an account.", AnnotationsJSON: `{"readOnlyHint":true}`},
		"title + annotations": {Name: "purge", Description: "Purge an account.", Title: "Purge", AnnotationsJSON: `{"destructiveHint":true}`},
	} {
		h := string(tool.Document().ContentHash)
		if other, ok := seen[h]; ok {
			t.Errorf("%s and %s are one document", name, other)
		}
		seen[h] = name
	}
}
