package postgres_test

import (
	"math/rand/v2"
	"testing"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store/postgres"
	"github.com/switchboard-mcp/switchboard/indexer/internal/storetest"
)

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
		want := storetest.EditDistance(a, b) == 1
		if want {
			ones++
		}
		if got := postgres.OneEditApart(a, b); got != want {
			t.Fatalf("oneEditApart(%q, %q) = %v, Levenshtein distance %d", a, b, got, storetest.EditDistance(a, b))
		}
	}
	if ones < 10000 {
		t.Fatalf("only %d pairs one edit apart: the test is not testing", ones)
	}
}
