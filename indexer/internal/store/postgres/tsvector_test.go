package postgres_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store/postgres"
)

// The tsvector text a search reads documents from parses to what
// PostgreSQL holds: lexemes with quotes, backslashes, spaces and
// non-ASCII characters, positions with every weight, and entries without
// positions.
func TestParseTSVectorAgreesWithPostgreSQL(t *testing.T) {
	st := env.OpenStore(t)
	for _, input := range []string{
		`'it''s':1A 'back\\slash':2B,3 'two words':4C,9 'nopos' 'ü東京':5,6A,7B,8C`,
		`'a':1 'b':2,3,4,5,6,7,8,9,10`,
		`''''`,
		``,
	} {
		var text string
		if err := st.Pool().QueryRow(t.Context(), `SELECT $1::tsvector::text`, input).Scan(&text); err != nil {
			t.Fatal(err)
		}
		got, length, err := postgres.ParseTSVector(text)
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		rows, err := st.Pool().Query(t.Context(), `SELECT lexeme, coalesce(weights, '{}') FROM unnest($1::tsvector)`, input)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string][]uint8{}
		wantLength := 0
		for rows.Next() {
			var lex string
			var weights []string
			if err := rows.Scan(&lex, &weights); err != nil {
				t.Fatal(err)
			}
			classes := []uint8{0} // no positions: ts_rank counts one of weight D
			if len(weights) > 0 {
				classes = nil
				for _, w := range weights {
					classes = append(classes, map[string]uint8{"A": 3, "B": 2, "C": 1, "D": 0}[w])
				}
			}
			want[lex] = classes
			wantLength += len(classes)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if !maps.EqualFunc(got, want, slices.Equal) || length != wantLength {
			t.Errorf("%q: parsed %v (length %d), PostgreSQL holds %v (length %d)", text, got, length, want, wantLength)
		}
	}
}
