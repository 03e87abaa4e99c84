package main

import (
	"math"
	"strconv"
	"testing"
)

func TestMetrics(t *testing.T) {
	var m metrics
	m.add([]string{"a", "b"}, map[string]bool{"a": true})            // hit at 1
	m.add([]string{"x", "y", "z", "b"}, map[string]bool{"b": true})  // hit at 4
	m.add(nil, map[string]bool{"c": true})                           // zero hits
	m.add([]string{"p", "q"}, map[string]bool{"p": true, "q": true}) // both gold
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }
	if !near(m.percent(m.recall1), 100*(1+0+0+0.5)/4) {
		t.Errorf("Recall@1 %v", m.percent(m.recall1))
	}
	if !near(m.percent(m.recall5), 100*(1+1+0+1)/4) {
		t.Errorf("Recall@5 %v", m.percent(m.recall5))
	}
	if !near(m.percent(m.mrr10), 100*(1+0.25+0+1)/4) {
		t.Errorf("MRR@10 %v", m.percent(m.mrr10))
	}
	if !near(m.percent(m.ndcg10), 100*(1+1/math.Log2(5)+0+1)/4) {
		t.Errorf("NDCG@10 %v", m.percent(m.ndcg10))
	}
	if m.zeroHit != 1 {
		t.Errorf("zero hits %d", m.zeroHit)
	}
}

// TestSplitIsStableAndAQuarter: the held-back quarter depends on the text
// alone and is about a quarter of any large set.
func TestSplitIsStableAndAQuarter(t *testing.T) {
	held := 0
	for i := range 4000 {
		q := "query number " + strconv.Itoa(i)
		if heldBack(q) != heldBack(q) {
			t.Fatal("split is not stable")
		}
		if heldBack(q) {
			held++
		}
	}
	if held < 900 || held > 1100 {
		t.Fatalf("%d of 4000 held back, want about 1000", held)
	}
}

func TestMultiToolQueries(t *testing.T) {
	var m metrics
	m.add([]string{"a", "b", "c"}, map[string]bool{"a": true, "c": true})
	m.add([]string{"a", "x"}, map[string]bool{"a": true, "b": true})
	m.add([]string{"a"}, map[string]bool{"a": true})
	if m.multi != 2 || m.multiAll != 1 {
		t.Fatalf("multi %d, all found %d; want 2 and 1", m.multi, m.multiAll)
	}
}
