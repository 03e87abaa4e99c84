package postgres

import (
	"slices"
	"strings"
	"unicode"
)

// This file evaluates pg_trgm's word_similarity in this process. It follows
// generate_trgm_only, calc_word_similarity and iterate_word_similarity in
// contrib/pg_trgm/trgm_op.c (built with IGNORECASE and KEEPONLYALNUM, as
// PostgreSQL ships it): words are runs of letters and digits, lower-cased
// and padded with two blanks in front and one behind, and a trigram is any
// three consecutive characters of a padded word. pg_trgm stores a trigram
// of multibyte characters as a 24-bit hash of its bytes; here it is the
// three characters themselves, so the two agree except where that hash
// collides.

// trigram is three characters, 21 bits each.
type trigram uint64

func makeTrigram(a, b, c rune) trigram {
	return trigram(a)<<42 | trigram(b)<<21 | trigram(c)
}

// trigrams returns the trigrams of s in order, repeats included.
func trigrams(s string) []trigram {
	var out []trigram
	for _, word := range strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		padded := append([]rune{' ', ' '}, []rune(strings.ToLower(word))...)
		padded = append(padded, ' ')
		for i := 0; i+2 < len(padded); i++ {
			out = append(out, makeTrigram(padded[i], padded[i+1], padded[i+2]))
		}
	}
	return out
}

// trigramText is a string's trigrams, prepared once for many comparisons.
type trigramText struct {
	seq []trigram // in order, repeats included
	set []trigram // sorted, unique
}

func newTrigramText(s string) trigramText {
	seq := trigrams(s)
	set := slices.Clone(seq)
	slices.Sort(set)
	return trigramText{seq: seq, set: slices.Compact(set)}
}

func (t trigramText) contains(g trigram) bool {
	_, ok := slices.BinarySearch(t.set, g)
	return ok
}

// wordSimilarity is word_similarity(needle, haystack): the greatest
// similarity between the needle's trigram set and the trigrams of a
// contiguous extent of the haystack. scratch is reused between calls.
func wordSimilarity(needle, haystack trigramText, scratch *simScratch) float32 {
	ulen1 := len(needle.set)
	len2 := len(haystack.seq)
	if ulen1 == 0 || len2 == 0 {
		return 0
	}
	// Number the distinct trigrams of the haystack; found says whether
	// each is one of the needle's.
	scratch.reset(len2)
	index, found, lastpos := scratch.index, scratch.found, scratch.lastpos
	for i, g := range haystack.seq {
		j, seen := scratch.ids[g]
		if !seen {
			j = int32(len(found))
			scratch.ids[g] = j
			found = append(found, needle.contains(g))
			lastpos = append(lastpos, -1)
		}
		index[i] = j
	}
	scratch.found, scratch.lastpos = found, lastpos

	ulen2, count, upper, lower := 0, 0, -1, -1
	var smlrMax float32
	for i := range len2 {
		trg := index[i]
		if lower >= 0 || found[trg] {
			if lastpos[trg] < 0 {
				ulen2++
				if found[trg] {
					count++
				}
			}
			lastpos[trg] = int32(i)
		}
		if !found[trg] {
			continue
		}
		upper = i
		if lower == -1 {
			lower = i
			ulen2 = 1
		}
		smlrCur := calcSml(count, ulen1, ulen2)
		// Try moving the lower bound up for a greater similarity.
		tmpCount, tmpUlen2, prevLower := count, ulen2, lower
		for tmpLower := lower; tmpLower <= upper; tmpLower++ {
			if smlrTmp := calcSml(tmpCount, ulen1, tmpUlen2); smlrTmp > smlrCur {
				smlrCur = smlrTmp
				ulen2 = tmpUlen2
				lower = tmpLower
				count = tmpCount
			}
			t := index[tmpLower]
			if lastpos[t] == int32(tmpLower) {
				tmpUlen2--
				if found[t] {
					tmpCount--
				}
			}
		}
		smlrMax = max(smlrMax, smlrCur)
		for tmpLower := prevLower; tmpLower < lower; tmpLower++ {
			t := index[tmpLower]
			if lastpos[t] == int32(tmpLower) {
				lastpos[t] = -1
			}
		}
	}
	return smlrMax
}

// calcSml is pg_trgm's CALCSML, in single precision.
func calcSml(count, len1, len2 int) float32 {
	return float32(count) / float32(len1+len2-count)
}

// simScratch holds wordSimilarity's working arrays.
type simScratch struct {
	ids     map[trigram]int32
	index   []int32
	found   []bool
	lastpos []int32
}

func (s *simScratch) reset(n int) {
	if s.ids == nil {
		s.ids = map[trigram]int32{}
	}
	clear(s.ids)
	s.index = slices.Grow(s.index[:0], n)[:n]
	s.found = s.found[:0]
	s.lastpos = s.lastpos[:0]
}
