package postgres_test

import (
	"math"
	"slices"
	"testing"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
	"github.com/switchboard-mcp/switchboard/indexer/internal/storetest"
	"github.com/switchboard-mcp/switchboard/indexer/internal/wordvec"
)

// The meaning part of every explained hit is the cosine of the query's
// and the tool's vectors with the scope's shared direction taken out of
// both, worked out here again in double precision from the definition:
// the direction is that of 20 × wordvec's Common direction plus the sum of
// the scope's tool vectors. Every candidate by words gets the part; a tool
// that matched no word is a hit only at MeaningFloor or above.
func TestMeaningIsTheCosine(t *testing.T) {
	st := env.OpenStore(t)
	ctx := t.Context()
	scopes := map[string][]store.Tool{
		"weather":   slices.Clone(storetest.WeatherTools),
		"synthetic": storetest.SyntheticTools(400, 3),
	}
	r := store.DefaultRanking
	alone, compared := 0, 0
	for name, tools := range scopes {
		sc, _, err := st.BuildScope(ctx, "meaning-"+name, 1, tools)
		if err != nil {
			t.Fatal(err)
		}
		vectors := map[string][]float64{}
		direction := make([]float64, wordvec.Dims)
		common := wordvec.Default().Common()
		for i := range direction {
			direction[i] = 20 * float64(common[i])
		}
		for _, tool := range tools {
			v := store.DocumentMeaning(tool.Name, tool.Description, tool.InputSchemaJSON)
			vectors[tool.Name] = float64s(v)
			for i, x := range v {
				direction[i] += float64(x)
			}
		}
		unit(direction)
		for _, q := range storetest.ExplainQueries(60, 5) {
			q.Limit = 50
			ex, err := st.SearchExplained(ctx, sc, q, r)
			if err != nil {
				t.Fatal(err)
			}
			qv, ok := r.QueryMeaning(q)
			if ok != (len(ex.MeaningWords) > 0) {
				t.Errorf("%q: QueryMeaning ok %v, meaning words %v", q.Text, ok, ex.MeaningWords)
			}
			query := unit(without(float64s(qv), direction))
			for _, h := range ex.Hits {
				i := slices.IndexFunc(h.Parts, func(p store.ScorePart) bool { return p.Kind == store.PartMeaning })
				if !ok {
					if i >= 0 {
						t.Errorf("%q: %s has a meaning part, the query none", q.Text, h.Name)
					}
					continue
				}
				if i < 0 {
					t.Errorf("%q: %s has no meaning part", q.Text, h.Name)
					continue
				}
				doc := unit(without(vectors[h.Name], direction))
				var want float64
				for d := range doc {
					want += query[d] * doc[d]
				}
				if got := float64(h.Parts[i].Similarity); math.Abs(got-want) > 1e-4 {
					t.Errorf("%q: %s similarity %v, the cosine is %v", q.Text, h.Name, got, want)
				}
				if len(h.Parts) == 1 {
					alone++
					if h.Parts[0].Similarity < float32(r.MeaningFloor) {
						t.Errorf("%q: %s a hit by meaning alone below the floor", q.Text, h.Name)
					}
				}
				compared++
			}
		}
	}
	t.Logf("%d similarities compared, %d hits by meaning alone", compared, alone)
	if compared < 1000 || alone == 0 {
		t.Fatalf("compared %d similarities, %d hits by meaning alone: too few to say anything", compared, alone)
	}
}

func float64s(v wordvec.Vector) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func unit(v []float64) []float64 {
	var n float64
	for _, x := range v {
		n += x * x
	}
	n = math.Sqrt(n)
	for i := range v {
		v[i] /= n
	}
	return v
}

func without(v, u []float64) []float64 {
	var along float64
	for i := range v {
		along += v[i] * u[i]
	}
	out := make([]float64, len(v))
	for i := range v {
		out[i] = v[i] - along*u[i]
	}
	return out
}
