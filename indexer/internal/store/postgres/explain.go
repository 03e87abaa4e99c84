package postgres

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
	"github.com/switchboard-mcp/switchboard/indexer/internal/wordvec"
)

// This file explains searches: after Search has ranked, it takes the hits
// it returned (at most the limit, 50) one by one and evaluates, for each,
// every addend the ranking gave it, with the same functions and the same
// floating-point operations in the same order (entryRank, addEntry,
// normalize, lnIDF, lexemeContribution, nameSimilarity,
// trigramContribution, meaningSimilarity, meaningContribution). The
// ranking adds a document's addends to zero in query-lexeme order, then
// the shorter and fuzzy lexemes' parts, the trigram part, then the
// meaning part; so do the parts here, and
// their sum is the hit's score exactly, not approximately. A search that
// is not explained runs none of this.

// lexemeContribution is what one matched query lexeme adds to a document's
// score: weight (boost × IDF) × (exact + prefixWeight × prefix), the ranks
// and their sum in single precision as ts_rank and the SQL definition of
// the ranking have them. The conversion of the product rounds it before
// the caller adds it, so the compiler cannot fuse the multiplication into
// that addition (Go allows fused multiply-add without it), and an addend
// explained on its own is the addend the score got.
func lexemeContribution(weight float64, exact, prefix, prefixWeight float32) float64 {
	return float64(weight * float64(exact+float32(prefixWeight*prefix)))
}

// trigramContribution is what the trigram similarity of the query and a
// tool name adds to its score, in single precision as pg_trgm has it.
func trigramContribution(weight, similarity float32) float64 {
	return float64(float32(weight * similarity))
}

// nameSimilarity is the greater word_similarity of the query key and the
// document's name key, either way round. word_similarity(name, query)
// walks the query key for every trigram of it the name has, which grows
// with the square of the query's length: a query of one 256-letter word
// repeating a prefix every tool of a backend shares ("githubgithub...")
// made each of those tools cost tens of thousands of steps. It cannot be
// more than the share of the name's trigrams the query has at all, so it
// is skipped when that share is no more than the other way round, which
// walks only the name (the greater of the two is the same; float32
// division of exact integers rounds monotonically, so the bound holds
// rounded too).
func nameSimilarity(d *document, q trigramText, scratch *simScratch) float32 {
	cheap := wordSimilarity(q, d.nameTrigrams, scratch)
	if shared := commonTrigrams(d.nameTrigrams.set, q.set); shared == 0 || calcSml(shared, len(d.nameTrigrams.set), shared) <= cheap {
		return cheap
	}
	return max(wordSimilarity(d.nameTrigrams, q, scratch), cheap)
}

// commonTrigrams is how many trigrams two sorted sets share.
func commonTrigrams(a, b []trigram) int {
	n := 0
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			n, i, j = n+1, i+1, j+1
		}
	}
	return n
}

// queryLexeme is one lexeme of a query, weighted as the search weighs it:
// as the heaviest of the words that reduce to it.
type queryLexeme struct {
	lexeme string
	boost  float64
	words  []string
	// caller is whether a word of the caller's reduces to it (not only
	// an expansion).
	caller bool
}

// queryLexemes reduces terms to the lexemes a search looks up, in the
// order Search does.
func queryLexemes(terms []store.QueryTerm) []queryLexeme {
	var out []queryLexeme
	at := map[string]int{}
	for _, t := range terms {
		for _, lex := range t.Lexemes {
			i, ok := at[lex]
			if !ok {
				at[lex] = len(out)
				out = append(out, queryLexeme{lexeme: lex, boost: t.Weight, words: []string{t.Word}, caller: t.Caller()})
				continue
			}
			if t.Weight > out[i].boost {
				out[i].boost = t.Weight
			}
			out[i].words = append(out[i].words, t.Word)
		}
	}
	return out
}

// SearchExplained is Search, with each hit's score broken into parts.
func (s *Store) SearchExplained(ctx context.Context, scope store.Scope, q store.Query, r store.Ranking) (store.Explained, error) {
	hits, err := s.Search(ctx, scope, q, r)
	if err != nil {
		return store.Explained{}, err
	}
	terms, key := r.WeightedTerms(q)
	words := make([]string, len(terms))
	for i, t := range terms {
		words[i] = t.Word
	}
	stems, err := s.lexemes(ctx, words)
	if err != nil {
		return store.Explained{}, err
	}
	for i := range terms {
		terms[i].Lexemes = stems[i]
	}
	out := store.Explained{Terms: terms, TrigramKey: key, MeaningWords: r.QueryMeaningWords(q), Hits: make([]store.ExplainedHit, len(hits))}
	if len(hits) == 0 {
		return out, nil
	}
	// The scope index Search ranked with (a scope never changes, so one
	// read again after an eviction is the same).
	ix, err := s.scopeIndex(ctx, scope.ID)
	if err != nil {
		return store.Explained{}, err
	}
	docs, err := ix.documentsOf(hits)
	if err != nil {
		return store.Explained{}, err
	}
	lexemes := queryLexemes(terms)
	names := make([]string, len(lexemes))
	boost := make(map[string]float64, len(lexemes))
	// The caller's own words come first, and so do their lexemes.
	callers := 0
	for i, ql := range lexemes {
		names[i], boost[ql.lexeme] = ql.lexeme, ql.boost
		if ql.caller {
			callers = i + 1
		}
	}
	shorter := ix.shorterLexemes(names, boost)
	fuzzy := ix.fuzzyLexemes(names[:callers], boost, shorter, r)
	meaning, hasMeaning := r.QueryMeaning(q)
	var scratch simScratch
	for i, doc := range docs {
		parts := ix.explain(ix.docs[doc], lexemes, shorter, fuzzy, key, r, &scratch)
		if hasMeaning {
			// A document is a candidate without the meaning part when it
			// matched (it then has a part) or when every document is one.
			candidate := len(parts) > 0 || r.TrigramThreshold <= 0
			if p, ok := ix.explainMeaning(doc, &meaning, candidate, r); ok {
				parts = append(parts, p)
			}
		}
		out.Hits[i] = store.ExplainedHit{Hit: hits[i], Parts: parts}
	}
	return out, nil
}

// explainMeaning is rankMeaning for one document.
func (ix *scopeIndex) explainMeaning(doc int32, query *wordvec.Vector, candidate bool, r store.Ranking) (store.ScorePart, bool) {
	if r.MeaningWeight == 0 {
		return store.ScorePart{}, false
	}
	q, ok := ix.queryDirection(query)
	if !ok {
		return store.ScorePart{}, false
	}
	sim := ix.meaningSimilarity(&q, doc)
	if !candidate && sim < float32(r.MeaningFloor) {
		return store.ScorePart{}, false
	}
	return store.ScorePart{
		Kind: store.PartMeaning, Contribution: meaningContribution(r.MeaningWeight, sim),
		Similarity: sim, MeaningWeight: r.MeaningWeight,
	}, true
}

// documentsOf finds the documents of hits, as places in ix.docs. A
// document is its name, description and schema (it is stored by their
// hash), so they name one document of the scope.
func (ix *scopeIndex) documentsOf(hits []store.Hit) ([]int32, error) {
	byName := make(map[string][]int, len(hits))
	for i, h := range hits {
		byName[h.Name] = append(byName[h.Name], i)
	}
	docs := make([]int32, len(hits))
	for i := range docs {
		docs[i] = -1
	}
	for doc, d := range ix.docs {
		for _, i := range byName[d.name] {
			if d.description == hits[i].Description && d.inputSchemaJSON == hits[i].InputSchemaJSON {
				docs[i] = int32(doc)
			}
		}
	}
	for i, doc := range docs {
		if doc < 0 {
			return nil, fmt.Errorf("explain: hit %q is not a document of scope %d", hits[i].Name, ix.id)
		}
	}
	return docs, nil
}

// explain returns the addends of d's score, in the order rankLexical,
// rankShorter, rankFuzzy and rankTrigram add them.
func (ix *scopeIndex) explain(d *document, lexemes []queryLexeme, shorter []shorterLexeme, fuzzy []fuzzyLexeme, key string, r store.Ranking, scratch *simScratch) []store.ScorePart {
	w := rankWeights(r.FieldWeights)
	prefixWeight := float32(r.PrefixWeight)
	var parts []store.ScorePart
	for _, ql := range lexemes {
		lex := ql.lexeme
		isPrefix := utf8.RuneCountInString(lex) >= 3
		// d's entries in byte order, as rankLexical meets them in the
		// scope's lexicon: the lexeme itself, then the longer ones it
		// begins.
		var exact, prefix float32
		part := store.ScorePart{Kind: store.PartPrefix, Lexeme: lex, Words: ql.words, Boost: ql.boost, PrefixWeight: prefixWeight}
		for e := sort.SearchStrings(d.lexemes, lex); e < len(d.lexemes); e++ {
			entry := d.lexemes[e]
			isExact := entry == lex
			if !isExact && (!isPrefix || !strings.HasPrefix(entry, lex)) {
				break
			}
			add := entryRank(&w, d.entryWeights(e))
			prefix = addEntry(prefix, add)
			if isExact {
				exact = addEntry(exact, add)
				part.Kind = store.PartExact
			}
			if part.MatchedCount++; len(part.Matched) < store.MaxMatchedLexemes {
				part.Matched = append(part.Matched, entry)
			}
		}
		if part.MatchedCount == 0 {
			continue
		}
		part.IDF = lnIDF(ix.toolCount, ix.ndoc[lex])
		part.ExactRank = normalize(exact, r.Normalization, &d.analysed)
		part.PrefixRank = normalize(prefix, r.Normalization, &d.analysed)
		part.Contribution = lexemeContribution(ql.boost*part.IDF, part.ExactRank, part.PrefixRank, prefixWeight)
		parts = append(parts, part)
	}
	parts = append(parts, ix.explainShorter(d, lexemes, shorter, r)...)
	parts = append(parts, ix.explainFuzzy(d, lexemes, fuzzy, r)...)
	if p, ok := ix.explainTrigram(d, key, r, scratch); ok {
		parts = append(parts, p)
	}
	return parts
}

// explainShorter is rankShorter for one document.
func (ix *scopeIndex) explainShorter(d *document, lexemes []queryLexeme, shorter []shorterLexeme, r store.Ranking) []store.ScorePart {
	var parts []store.ScorePart
	for _, sl := range shorter {
		idf := lnIDF(ix.toolCount, ix.ndoc[sl.from])
		part, ok := explainLexemeAlone(d, sl.lexeme, sl.boost*idf, float32(r.PrefixWeight), r)
		if !ok {
			continue
		}
		part.Kind, part.Begins, part.Words, part.Boost, part.IDF = store.PartShorter, sl.from, wordsOf(lexemes, sl.from), sl.boost, idf
		part.PrefixWeight = float32(r.PrefixWeight)
		parts = append(parts, part)
	}
	return parts
}

// explainLexemeAlone is rankLexemeAlone for one document: the part's
// lexeme, match, rank and contribution, or false when d does not hold
// the lexeme.
func explainLexemeAlone(d *document, lexeme string, weight float64, scale float32, r store.Ranking) (store.ScorePart, bool) {
	e := sort.SearchStrings(d.lexemes, lexeme)
	if e == len(d.lexemes) || d.lexemes[e] != lexeme {
		return store.ScorePart{}, false
	}
	w := rankWeights(r.FieldWeights)
	part := store.ScorePart{
		Lexeme: lexeme, Matched: []string{lexeme}, MatchedCount: 1,
		PrefixRank: normalize(addEntry(0, entryRank(&w, d.entryWeights(e))), r.Normalization, &d.analysed),
	}
	part.Contribution = lexemeContribution(weight, 0, part.PrefixRank, scale)
	return part, true
}

// wordsOf are the query words reduced to lexeme.
func wordsOf(lexemes []queryLexeme, lexeme string) []string {
	for _, ql := range lexemes {
		if ql.lexeme == lexeme {
			return ql.words
		}
	}
	return nil
}

// explainTrigram is rankTrigram for one document: the same bound on the
// trigrams it shares with the query decides whether it is compared at all,
// and the same threshold whether the similarity counts.
func (ix *scopeIndex) explainTrigram(d *document, key string, r store.Ranking, scratch *simScratch) (store.ScorePart, bool) {
	threshold, weight := float32(r.TrigramThreshold), float32(r.TrigramWeight)
	if key == "" {
		return store.ScorePart{}, false
	}
	q := newTrigramText(key)
	if threshold > 0 {
		shared := 0
		for _, g := range q.set {
			if d.nameTrigrams.contains(g) {
				shared++
			}
		}
		if shared == 0 {
			return store.ScorePart{}, false
		}
		n := float64(shared)
		bound := max(n/float64(len(d.nameTrigrams.set)), n/float64(len(q.set)))
		if bound < float64(threshold)-trigramSlack {
			return store.ScorePart{}, false
		}
	}
	sim := nameSimilarity(d, q, scratch)
	if sim < threshold {
		return store.ScorePart{}, false
	}
	return store.ScorePart{
		Kind: store.PartTrigram, Contribution: trigramContribution(weight, sim),
		NameKey: store.NameKey(d.name), Similarity: sim, TrigramWeight: weight,
	}, true
}
