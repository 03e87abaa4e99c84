package postgres

// Hooks for the tests of package postgres_test.

// ScopeReadSQL is the statements that read a scope for searching, and an
// example of the arguments of each given a scope id and its members.
func ScopeReadSQL(scopeID int64, members []int64) map[string][]any {
	return map[string][]any{
		scopeMembersSQL:   {scopeID},
		scopeDocumentsSQL: {members},
		scopeLexemesSQL:   {scopeID},
	}
}

// ParseTSVector is parseTSVector, as lexemes with the weight classes of
// their positions, and cnt_length.
func ParseTSVector(text string) (map[string][]uint8, int, error) {
	a, err := parseTSVector(text)
	if err != nil {
		return nil, 0, err
	}
	out := map[string][]uint8{}
	for i, lex := range a.lexemes {
		out[lex] = a.entryWeights(i)
	}
	return out, a.length, nil
}

// WordSimilarity is pg_trgm's word_similarity(a, b) as a search computes
// it.
func WordSimilarity(a, b string) float32 {
	var scratch simScratch
	return wordSimilarity(newTrigramText(a), newTrigramText(b), &scratch)
}

// ScopeKey is scopeKey: what a scope of a view digest is stored under.
var ScopeKey = scopeKey

// OneEditApart is oneEditApart.
var OneEditApart = oneEditApart

// QueryTracer is the store's pgx tracer, for tests of its spans.
type QueryTracer = tracer
