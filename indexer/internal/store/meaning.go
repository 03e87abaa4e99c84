package store

import (
	"strings"

	"github.com/switchboard-mcp/switchboard/indexer/internal/wordvec"
)

// Ranking by meaning: a tool's text and a query each become a vector, the
// frequency-weighted sum of their words' vectors (package wordvec), and a
// tool's score gains MeaningWeight × the cosine of the two, after the
// direction the scope's tools share has been taken out of both (in every
// catalog of tools, texts lean towards "tool", "data", "information"; with
// that direction left in, every tool is a little like every query). It
// links a request to a tool that shares none of its words, or only common
// ones: "a blender that is easy to clean" and "find products tailored to
// your preferences". The words' own matches still decide most rankings;
// this adds what only a knowledge of the world would.

// meaningIgnored are words that say nothing about what a tool does: the
// function words of English (pronouns, auxiliaries, prepositions; the
// list PostgreSQL's english configuration drops), which the frequency
// weights reduce but do not silence ("me" and "you" weigh a tenth to a
// quarter), and "tool", which every tool is. The framing words of a
// request ("help", "find", "please") are left out too: they are how
// people ask.
var meaningIgnored = map[string]bool{"tool": true, "tools": true}

func init() {
	for _, w := range strings.Fields(`i me my myself we our ours ourselves you your yours yourself yourselves
		he him his himself she her hers herself it its itself they them their theirs themselves what which who
		whom this that these those am is are was were be been being have has had having do does did doing a an
		the and but if or because as until while of at by for with about against between into through during
		before after above below to from up down in out on off over under again further then once here there
		when where why how all any both each few more most other some such no nor not only own same so than too
		very s t can will just don should now`) {
		meaningIgnored[w] = true
	}
}

// maxMeaningWords bounds the words of one text that make its vector: the
// vector of a long text settles well before, and reading a scope stays
// linear in its tools.
const maxMeaningWords = 1000

// paramMeaningWeight is the weight of a parameter's words in a tool's
// vector, as low against the name and description as the parameter text's
// field weight (DefaultRanking.FieldWeights).
const paramMeaningWeight = 0.2

var nameMeaningWeight float32 = 0.5

// minQueryMeaning is the weight the heaviest word of a query needs for
// its vector to be compared at all. The commonest words ("to", "it is
// what it is") weigh a few hundredths each; a vector of only them,
// normalized, would still point somewhere and find tools by chance. Any
// word past the few hundred commonest of English reaches it.
const minQueryMeaning = 0.25

// MeaningWord is one word of a query's vector and the weight its vector
// was added with.
type MeaningWord struct {
	Word   string
	Weight float64
}

// meaningText adds the vectors of text's words, times weight, to v, and
// returns how many words it looked at (at most limit) and the greatest
// weight one was added with; record, when not nil, gets each word added.
func meaningText(t *wordvec.Table, v *wordvec.Vector, text string, weight float32, limit int, record func(string, float32)) (seen int, heaviest float32) {
	for _, w := range SplitWords(text) {
		if seen == limit {
			break
		}
		seen++
		if framing[w] || meaningIgnored[w] {
			continue
		}
		ww, ok := t.WordWeight(w)
		if !ok {
			continue
		}
		t.Add(v, w, weight)
		heaviest = max(heaviest, weight*ww)
		if record != nil {
			record(w, weight*ww)
		}
	}
	return seen, heaviest
}

// DocumentMeaning is a tool's vector: the words of its name and
// description, and at a fifth of their weight those of its parameters.
// Its length is not normalized; the search does that once the scope's
// shared direction is out.
func DocumentMeaning(name, description, schemaJSON string) wordvec.Vector {
	t := wordvec.Default()
	var v wordvec.Vector
	for _, part := range []struct {
		text   string
		weight float32
	}{{name, nameMeaningWeight}, {description, 1}, {ParamText(schemaJSON), paramMeaningWeight}} {
		var fv wordvec.Vector
		meaningText(t, &fv, part.text, 1, maxMeaningWords, nil)
		if n := wordvec.Norm(&fv); n > 0 {
			for i := range v {
				v[i] += part.weight * fv[i] / n
			}
		}
	}
	return v
}

// QueryMeaning is a query's vector: the words of its text and, at
// KeywordBoost, those of its keywords (never their synonyms or topic
// words: the vector is what already relates them). ok is false when the
// query has too little meaning to compare (minQueryMeaning), and the
// search then ranks by words alone.
func (r Ranking) QueryMeaning(q Query) (v wordvec.Vector, ok bool) {
	return r.queryMeaning(q, nil)
}

// QueryMeaningWords are the words QueryMeaning made the query's vector
// of, each once in the order first met, with the total weight it was
// added with; nil when QueryMeaning is not ok.
func (r Ranking) QueryMeaningWords(q Query) []MeaningWord {
	var words []MeaningWord
	at := map[string]int{}
	_, ok := r.queryMeaning(q, func(w string, weight float32) {
		if i, seen := at[w]; seen {
			words[i].Weight += float64(weight)
			return
		}
		at[w] = len(words)
		words = append(words, MeaningWord{Word: w, Weight: float64(weight)})
	})
	if !ok {
		return nil
	}
	return words
}

func (r Ranking) queryMeaning(q Query, record func(string, float32)) (v wordvec.Vector, ok bool) {
	t := wordvec.Default()
	seen, heaviest := meaningText(t, &v, q.Text, 1, maxMeaningWords, record)
	for _, k := range q.Keywords {
		s, w := meaningText(t, &v, k, float32(r.KeywordBoost), maxMeaningWords-seen, record)
		seen, heaviest = seen+s, max(heaviest, w)
	}
	return v, heaviest >= minQueryMeaning
}
