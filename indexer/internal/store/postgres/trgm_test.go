package postgres_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store/postgres"
)

// word_similarity in the indexer equals pg_trgm's, on name keys and
// queries of every shape: misspellings, repeats, digits, several words,
// non-ASCII letters, empty strings.
func TestWordSimilarityAgreesWithPgTrgm(t *testing.T) {
	st := env.OpenStore(t)
	pairs := [][2]string{
		{"weathergetforecast", "wethergetforcast"}, {"githubcreateissue", "githubcreateissue"}, {"tool", "b3tool0042"},
		{"aaaaaaa", "aaa"}, {"abcabcabc", "cab"}, {"", "x"}, {"x", ""}, {"", ""}, {"a", "a"},
		{"get weather now", "weather"}, {"café", "cafe"}, {"東京天気", "東京"}, {"grüße", "grusse"},
		{"s3upload2bucket", "s3 upload bucket"}, {"ab ba ab", "abba"},
	}
	r := rand.New(rand.NewPCG(3, 3))
	alphabet := []rune("abcdeé12 ")
	word := func() string {
		var b strings.Builder
		for range 1 + r.IntN(14) {
			b.WriteRune(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	for range 400 {
		pairs = append(pairs, [2]string{word(), word()})
	}
	for _, p := range pairs {
		var want float32
		if err := st.Pool().QueryRow(t.Context(), `SELECT word_similarity($1, $2)`, p[0], p[1]).Scan(&want); err != nil {
			t.Fatal(err)
		}
		if got := postgres.WordSimilarity(p[0], p[1]); got != want {
			t.Errorf("word_similarity(%q, %q) = %v, pg_trgm says %v", p[0], p[1], got, want)
		}
	}
}
