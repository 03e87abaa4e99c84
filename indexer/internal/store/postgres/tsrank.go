package postgres

import "math"

// This file evaluates PostgreSQL's ts_rank in this process, on the lexemes
// and weights PostgreSQL itself analysed a document into (see tsvector.go),
// so that a search ranks exactly as ts_rank(weights, tsv, query,
// normalization) would, for the one-lexeme queries ('lexeme' and
// 'lexeme':*) a search asks. It follows calc_rank_or and calc_rank in
// src/backend/utils/adt/tsrank.c, including their mix of single and
// double precision.

// ts_rank's document-length normalization flags.
const (
	rankNormLogLength = 0x01
	rankNormLength    = 0x02
	rankNormUniq      = 0x08
	rankNormLogUniq   = 0x10
	rankNormRDivRPlus = 0x20
)

// defaultFieldWeights are ts_rank's own weights for D, C, B, A, used for a
// negative weight passed in.
var defaultFieldWeights = [4]float32{0.1, 0.2, 0.4, 1.0}

// rankWeights resolves the field weights the way ts_rank's getWeights does.
func rankWeights(w [4]float32) [4]float32 {
	for i := range w {
		if w[i] < 0 {
			w[i] = defaultFieldWeights[i]
		}
	}
	return w
}

// entryRank is one matched tsvector entry's addend in calc_rank_or, before
// the division by pi^2/6: weights are the weight classes (0 = D … 3 = A)
// of the entry's positions, in position order.
func entryRank(w *[4]float32, weights []uint8) float32 {
	var resj float32
	wjm := float32(-1)
	jm := 0
	for j, class := range weights {
		wp := w[class]
		resj = resj + wp/float32((j+1)*(j+1))
		if wp > wjm {
			wjm = wp
			jm = j
		}
	}
	return wjm + resj - wjm/float32((jm+1)*(jm+1))
}

// addEntry adds one matched entry to calc_rank_or's running result, in
// double precision and rounded back to single as C does.
func addEntry(res, entry float32) float32 {
	return float32(float64(res) + float64(entry)/1.64493406685)
}

// normalize applies calc_rank's normalization to a one-operand query's
// result on document a.
func normalize(res float32, method int, a *analysed) float32 {
	lexemes := len(a.lexemes)
	if lexemes == 0 {
		return 0
	}
	if res < 0 {
		res = 1e-20
	}
	if method&rankNormLogLength != 0 {
		res = float32(float64(res) / a.logLength)
	}
	if method&rankNormLength != 0 && a.length > 0 {
		res /= float32(a.length)
	}
	if method&rankNormUniq != 0 {
		res /= float32(lexemes)
	}
	if method&rankNormLogUniq != 0 {
		res = float32(float64(res) / a.logLexemes)
	}
	if method&rankNormRDivRPlus != 0 {
		res /= res + 1
	}
	return res
}

// logLength is calc_rank's log-length divisor, log2(n + 1) computed as C
// does, for n positions or lexemes.
func logLength(n int) float64 { return math.Log(float64(n+1)) / math.Log(2.0) }
