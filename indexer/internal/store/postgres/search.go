package postgres

import (
	"context"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// Search ranks the documents of scope against q. The ranking is the one
// the index was tuned with (docs/benchmarks-indexer.md), evaluated here on
// what PostgreSQL analysed (tsvector lexemes and weights, the scope's
// lexeme statistics, the words of the query stemmed by PostgreSQL):
//
//   - Every query lexeme is ORed: a document holding any of them (as a
//     prefix, for lexemes of three characters or more) is a candidate, and
//     so is one holding a shorter lexeme of four characters or more that
//     begins one ("repo" for "repositori"; rankShorter), and so is one
//     holding a lexeme one edit from a lexeme of the caller's words that
//     the scope holds no other way ("strolog" for "astrolog"; fuzzy.go).
//   - A matched lexeme adds boost × IDF × (ts_rank of the lexeme +
//     PrefixWeight × ts_rank of the lexeme as a prefix), with the IDF
//     ln(1 + (N − n + 0.5) / (n + 0.5)) from the scope's own statistics;
//     a shorter lexeme adds its query lexeme's boost × IDF × PrefixWeight
//     × its ts_rank, a fuzzy one its query lexeme's boost × its own IDF ×
//     FuzzyWeight × its ts_rank.
//   - For a short, identifier-like query, the greater word_similarity
//     between the query folded to one token and the document's name key
//     adds TrigramWeight × similarity when it reaches TrigramThreshold,
//     and makes the document a candidate by itself.
//   - The cosine of the query's and the document's vectors of meaning
//     (meaning.go) adds MeaningWeight × cosine to every candidate, and
//     makes a candidate of a document whose cosine reaches MeaningFloor.
//
// Hits are the best candidates, ties in name order. The reference SQL of
// the ranking by words is in ranking_reference_test.go, which checks the
// two agree.
func (s *Store) Search(ctx context.Context, scope store.Scope, q store.Query, r store.Ranking) ([]store.Hit, error) {
	terms, boosts, own, key := r.CallerTerms(q)
	if len(terms) == 0 || q.Limit <= 0 {
		return nil, nil
	}
	ix, err := s.scopeIndex(ctx, scope.ID)
	if err != nil {
		return nil, err
	}
	stems, err := s.lexemes(ctx, terms)
	if err != nil {
		return nil, err
	}
	// A lexeme reached from several words weighs as the heaviest of them.
	// The caller's own words come first, so their lexemes are the first
	// callerLexemes met.
	var lexemes []string
	boost := map[string]float64{}
	callerLexemes := 0
	for i, lexs := range stems {
		for _, lex := range lexs {
			if old, ok := boost[lex]; !ok {
				lexemes = append(lexemes, lex)
				boost[lex] = boosts[i]
			} else if boosts[i] > old {
				boost[lex] = boosts[i]
			}
		}
		if i < own {
			callerLexemes = len(lexemes)
		}
	}
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	sc.reset(len(ix.docs))
	ix.rankLexical(sc, lexemes, boost, r)
	shorter := ix.shorterLexemes(lexemes, boost)
	ix.rankShorter(sc, shorter, r)
	ix.rankFuzzy(sc, ix.fuzzyLexemes(lexemes[:callerLexemes], boost, shorter, r), r)
	ix.rankTrigram(sc, key, r)
	if meaning, ok := r.QueryMeaning(q); ok {
		ix.rankMeaning(sc, &meaning, r)
	}
	return ix.top(sc, q.Limit), nil
}

// scratch is one search's working state, pooled between searches.
type scratch struct {
	score []float64
	// candidate marks documents that matched; matched lists them.
	candidate []bool
	matched   []int32
	trgm      []float32
	// exact and prefix are calc_rank_or's running results for one lexeme.
	exact, prefix []float32
	// stamp[doc] == lexeme marks a document touched by the current
	// lexeme (numbered from 1); touched lists them.
	stamp   []int32
	lexeme  int32
	touched []int32
	// shared counts the trigrams a name key shares with the query.
	shared []int32
	sim    simScratch
}

var scratchPool = sync.Pool{New: func() any { return &scratch{} }}

func (sc *scratch) reset(n int) {
	grow := func(s []float32) []float32 {
		if cap(s) < n {
			return make([]float32, n)
		}
		s = s[:n]
		clear(s)
		return s
	}
	if cap(sc.score) < n {
		sc.score = make([]float64, n)
		sc.candidate = make([]bool, n)
		sc.shared = make([]int32, n)
		sc.stamp = make([]int32, n)
	}
	sc.score, sc.candidate, sc.shared, sc.stamp = sc.score[:n], sc.candidate[:n], sc.shared[:n], sc.stamp[:n]
	clear(sc.score)
	clear(sc.candidate)
	clear(sc.shared)
	clear(sc.stamp)
	sc.lexeme = 0
	sc.trgm, sc.exact, sc.prefix = grow(sc.trgm), grow(sc.exact), grow(sc.prefix)
	sc.matched, sc.touched = sc.matched[:0], sc.touched[:0]
}

func (sc *scratch) mark(doc int32) {
	if !sc.candidate[doc] {
		sc.candidate[doc] = true
		sc.matched = append(sc.matched, doc)
	}
}

// rankLexical adds every lexeme's contribution to the documents holding
// it. Entries are visited in lexeme order, as ts_rank visits a document's
// entries, so that the single-precision sums come out the same.
func (ix *scopeIndex) rankLexical(sc *scratch, lexemes []string, boost map[string]float64, r store.Ranking) {
	w := rankWeights(r.FieldWeights)
	ranked := w == ix.rankWeights
	prefixWeight := float32(r.PrefixWeight)
	for _, lex := range lexemes {
		isPrefix := utf8.RuneCountInString(lex) >= 3
		n := ix.ndoc[lex]
		idf := lnIDF(ix.toolCount, n)
		weight := boost[lex] * idf
		sc.touched = sc.touched[:0]
		sc.lexeme++
		first := sort.SearchStrings(ix.lexicon, lex)
		for e := first; e < len(ix.lexicon); e++ {
			entry := ix.lexicon[e]
			exact := entry == lex
			if !exact && (!isPrefix || !strings.HasPrefix(entry, lex)) {
				break
			}
			for _, p := range ix.postings[e] {
				add := p.rank
				if !ranked {
					add = entryRank(&w, ix.docs[p.doc].entryWeights(int(p.entry)))
				}
				if sc.stamp[p.doc] != sc.lexeme {
					sc.stamp[p.doc] = sc.lexeme
					sc.touched = append(sc.touched, p.doc)
				}
				sc.prefix[p.doc] = addEntry(sc.prefix[p.doc], add)
				if exact {
					sc.exact[p.doc] = addEntry(sc.exact[p.doc], add)
				}
			}
		}
		for _, doc := range sc.touched {
			d := ix.docs[doc]
			exact := normalize(sc.exact[doc], r.Normalization, &d.analysed)
			prefix := normalize(sc.prefix[doc], r.Normalization, &d.analysed)
			// ts_rank is single precision, and so are the weights the SQL
			// definition of the ranking multiplies it with.
			sc.score[doc] += lexemeContribution(weight, exact, prefix, prefixWeight)
			sc.exact[doc], sc.prefix[doc] = 0, 0
			sc.mark(doc)
		}
	}
}

// minShorterRunes is the length of the shortest lexeme that matches a
// longer query lexeme it begins: "repo" for "repositori", "calc" for
// "calcul"; three letters begin too many words that mean something else.
const minShorterRunes = 4

// shorterLexeme is a lexeme of the scope that begins a longer query
// lexeme without being one: the tool holds a shorter form of the word
// ("repo" in RepoTool for "repositories"). It weighs as the heaviest query
// lexeme it begins, the first in byte order of equals (from: its boost and
// IDF), times PrefixWeight, as a match by prefix does the other way round.
type shorterLexeme struct {
	lexeme string
	from   string
	boost  float64
	// begins are the query lexemes it begins, for explanations.
	begins []string
}

// shorterLexemes are the scope's lexemes of at least minShorterRunes that
// begin a longer query lexeme and are not query lexemes themselves, in
// the order of the query lexemes they begin (the longest first for each).
func (ix *scopeIndex) shorterLexemes(lexemes []string, boost map[string]float64) []shorterLexeme {
	var out []shorterLexeme
	at := map[string]int{}
	for _, lex := range lexemes {
		runes := []rune(lex)
		for n := len(runes) - 1; n >= minShorterRunes; n-- {
			p := string(runes[:n])
			if _, isQuery := boost[p]; isQuery {
				continue
			}
			if e := sort.SearchStrings(ix.lexicon, p); e == len(ix.lexicon) || ix.lexicon[e] != p {
				continue
			}
			if i, ok := at[p]; ok {
				if b := boost[lex]; b > out[i].boost || (b == out[i].boost && lex < out[i].from) {
					out[i].from, out[i].boost = lex, b
				}
				out[i].begins = append(out[i].begins, lex)
				continue
			}
			at[p] = len(out)
			out = append(out, shorterLexeme{lexeme: p, from: lex, boost: boost[lex], begins: []string{lex}})
		}
	}
	return out
}

// rankShorter adds each shorter lexeme's contribution to the documents
// holding it, after every query lexeme's: boost × IDF (of the query
// lexeme it weighs as) × PrefixWeight × ts_rank of the shorter lexeme, as
// a prefix rank is added.
func (ix *scopeIndex) rankShorter(sc *scratch, shorter []shorterLexeme, r store.Ranking) {
	for _, sl := range shorter {
		e := sort.SearchStrings(ix.lexicon, sl.lexeme)
		ix.rankLexemeAlone(sc, e, sl.boost*lnIDF(ix.toolCount, ix.ndoc[sl.from]), float32(r.PrefixWeight), r)
	}
}

// rankLexemeAlone adds weight × (scale × ts_rank of the lexeme alone) to
// every document holding the scope's lexeme lexicon[e], and makes each a
// candidate: how a shorter or a fuzzy lexeme counts.
func (ix *scopeIndex) rankLexemeAlone(sc *scratch, e int, weight float64, scale float32, r store.Ranking) {
	w := rankWeights(r.FieldWeights)
	ranked := w == ix.rankWeights
	for _, p := range ix.postings[e] {
		add := p.rank
		if !ranked {
			add = entryRank(&w, ix.docs[p.doc].entryWeights(int(p.entry)))
		}
		d := ix.docs[p.doc]
		rank := normalize(addEntry(0, add), r.Normalization, &d.analysed)
		sc.score[p.doc] += lexemeContribution(weight, 0, rank, scale)
		sc.mark(p.doc)
	}
}

// lnIDF is the inverse document frequency of a lexeme n of the scope's
// toolCount documents hold.
func lnIDF(toolCount, n int) float64 {
	return math.Log(1 + (float64(toolCount-n)+0.5)/(float64(n)+0.5))
}

// trigramSlack absorbs single-precision rounding in the bound below which
// a document's trigram similarity is not computed at all.
const trigramSlack = 1e-6

// rankTrigram adds the trigram similarity of the query key and each
// document's name key where it reaches the threshold. A similarity can
// only reach it if the two share at least threshold × the trigrams of one
// of them (word_similarity(a, b) <= shared / |trigrams of a|), so the
// documents sharing too few are never compared.
func (ix *scopeIndex) rankTrigram(sc *scratch, key string, r store.Ranking) {
	// Similarities, and the weight and threshold they meet, are single
	// precision, as in pg_trgm and the SQL definition of the ranking.
	threshold, weight := float32(r.TrigramThreshold), float32(r.TrigramWeight)
	if threshold <= 0 {
		// Every similarity reaches it, zero included: every document is a
		// candidate.
		for doc := range ix.docs {
			sc.mark(int32(doc))
		}
	}
	if key == "" {
		return
	}
	q := newTrigramText(key)
	consider := func(doc int32) {
		d := ix.docs[doc]
		sim := nameSimilarity(d, q, &sc.sim)
		if sim >= threshold {
			sc.score[doc] += trigramContribution(weight, sim)
			sc.mark(doc)
		}
	}
	if threshold <= 0 {
		for doc := range ix.docs {
			consider(int32(doc))
		}
		return
	}
	var sharing []int32
	for _, g := range q.set {
		for _, doc := range ix.byTrigram[g] {
			if sc.shared[doc] == 0 {
				sharing = append(sharing, doc)
			}
			sc.shared[doc]++
		}
	}
	for _, doc := range sharing {
		n := float64(sc.shared[doc])
		bound := max(n/float64(len(ix.docs[doc].nameTrigrams.set)), n/float64(len(q.set)))
		if bound >= float64(threshold)-trigramSlack {
			consider(doc)
		}
	}
}

// top returns the limit best candidates: highest score first, then by
// name (byte order, PostgreSQL's C collation), then by document, the two
// worked out once per scope as nameOrder. It keeps the best seen so far in
// a heap whose root is the worst of them, so most candidates cost one
// comparison with the root.
func (ix *scopeIndex) top(sc *scratch, limit int) []store.Hit {
	// order < 0: a ranks before b.
	order := func(a, b int32) int {
		if sa, sb := sc.score[a], sc.score[b]; sa != sb {
			if sa > sb {
				return -1
			}
			return 1
		}
		return int(ix.nameOrder[a] - ix.nameOrder[b])
	}
	heap := make([]int32, 0, min(limit, len(sc.matched)))
	down := func(i int) {
		for {
			worst, l, r := i, 2*i+1, 2*i+2
			if l < len(heap) && order(heap[l], heap[worst]) > 0 {
				worst = l
			}
			if r < len(heap) && order(heap[r], heap[worst]) > 0 {
				worst = r
			}
			if worst == i {
				return
			}
			heap[i], heap[worst] = heap[worst], heap[i]
			i = worst
		}
	}
	for _, doc := range sc.matched {
		if len(heap) < limit {
			heap = append(heap, doc)
			for i := len(heap) - 1; i > 0; {
				parent := (i - 1) / 2
				if order(heap[i], heap[parent]) <= 0 {
					break
				}
				heap[i], heap[parent] = heap[parent], heap[i]
				i = parent
			}
			continue
		}
		if order(doc, heap[0]) < 0 {
			heap[0] = doc
			down(0)
		}
	}
	slices.SortFunc(heap, order)
	hits := make([]store.Hit, len(heap))
	for i, doc := range heap {
		d := ix.docs[doc]
		hits[i] = store.Hit{Name: d.name, Description: d.description, InputSchemaJSON: d.inputSchemaJSON, MetaJSON: d.metaJSON,
			Title: d.title, AnnotationsJSON: d.annotationsJSON, OutputSchemaJSON: d.outputSchemaJSON, Score: sc.score[doc]}
	}
	return hits
}
