package postgres_test

import (
	"math/rand/v2"
	"testing"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store/postgres"
)

// levenshtein is the edit distance of a and b in characters, by the
// textbook recurrence.
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			change := 1
			if ra[i-1] == rb[j-1] {
				change = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+change)
		}
	}
	return d[len(ra)][len(rb)]
}

// oneEditApart is Levenshtein distance 1, over short strings of a small
// alphabet (so that most pairs are near) with a character of several
// bytes among its letters.
func TestOneEditApartIsLevenshteinOne(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	letters := []rune("abé")
	word := func() string {
		w := make([]rune, r.IntN(6))
		for i := range w {
			w[i] = letters[r.IntN(len(letters))]
		}
		return string(w)
	}
	ones := 0
	for range 200000 {
		a, b := word(), word()
		if r.IntN(2) == 0 {
			// b one random edit from a, most of the time.
			rb := []rune(a)
			at := r.IntN(len(rb) + 1)
			switch r.IntN(3) {
			case 0:
				rb = append(rb[:at], append([]rune{letters[r.IntN(len(letters))]}, rb[at:]...)...)
			case 1:
				if at < len(rb) {
					rb = append(rb[:at], rb[at+1:]...)
				}
			default:
				if at < len(rb) {
					rb[at] = letters[r.IntN(len(letters))]
				}
			}
			b = string(rb)
		}
		want := levenshtein(a, b) == 1
		if want {
			ones++
		}
		if got := postgres.OneEditApart(a, b); got != want {
			t.Fatalf("oneEditApart(%q, %q) = %v, Levenshtein distance %d", a, b, got, levenshtein(a, b))
		}
	}
	if ones < 10000 {
		t.Fatalf("only %d pairs one edit apart: the test is not testing", ones)
	}
}
