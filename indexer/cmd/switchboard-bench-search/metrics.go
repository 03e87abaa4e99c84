package main

import "math"

// metrics accumulates retrieval quality over queries.
type metrics struct {
	queries                    int
	recall1, recall5, recall10 float64
	ndcg10, mrr10              float64
	zeroHit                    int
	// multi counts the queries with more than one gold tool, multiAll
	// those of them with every gold tool in the top 10.
	multi, multiAll int
}

// add scores one query: ranked is the returned names, best first; gold is
// the set of relevant names.
func (m *metrics) add(ranked []string, gold map[string]bool) {
	m.queries++
	if len(ranked) == 0 {
		m.zeroHit++
	}
	recallAt := func(k int) float64 {
		found := 0
		for i := 0; i < k && i < len(ranked); i++ {
			if gold[ranked[i]] {
				found++
			}
		}
		return float64(found) / float64(len(gold))
	}
	m.recall1 += recallAt(1)
	m.recall5 += recallAt(5)
	m.recall10 += recallAt(10)
	if len(gold) > 1 {
		m.multi++
		if recallAt(10) == 1 {
			m.multiAll++
		}
	}
	var dcg, ideal float64
	for i := 0; i < 10 && i < len(ranked); i++ {
		if gold[ranked[i]] {
			dcg += 1 / math.Log2(float64(i+2))
		}
	}
	for i := 0; i < 10 && i < len(gold); i++ {
		ideal += 1 / math.Log2(float64(i+2))
	}
	m.ndcg10 += dcg / ideal
	for i := 0; i < 10 && i < len(ranked); i++ {
		if gold[ranked[i]] {
			m.mrr10 += 1 / float64(i+1)
			break
		}
	}
}

// percent returns a mean as a percentage.
func (m *metrics) percent(sum float64) float64 {
	if m.queries == 0 {
		return 0
	}
	return 100 * sum / float64(m.queries)
}

// heldBack reports whether a query belongs to the held-back quarter of a
// split: decided by a hash of its text alone (FNV-1a), so the split is the
// same on every run and machine and independent of the file's order.
func heldBack(text string) bool {
	h := uint32(2166136261)
	for i := 0; i < len(text); i++ {
		h ^= uint32(text[i])
		h *= 16777619
	}
	return h%4 == 0
}
