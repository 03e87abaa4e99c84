package store

import "context"

// An explained search is a search that also says why each hit ranked where
// it did: its score broken into the parts the ranking added up, and the
// weighted words the query became. Operators ask for it (the gRPC API lets
// only their credentials); a search that does not ask pays nothing for it.

// Explainer is the part of Index that explains searches.
type Explainer interface {
	// SearchExplained is Search, returning the same hits, with each hit's
	// score broken into parts and the terms the query became. Summed in
	// order from zero, a hit's parts' contributions give its Score exactly.
	SearchExplained(ctx context.Context, scope Scope, q Query, r Ranking) (Explained, error)
}

// Explained is an explained search.
type Explained struct {
	Hits []ExplainedHit
	// Terms are the weighted words of the query, in the order Terms
	// returns them.
	Terms []QueryTerm
	// TrigramKey is the query folded to one token for trigram similarity
	// with tool names; empty when the query is too long to be compared.
	TrigramKey string
	// MeaningWords are the words the query's vector of meaning was made of
	// (Ranking.QueryMeaningWords); empty when the query has none.
	MeaningWords []MeaningWord
}

// ExplainedHit is a hit and the parts of its score.
type ExplainedHit struct {
	Hit
	Parts []ScorePart
}

// TermSource says how a word of the query got its weight.
type TermSource int

const (
	// SourceQuery is a word of the query text, at its Rarity.
	SourceQuery TermSource = iota + 1
	// SourceKeyword is a word of the keywords, at KeywordBoost × its
	// Rarity.
	SourceKeyword
	// SourceFraming is a word of the query text that frames a request
	// ("help", "find", "please"), at FramingWeight.
	SourceFraming
	// SourceSynonym is a synonym of one of the caller's words, at
	// SynonymBoost times that word's weight.
	SourceSynonym
	// SourceTopic is a word of the same topic as one of the caller's
	// words, at RelatedBoost times that word's weight.
	SourceTopic
)

// TermOrigin is where a query term's weight came from: its source and,
// for a synonym or topic word, the caller's word it was added for. A word
// reached several ways weighs as the heaviest of them, and that one is its
// origin (the first of equals).
type TermOrigin struct {
	Source  TermSource
	Expands string
}

// Caller says whether the term is one of the caller's own words (of the
// query text, framing words included, or of the keywords) rather than an
// expansion of one.
func (o TermOrigin) Caller() bool {
	return o.Source == SourceQuery || o.Source == SourceKeyword || o.Source == SourceFraming
}

// directOrigin is the origin of one of the caller's own words, of the
// query text or of the keywords: as Terms weighs them.
func directOrigin(inText bool, w string) TermOrigin {
	switch {
	case inText && framing[w]:
		return TermOrigin{Source: SourceFraming}
	case inText:
		return TermOrigin{Source: SourceQuery}
	}
	return TermOrigin{Source: SourceKeyword}
}

// QueryTerm is one weighted word of a query.
type QueryTerm struct {
	Word   string
	Weight float64
	TermOrigin
	// Lexemes are what the index reduced the word to (stemmed; none for a
	// stop word).
	Lexemes []string
}

// WeightedTerms is Terms with each term's origin: the same terms, in the
// same order, with the same weights, and the same key.
func (r Ranking) WeightedTerms(q Query) (terms []QueryTerm, key string) {
	var origins []TermOrigin
	words, weights, _, key := r.terms(q, &origins)
	terms = make([]QueryTerm, len(words))
	for i, w := range words {
		terms[i] = QueryTerm{Word: w, Weight: weights[i], TermOrigin: origins[i]}
	}
	return terms, key
}

// PartKind is what a score part measures.
type PartKind int

const (
	// PartExact is a query lexeme the document holds (as a word of its
	// own; its prefix rank may count longer lexemes it begins too).
	PartExact PartKind = iota + 1
	// PartPrefix is a query lexeme the document holds only as the
	// beginning of longer lexemes ("weather" in "weatherforecast").
	PartPrefix
	// PartTrigram is the trigram similarity of the query and the tool's
	// name.
	PartTrigram
	// PartShorter is a lexeme of the tool, of four characters or more,
	// that begins a longer query lexeme ("repo" for "repositori").
	PartShorter
	// PartMeaning is the similarity of the meaning of the query and of
	// the tool's text (meaning.go).
	PartMeaning
	// PartFuzzy is a lexeme of the tool one edit from a lexeme of the
	// caller's words that the scope holds no other way ("strolog" for
	// "astrolog"; MinFuzzyRunes).
	PartFuzzy
)

// MaxMatchedLexemes bounds the document lexemes a part lists (a prefix
// can begin many); MatchedCount counts them all.
const MaxMatchedLexemes = 8

// ScorePart is one addend of a hit's score.
type ScorePart struct {
	Kind PartKind
	// Contribution is what the part added to the score.
	Contribution float64

	// For PartExact and PartPrefix: the query lexeme; the query words
	// reduced to it (its boost is the heaviest of their weights); its
	// inverse document frequency in the scope; ts_rank of the lexeme and
	// of the lexeme as a prefix (the same for a lexeme shorter than three
	// characters, which matches only itself); and the weight of the
	// prefix rank. Contribution = Boost × IDF × (ExactRank + PrefixWeight
	// × PrefixRank), the sum in single precision.
	Lexeme       string
	Words        []string
	Boost, IDF   float64
	ExactRank    float32
	PrefixRank   float32
	PrefixWeight float32
	// Matched are the document's lexemes the query lexeme matched, in
	// byte order: itself and the longer ones it begins, at most
	// MaxMatchedLexemes of MatchedCount.
	Matched      []string
	MatchedCount int

	// For PartShorter: Lexeme is the tool's shorter lexeme, Matched just
	// it; Begins is the query lexeme it weighs as (the heaviest it begins,
	// the first in byte order of equals), Words the query words reduced to
	// that one, Boost their heaviest weight and IDF that lexeme's; ExactRank
	// is 0 and PrefixRank ts_rank of the shorter lexeme. Contribution =
	// Boost × IDF × PrefixWeight × PrefixRank, the product of the last two
	// in single precision.
	Begins string

	// For PartFuzzy: Lexeme is the tool's lexeme, Matched just it; Near is
	// the query lexeme one edit from it that it weighs as (the heaviest,
	// the first in byte order of equals), Words the query words reduced
	// to that one and Boost their heaviest weight; IDF is the tool
	// lexeme's, ExactRank 0 and PrefixRank ts_rank of the tool lexeme.
	// Contribution = Boost × IDF × FuzzyWeight × PrefixRank, the product
	// of the last two in single precision.
	Near        string
	FuzzyWeight float32

	// For PartTrigram: the tool's name key, the greater word_similarity
	// of it and the query key (Explained.TrigramKey), and the weight it
	// was multiplied with. Contribution = TrigramWeight × Similarity, in
	// single precision.
	NameKey       string
	Similarity    float32
	TrigramWeight float32

	// For PartMeaning: Similarity is the cosine of the query's and the
	// tool's vectors, the scope's shared direction out of both, and
	// MeaningWeight what it was multiplied with. Contribution =
	// MeaningWeight × Similarity.
	MeaningWeight float64
}
