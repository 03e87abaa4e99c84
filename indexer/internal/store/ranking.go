package store

import (
	"math"
	"strings"

	"github.com/switchboard-mcp/switchboard/indexer/internal/wordvec"
)

// Ranking holds the tunable weights of the ranking function. The defaults
// were chosen on the MetaTool development split as a whole (never per
// query); see docs/benchmarks-indexer.md.
type Ranking struct {
	// FieldWeights are ts_rank's weights for D, C, B, A: unused, parameter
	// text, description, name.
	FieldWeights [4]float32
	// Normalization is ts_rank's document-length normalization flags.
	Normalization int
	// KeywordBoost multiplies the weight of caller-supplied keywords.
	KeywordBoost float64
	// SynonymBoost is the weight of a word added by synonym expansion;
	// RelatedBoost that of a word from the same topic.
	SynonymBoost float64
	RelatedBoost float64
	// PrefixWeight is the weight of a prefix match ("weather" in
	// "weatherforecast") relative to an exact lexeme match.
	PrefixWeight float64
	// FuzzyWeight is the weight, relative to an exact match, of a tool's
	// lexeme one edit from a word of the caller's that the scope does
	// not hold ("strolog" in "Povides strology services" for
	// "astrological"; see MinFuzzyRunes).
	FuzzyWeight float64
	// TrigramWeight scales trigram similarity between the query and the
	// tool name; TrigramThreshold is the similarity below which it counts
	// for nothing.
	TrigramWeight    float64
	TrigramThreshold float64
	// FramingWeight is the weight of a word that frames a request rather
	// than naming what it is about ("help", "find", "show", "please").
	FramingWeight float64
	// RarityWeight is how much a word's frequency in English sets the
	// weight of a word of the caller's: its weight is multiplied by its
	// wordvec weight (nearly 0 for "the", 0.5 for a word like "currently",
	// nearly 1 for "thermostat") to this power; 0 weighs every word alike.
	// The scope's own IDF says how rare a word is among its tools, a few
	// hundred short texts; English says which words carry a request.
	RarityWeight float64
	// MeaningWeight scales the cosine of the query's and a tool's vectors
	// (meaning.go); 0 ranks by words alone. A tool that matches no word of
	// the query is a hit by meaning alone when the cosine reaches
	// MeaningFloor.
	MeaningWeight float64
	MeaningFloor  float64
}

// DefaultRanking is the ranking the indexer serves with.
var DefaultRanking = Ranking{
	FieldWeights:     [4]float32{0, 0.2, 0.5, 1.0},
	Normalization:    1,
	KeywordBoost:     2,
	SynonymBoost:     0.4,
	RelatedBoost:     0.3,
	PrefixWeight:     0.3,
	FuzzyWeight:      0.75,
	TrigramWeight:    0.5,
	TrigramThreshold: 0.5,
	FramingWeight:    0.3,
	RarityWeight:     0.5,
	MeaningWeight:    0.85,
	MeaningFloor:     0.3,
}

// Query is one search.
type Query struct {
	Text     string
	Keywords []string
	Limit    int
}

// Hit is one ranked tool.
type Hit struct {
	Name            string
	Description     string
	InputSchemaJSON string
	// MetaJSON is the tool's _meta ("" for none).
	MetaJSON string
	// Title, AnnotationsJSON and OutputSchemaJSON are as Tool's.
	Title            string
	AnnotationsJSON  string
	OutputSchemaJSON string
	Score            float64
}

const (
	// MaxQueryBytes bounds the query text plus keywords.
	MaxQueryBytes = 4096
	// MaxKeywords bounds the number of keywords of a query.
	MaxKeywords = 32
	// MaxTerms bounds the weighted words a query becomes.
	MaxTerms = 128
	// MaxTrigramWords is the longest query (in words) compared by trigram
	// similarity with tool names.
	MaxTrigramWords = 4
	// MinFuzzyRunes and MaxFuzzyRunes bound the lexemes of the caller's
	// words that match a tool's lexeme one edit away (an inserted, deleted
	// or replaced character) when the scope holds them no other way: not
	// as a lexeme, the beginning of one, or one's longer form. Shorter
	// lexemes are one edit from too many that mean something else
	// ("price", "prize"); a longer one is not a word.
	MinFuzzyRunes = 6
	MaxFuzzyRunes = 32
)

// Terms turns the query and keywords into weighted words: query words at
// their Rarity, keywords at KeywordBoost × their Rarity, framing words of
// the query at FramingWeight, synonyms of any at SynonymBoost (related
// words at RelatedBoost) times their source; at most MaxTerms,
// the caller's own words first. An implementation then reduces them to
// its lexemes (stemming, stop words). key is the query folded to one
// identifier-like token for trigram similarity with tool names (like
// NameKey, at most MaxNameKeyRunes), empty for queries longer than
// MaxTrigramWords words.
func (r Ranking) Terms(q Query) (terms []string, boosts []float64, key string) {
	terms, boosts, _, key = r.terms(q, nil)
	return terms, boosts, key
}

// CallerTerms is Terms, and how many of the terms, first in order, are
// the caller's own words (of the query text, framing words included, or
// of its keywords); the rest are their expansions.
func (r Ranking) CallerTerms(q Query) (terms []string, boosts []float64, own int, key string) {
	return r.terms(q, nil)
}

// terms is Terms. When origins is not nil it also gets, for each term in
// order, where its weight came from (explain.go); the search itself
// passes nil and pays nothing for it.
func (r Ranking) terms(q Query, origins *[]TermOrigin) (terms []string, boosts []float64, own int, key string) {
	weight := map[string]float64{}
	origin := map[string]TermOrigin{}
	var order []string
	add := func(w string, b float64, o TermOrigin) {
		if old, ok := weight[w]; !ok {
			order = append(order, w)
			weight[w] = b
		} else if b > old {
			weight[w] = b
		} else {
			return
		}
		if origins != nil {
			origin[w] = o
		}
	}
	type source struct {
		word  string
		boost float64
	}
	var direct []source
	var keyParts []string
	// direct[:textWords] are the query text's words, the rest keywords.
	textWords := 0
	for i, text := range append([]string{q.Text}, q.Keywords...) {
		b := 1.0
		if i > 0 {
			b = r.KeywordBoost
		}
		for _, w := range SplitWords(text) {
			keyParts = append(keyParts, w)
			if i == 0 && framing[w] {
				direct = append(direct, source{w, b * r.FramingWeight})
				continue
			}
			direct = append(direct, source{w, b * r.Rarity(w)})
		}
		if i == 0 {
			textWords = len(direct)
		}
	}
	// The caller's own words first, so the cap below only ever drops
	// expansions.
	for i, d := range direct {
		var o TermOrigin
		if origins != nil {
			o = directOrigin(i < textWords, d.word)
		}
		add(d.word, d.boost, o)
	}
	own = min(len(order), MaxTerms)
	for _, d := range direct {
		for _, form := range baseForms(d.word) {
			for _, syn := range synonyms[form] {
				add(syn, d.boost*r.SynonymBoost, TermOrigin{Source: SourceSynonym, Expands: d.word})
			}
			for _, rel := range related[form] {
				add(rel, d.boost*r.RelatedBoost, TermOrigin{Source: SourceTopic, Expands: d.word})
			}
		}
	}
	if len(order) > MaxTerms {
		order = order[:MaxTerms]
	}
	for _, w := range order {
		terms = append(terms, w)
		boosts = append(boosts, weight[w])
		if origins != nil {
			*origins = append(*origins, origin[w])
		}
	}
	// Trigram similarity is for identifier-like queries ("get_wether",
	// "githubCreateIssue"): a few words at most. On a sentence it finds
	// nothing words do not, and it is the costliest part of a search.
	if len(keyParts) > MaxTrigramWords {
		return terms, boosts, own, ""
	}
	// Cut like a name key: similarity costs time in proportion to both,
	// and no tool name is longer.
	key = strings.Join(keyParts, "")
	if runes := []rune(key); len(runes) > MaxNameKeyRunes {
		key = string(runes[:MaxNameKeyRunes])
	}
	return terms, boosts, own, key
}

// Rarity is the factor a word of the caller's weight gets for how rare it
// is in English (RarityWeight). A word the word vectors do not know, a
// name or an identifier ("kubectl", "githubcreateissue"), is as rare as
// words get: 1.
func (r Ranking) Rarity(w string) float64 {
	if r.RarityWeight == 0 {
		return 1
	}
	x, ok := wordvec.Default().WordWeight(w)
	if !ok {
		return 1
	}
	return math.Pow(float64(x), r.RarityWeight)
}

// baseForms are the forms of w the expansion groups are looked up under:
// w itself and, for a regular English plural, its singular ("properties"
// → property, "laptops" → laptop, "boxes" → box), so that the groups,
// written in the singular, expand plurals too.
func baseForms(w string) []string {
	forms := []string{w}
	n := len(w)
	switch {
	case n > 4 && strings.HasSuffix(w, "ies"):
		forms = append(forms, w[:n-3]+"y")
	case n > 3 && strings.HasSuffix(w, "es"):
		forms = append(forms, w[:n-2], w[:n-1])
	case n > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss"):
		forms = append(forms, w[:n-1])
	}
	return forms
}

// framing are words that frame a request to an assistant rather than say
// what it is about: how people ask ("can you help me find", "please show
// me", "I would like to know"). General English, the same for any
// catalog; PostgreSQL's stop words already drop the shortest of them.
var framing = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`help helps helping assist assistance please kindly want wants wanted
		need needs would like looking look find finding show tell give provide providing know
		get getting let lets suggest suggestions recommend recommendations interested
		wondering possible able sure thanks thank hi hello hey`) {
		framing[w] = true
	}
}
