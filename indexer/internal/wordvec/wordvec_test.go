package wordvec_test

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/indexer/internal/wordvec"
)

func vector(t *testing.T, tab *wordvec.Table, word string) wordvec.Vector {
	t.Helper()
	var v wordvec.Vector
	if !tab.Add(&v, word, 1) {
		t.Fatalf("the table does not know %q", word)
	}
	return v
}

func cosine(a, b wordvec.Vector) float32 {
	return wordvec.Dot(&a, &b) / (wordvec.Norm(&a) * wordvec.Norm(&b))
}

// The compiled-in table is whole, and its vectors put related words
// closer than unrelated ones.
func TestDefaultTableRelatesWords(t *testing.T) {
	tab := wordvec.Default()
	if tab.Len() != 100_000 {
		t.Fatalf("%d words, want 100,000", tab.Len())
	}
	for _, c := range []struct{ word, near, far string }{
		{"blender", "appliance", "lawsuit"},
		{"puppy", "dog", "invoice"},
		{"horoscope", "astrology", "mortgage"},
		{"condo", "apartment", "vaccine"},
		{"flight", "airline", "recipe"},
	} {
		w := vector(t, tab, c.word)
		near, far := cosine(w, vector(t, tab, c.near)), cosine(w, vector(t, tab, c.far))
		if near <= far+0.2 {
			t.Errorf("%s: %s at %.2f, %s at %.2f", c.word, c.near, near, c.far, far)
		}
	}
}

// Common words weigh nearly nothing, rare ones nearly their whole vector.
func TestWordWeightsFollowFrequency(t *testing.T) {
	tab := wordvec.Default()
	weight := func(w string) float32 {
		x, ok := tab.WordWeight(w)
		if !ok {
			t.Fatalf("the table does not know %q", w)
		}
		return x
	}
	if the, of := weight("the"), weight("of"); the > 0.02 || of > 0.02 {
		t.Errorf("the %.3f, of %.3f: want under 0.02", the, of)
	}
	if w := weight("thermostat"); w < 0.9 {
		t.Errorf("thermostat %.3f: want over 0.9", w)
	}
	if _, ok := tab.WordWeight("qzxwvkj"); ok {
		t.Error("a made-up word is known")
	}
	if w := wordvec.RankWeight(0); w >= wordvec.RankWeight(1000) || wordvec.RankWeight(1000) >= wordvec.RankWeight(100_000) {
		t.Error("RankWeight does not grow with the rank")
	}
	c := tab.Common()
	if n := wordvec.Norm(&c); n < 0.999 || n > 1.001 {
		t.Errorf("Common has length %v", n)
	}
}

// A table reads back as written; a table that is cut short or is
// something else is refused, never read past its end.
func TestParseReadsWhatWriteWrote(t *testing.T) {
	var a, b wordvec.Entry
	a.Word, a.Rank, a.Scale = "alpha", 7, 0.5
	b.Word, b.Rank, b.Scale = "beta", 70_000, 0.25
	for d := range wordvec.Dims {
		a.Vector[d] = int8(d - 50)
		b.Vector[d] = int8(127 - d)
	}
	var buf bytes.Buffer
	if err := wordvec.Write(&buf, []wordvec.Entry{a, b}); err != nil {
		t.Fatal(err)
	}
	tab, err := wordvec.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if tab.Len() != 2 || !tab.Has("alpha") || !tab.Has("beta") || tab.Has("gamma") {
		t.Fatal("words lost")
	}
	for _, e := range []wordvec.Entry{a, b} {
		var v wordvec.Vector
		tab.Add(&v, e.Word, 2)
		weight, _ := tab.WordWeight(e.Word)
		if weight != wordvec.RankWeight(e.Rank) {
			t.Errorf("%s weighs %v, want RankWeight(%d)", e.Word, weight, e.Rank)
		}
		for d := range v {
			if want := 2 * weight * e.Scale * float32(e.Vector[d]); v[d] != want {
				t.Fatalf("%s[%d] = %v, want %v", e.Word, d, v[d], want)
			}
		}
	}
	whole := buf.Bytes()
	for _, n := range []int{0, 5, 13, 20, len(whole) - 1} {
		if _, err := wordvec.Parse(whole[:n]); err == nil {
			t.Errorf("a table cut to %d of %d bytes parsed", n, len(whole))
		}
	}
	if _, err := wordvec.Parse(append(bytes.Clone(whole), 0)); err == nil {
		t.Error("a table with a byte too many parsed")
	}
	wrongDims := bytes.Clone(whole)
	wrongDims[len("SBWV1\n")+4] = 50
	if _, err := wordvec.Parse(wrongDims); err == nil || !strings.Contains(err.Error(), "dimensions") {
		t.Errorf("a table of 50 dimensions: %v", err)
	}
	if err := wordvec.Write(&buf, []wordvec.Entry{{Word: ""}}); err == nil {
		t.Error("an empty word was written")
	}
}

// Dot, however it is computed here, is the dot product: the same as the
// Go loop to single-precision rounding, on vectors of every sign and size.
func TestDotIsTheDotProduct(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		var a, b wordvec.Vector
		scale := float32(math.Pow(10, float64(i%7-3)))
		for d := range a {
			a[d] = scale * float32(r.NormFloat64())
			b[d] = float32(r.NormFloat64())
		}
		if i == 0 {
			a, b = wordvec.Vector{}, wordvec.Vector{}
		}
		var want, size float64
		for d := range a {
			want += float64(a[d]) * float64(b[d])
			size += math.Abs(float64(a[d]) * float64(b[d]))
		}
		if got := float64(wordvec.Dot(&a, &b)); math.Abs(got-want) > 1e-5*size {
			t.Fatalf("Dot = %v, want %v", got, want)
		}
		if got := float64(wordvec.DotGeneric(&a, &b)); math.Abs(got-want) > 1e-5*size {
			t.Fatalf("dotGeneric = %v, want %v", got, want)
		}
	}
	// Each dimension counts, the last four (the tail) included.
	for d := range wordvec.Dims {
		var a, b wordvec.Vector
		a[d], b[d] = 2, 3
		if got := wordvec.Dot(&a, &b); got != 6 {
			t.Fatalf("dimension %d alone: Dot = %v, want 6", d, got)
		}
	}
}

func BenchmarkDot(b *testing.B) {
	var x, y wordvec.Vector
	for d := range x {
		x[d], y[d] = float32(d), float32(wordvec.Dims-d)
	}
	var sink float32
	for b.Loop() {
		sink += wordvec.Dot(&x, &y)
	}
	_ = sink
}
