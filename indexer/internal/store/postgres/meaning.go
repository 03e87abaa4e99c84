package postgres

import (
	"math"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
	"github.com/switchboard-mcp/switchboard/indexer/internal/wordvec"
)

// The meaning part of the ranking (store/meaning.go), evaluated on the
// vectors read with a scope: each document's vector is worked out once
// when it is read, and copied into the scope's own matrix in the scope's
// order, with the scope's shared direction and each document's length
// without it, when the scope is read. A search takes the cosine of every
// document of the scope, so it reads the whole matrix; one contiguous
// block is read at the memory's streaming speed, where the documents'
// own vectors, scattered over the heap, cost a cache miss or more each
// (rankMeaning at 10,000 tools: see docs/benchmarks-indexer.md).

// commonPseudoDocs is how many documents' worth of English in general
// (wordvec's Common direction) the shared direction starts from. A scope
// of a handful of tools says little about what tools share, and the sum
// of their own vectors would be mostly what each is about; from a few
// dozen tools on, the scope's own direction dominates.
const commonPseudoDocs = 20

// sharedDirection is the unit direction of the sum of the documents'
// vectors: for texts that all lean one way, the first principal
// direction, which says nothing about any one of them.
func sharedDirection(meanings []wordvec.Vector) wordvec.Vector {
	u := wordvec.Default().Common()
	for i := range u {
		u[i] *= commonPseudoDocs
	}
	for d := range meanings {
		for i, x := range meanings[d] {
			u[i] += x
		}
	}
	if n := wordvec.Norm(&u); n > 0 {
		for i := range u {
			u[i] /= n
		}
	}
	return u
}

// withoutDirection is v with its component along the unit vector u taken
// out.
func withoutDirection(v, u *wordvec.Vector) wordvec.Vector {
	out := *v
	along := wordvec.Dot(v, u)
	for i := range out {
		out[i] -= along * u[i]
	}
	return out
}

// meaningScales are, for each document, 1 / the length of its vector
// without the shared direction (0 for a document whose vector is nothing
// else: it then has no meaning of its own to compare).
func meaningScales(meanings []wordvec.Vector, u *wordvec.Vector) []float32 {
	scales := make([]float32, len(meanings))
	for i := range meanings {
		own := withoutDirection(&meanings[i], u)
		if n := wordvec.Norm(&own); n > 1e-6*wordvec.Norm(&meanings[i]) {
			scales[i] = 1 / n
		}
	}
	return scales
}

// queryDirection is the query's vector without the scope's shared
// direction, of unit length; ok is false when nothing is left of it.
func (ix *scopeIndex) queryDirection(v *wordvec.Vector) (q wordvec.Vector, ok bool) {
	q = withoutDirection(v, &ix.direction)
	n := wordvec.Norm(&q)
	if n == 0 || math.IsNaN(float64(n)) {
		return q, false
	}
	for i := range q {
		q[i] /= n
	}
	return q, true
}

// meaningSimilarity is the cosine of the query direction q and document
// doc's vector, both without the shared direction (q ⊥ it, so the dot
// product with the whole vector is the dot product with the rest).
func (ix *scopeIndex) meaningSimilarity(q *wordvec.Vector, doc int32) float32 {
	return wordvec.Dot(q, &ix.meanings[doc]) * ix.meaningScale[doc]
}

// meaningContribution is what a similarity adds to a score. The
// conversion rounds the product before the caller adds it, so that the
// part an explanation shows is the addend the score got (see
// lexemeContribution).
func meaningContribution(weight float64, similarity float32) float64 {
	return float64(weight * float64(similarity))
}

// rankMeaning adds every candidate's meaning part, and makes a candidate
// of every other document whose similarity reaches the floor.
func (ix *scopeIndex) rankMeaning(sc *scratch, query *wordvec.Vector, r store.Ranking) {
	if r.MeaningWeight == 0 {
		return
	}
	q, ok := ix.queryDirection(query)
	if !ok {
		return
	}
	floor := float32(r.MeaningFloor)
	for doc := range ix.docs {
		sim := ix.meaningSimilarity(&q, int32(doc))
		if !sc.candidate[doc] {
			if sim < floor {
				continue
			}
			sc.mark(int32(doc))
		}
		sc.score[doc] += meaningContribution(r.MeaningWeight, sim)
	}
}
