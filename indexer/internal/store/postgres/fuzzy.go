package postgres

import (
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// Fuzzy lexemes: a word of the caller's that the scope holds in no form
// matches a tool's lexeme one edit away, an inserted, deleted or replaced
// character, at FuzzyWeight. Tool descriptions are written by hand and
// requests typed in a hurry: "Povides strology services" is the only
// astrology tool of the benchmark's catalog, and "astrological" reaches
// it no other way. A word the scope holds, as a lexeme, the beginning of
// one or one's longer form, never looks further: it is spelled as the
// tools spell it. Only the caller's own words look: their synonyms and
// topic words are spelled right, and most of them are missing from any
// one scope.

// fuzzyLexeme is a lexeme of the scope one edit from a query lexeme the
// scope does not hold. It weighs as the heaviest such query lexeme, the
// first in byte order of equals (near, boost), with its own IDF.
type fuzzyLexeme struct {
	lexeme string
	// entry is the lexeme's place in the scope's lexicon.
	entry int
	near  string
	boost float64
}

// lexemesByRunes lists the lexicon's places by the lexeme's length in
// characters, up to MaxFuzzyRunes + 1, the longest a fuzzy lexeme can be.
func lexemesByRunes(lexicon []string) [][]int32 {
	by := make([][]int32, store.MaxFuzzyRunes+2)
	for i, lex := range lexicon {
		if n := utf8.RuneCountInString(lex); n < len(by) {
			by[n] = append(by[n], int32(i))
		}
	}
	return by
}

// fuzzyLexemes are the scope's lexemes one edit from a lexeme of the
// caller's words (callers) of MinFuzzyRunes to MaxFuzzyRunes characters
// that the scope holds no other way: not as a lexeme, the beginning of
// one, or one's longer form (shorter). None is a query or shorter lexeme.
// They come in byte order; there are none when FuzzyWeight is 0.
func (ix *scopeIndex) fuzzyLexemes(callers []string, boost map[string]float64, shorter []shorterLexeme, r store.Ranking) []fuzzyLexeme {
	if r.FuzzyWeight == 0 {
		return nil
	}
	var out []fuzzyLexeme
	for _, lex := range callers {
		n := utf8.RuneCountInString(lex)
		if n < store.MinFuzzyRunes || n > store.MaxFuzzyRunes ||
			slices.ContainsFunc(shorter, func(sl shorterLexeme) bool { return slices.Contains(sl.begins, lex) }) {
			continue
		}
		if e := sort.SearchStrings(ix.lexicon, lex); e < len(ix.lexicon) && strings.HasPrefix(ix.lexicon[e], lex) {
			continue
		}
		for length := n - 1; length <= n+1; length++ {
			for _, e := range ix.byRunes[length] {
				// A word one edit from another begins or ends as it does:
				// a cheap test first, most of the lexicon fails it.
				cand := ix.lexicon[e]
				if cand[0] != lex[0] && cand[len(cand)-1] != lex[len(lex)-1] || !oneEditApart(lex, cand) {
					continue
				}
				if _, isQuery := boost[cand]; isQuery ||
					slices.ContainsFunc(shorter, func(sl shorterLexeme) bool { return sl.lexeme == cand }) {
					continue
				}
				if i := slices.IndexFunc(out, func(fl fuzzyLexeme) bool { return fl.lexeme == cand }); i >= 0 {
					if b := boost[lex]; b > out[i].boost || (b == out[i].boost && lex < out[i].near) {
						out[i].near, out[i].boost = lex, b
					}
					continue
				}
				out = append(out, fuzzyLexeme{lexeme: cand, entry: int(e), near: lex, boost: boost[lex]})
			}
		}
	}
	// In byte order, as the SQL definition of the ranking sums them.
	slices.SortFunc(out, func(a, b fuzzyLexeme) int { return strings.Compare(a.lexeme, b.lexeme) })
	return out
}

// oneEditApart says whether b is a with one character inserted, deleted
// or replaced (Levenshtein distance 1, as fuzzystrmatch's levenshtein
// counts). Two strings one edit apart are equal but for at most one
// character of each between their longest common prefix and, of what
// is left, their longest common suffix. The two are found byte by byte,
// then shortened to whole characters.
func oneEditApart(a, b string) bool {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	for i > 0 && i < len(a) && !utf8.RuneStart(a[i]) {
		i--
	}
	j := 0
	for j < n-i && a[len(a)-1-j] == b[len(b)-1-j] {
		j++
	}
	for j > 0 && !utf8.RuneStart(a[len(a)-j]) {
		j--
	}
	restA, restB := a[i:len(a)-j], b[i:len(b)-j]
	if len(restA) > utf8.UTFMax || len(restB) > utf8.UTFMax {
		return false
	}
	la, lb := utf8.RuneCountInString(restA), utf8.RuneCountInString(restB)
	return la <= 1 && lb <= 1 && la+lb > 0
}

// rankFuzzy adds each fuzzy lexeme's contribution to the documents
// holding it, after the shorter lexemes': boost × IDF (of the tool's
// lexeme) × FuzzyWeight × ts_rank of the lexeme.
func (ix *scopeIndex) rankFuzzy(sc *scratch, fuzzy []fuzzyLexeme, r store.Ranking) {
	for _, fl := range fuzzy {
		ix.rankLexemeAlone(sc, fl.entry, fl.boost*lnIDF(ix.toolCount, ix.ndoc[fl.lexeme]), float32(r.FuzzyWeight), r)
	}
}

// explainFuzzy is rankFuzzy for one document.
func (ix *scopeIndex) explainFuzzy(d *document, lexemes []queryLexeme, fuzzy []fuzzyLexeme, r store.Ranking) []store.ScorePart {
	var parts []store.ScorePart
	for _, fl := range fuzzy {
		idf := lnIDF(ix.toolCount, ix.ndoc[fl.lexeme])
		part, ok := explainLexemeAlone(d, fl.lexeme, fl.boost*idf, float32(r.FuzzyWeight), r)
		if !ok {
			continue
		}
		part.Kind, part.Near, part.Words, part.Boost, part.IDF = store.PartFuzzy, fl.near, wordsOf(lexemes, fl.near), fl.boost, idf
		part.FuzzyWeight = float32(r.FuzzyWeight)
		parts = append(parts, part)
	}
	return parts
}
