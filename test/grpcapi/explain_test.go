package grpcapi

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/test/grpcapi/example"
)

// testExplainedSearch runs docs/grpc-api.md's explained search against the
// real indexer: an operator's credential gets each hit's score broken into
// parts that add up to it exactly, and the weighted terms of the query; a
// search without explain carries none of that; and every caller that is
// not an operator, the gateway included, is refused.
func testExplainedSearch(t *testing.T, s stack) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := func(token string) indexerv1.IndexerServiceClient {
		conn, err := example.Dial(s.indexer, token, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return indexerv1.NewIndexerServiceClient(conn)
	}
	operator := client(s.operatorToken)
	alice := &commonv1.Principal{Subject: "alice"}

	queries := []*indexerv1.SearchRequest{
		{Query: "add two numbers"},
		{Query: "please echo the arguments back", Keywords: []string{"backend"}},
		{Query: "demo_ad"}, // an identifier, misspelled: trigram similarity
		{Query: "wait for a duration"},
		{Query: "echo arg"}, // "arg" begins "argument": a prefix match
		{Query: "say hello", Limit: 50},
		{Query: "fail", Keywords: []string{"error"}},
		{Query: "the of and"},        // stop words: terms, no hits
		{Query: "failures"},          // "fail" begins "failur": a shorter lexeme
		{Query: "echo the argumnts"}, // "argumnt" is one edit from "argument": a fuzzy lexeme
	}
	kinds := map[indexerv1.ScorePartKind]int{}
	for _, q := range queries {
		q.Principal = alice
		plain, err := operator.Search(ctx, q)
		if err != nil {
			t.Fatalf("Search %q: %v", q.Query, err)
		}
		explainReq := &indexerv1.SearchRequest{Principal: q.Principal, Query: q.Query, Keywords: q.Keywords, Limit: q.Limit, Explain: true}
		explained, err := operator.Search(ctx, explainReq)
		if err != nil {
			t.Fatalf("explained Search %q: %v", q.Query, err)
		}
		if len(plain.GetTerms()) != 0 || plain.GetTrigramKey() != "" {
			t.Errorf("%q without explain carries terms %v, trigram key %q", q.Query, plain.GetTerms(), plain.GetTrigramKey())
		}
		if len(explained.GetTerms()) == 0 {
			t.Errorf("%q explained lists no terms", q.Query)
		}
		// Only the commonest words ("hello" frames a request) have no
		// meaning to compare; "add two numbers" has.
		if hasMeaning := len(explained.GetMeaningWords()) > 0; hasMeaning != (q.Query != "the of and" && q.Query != "say hello") {
			t.Errorf("%q explained: meaning words %v", q.Query, explained.GetMeaningWords())
		}
		if len(explained.GetHits()) != len(plain.GetHits()) {
			t.Fatalf("%q: %d hits explained, %d without explain", q.Query, len(explained.GetHits()), len(plain.GetHits()))
		}
		for i, h := range explained.GetHits() {
			p := plain.GetHits()[i]
			if len(p.GetExplanation()) != 0 {
				t.Errorf("%q without explain: hit %s carries an explanation", q.Query, p.GetName())
			}
			if h.GetName() != p.GetName() || h.GetScore() != p.GetScore() {
				t.Errorf("%q: hit %d is %s %v explained, %s %v without", q.Query, i, h.GetName(), h.GetScore(), p.GetName(), p.GetScore())
			}
			var sum float64
			for _, part := range h.GetExplanation() {
				sum += part.GetContribution()
				kinds[part.GetKind()]++
				if msg := checkPart(part, h, explained); msg != "" {
					t.Errorf("%q: hit %s, part %v: %s", q.Query, h.GetName(), part, msg)
				}
			}
			if sum != h.GetScore() {
				t.Errorf("%q: hit %s scores %v, its parts sum to %v: %v", q.Query, h.GetName(), h.GetScore(), sum, h.GetExplanation())
			}
		}
	}
	for _, kind := range []indexerv1.ScorePartKind{indexerv1.ScorePartKind_SCORE_PART_KIND_EXACT, indexerv1.ScorePartKind_SCORE_PART_KIND_PREFIX,
		indexerv1.ScorePartKind_SCORE_PART_KIND_TRIGRAM, indexerv1.ScorePartKind_SCORE_PART_KIND_MEANING, indexerv1.ScorePartKind_SCORE_PART_KIND_SHORTER,
		indexerv1.ScorePartKind_SCORE_PART_KIND_FUZZY} {
		if kinds[kind] == 0 {
			t.Errorf("no part of kind %s in any explanation (%v): the queries should show every kind", kind, kinds)
		}
	}

	// The words' sources, as the ranking weighs them.
	resp, err := operator.Search(ctx, &indexerv1.SearchRequest{Principal: alice, Query: "please add numbers", Keywords: []string{"sum"}, Explain: true})
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]indexerv1.TermSource{}
	for _, term := range resp.GetTerms() {
		sources[term.GetWord()] = term.GetSource()
	}
	for word, want := range map[string]indexerv1.TermSource{
		"please": indexerv1.TermSource_TERM_SOURCE_FRAMING, "add": indexerv1.TermSource_TERM_SOURCE_QUERY,
		"sum": indexerv1.TermSource_TERM_SOURCE_KEYWORD, "create": indexerv1.TermSource_TERM_SOURCE_SYNONYM,
	} {
		if sources[word] != want {
			t.Errorf("term %s from %s, want %s (terms %v)", word, sources[word], want, resp.GetTerms())
		}
	}

	// Every caller that is not an operator is refused, the principal-
	// asserting gateway and a bound internal client alike, whatever the
	// principal and query: the refusal says nothing about a scope.
	for name, c := range map[string]indexerv1.IndexerServiceClient{"gateway": client(s.gatewayToken), "internal client": client(reportingToken)} {
		for _, req := range []*indexerv1.SearchRequest{
			{Principal: alice, Query: "add two numbers", Explain: true},
			{Principal: &commonv1.Principal{Subject: "mallory", Groups: []string{"admins"}}, Query: "zzzz", Explain: true},
		} {
			if name == "internal client" {
				req.Principal = nil
			}
			_, err := c.Search(ctx, req)
			if status.Code(err) != codes.PermissionDenied || example.Reason(err) != "ERROR_REASON_OPERATOR_ONLY" ||
				!strings.Contains(status.Convert(err).Message(), "operator") {
				t.Errorf("%s explaining %q: %v (reason %q), want PermissionDenied with ERROR_REASON_OPERATOR_ONLY", name, req.GetQuery(), err, example.Reason(err))
			}
		}
		// Without explain, the same caller searches as before.
		req := &indexerv1.SearchRequest{Principal: alice, Query: "add two numbers"}
		if name == "internal client" {
			req.Principal = nil
		}
		resp, err := c.Search(ctx, req)
		if err != nil || len(resp.GetHits()) == 0 || len(resp.GetHits()[0].GetExplanation()) != 0 || len(resp.GetTerms()) != 0 {
			t.Errorf("%s searching without explain: %v, %v", name, resp, err)
		}
	}
}

// checkPart checks that a part is what it says it is: a lexical part names
// a lexeme of its query words, the tool's lexemes it matched begin with
// it, and its contribution follows from its figures; a trigram part
// compares the query's key with the tool's name folded the same way; a
// meaning part is a weighted cosine.
func checkPart(p *indexerv1.ScorePart, h *indexerv1.SearchHit, resp *indexerv1.SearchResponse) string {
	switch p.GetKind() {
	case indexerv1.ScorePartKind_SCORE_PART_KIND_EXACT, indexerv1.ScorePartKind_SCORE_PART_KIND_PREFIX:
		if len(p.GetWords()) == 0 || len(p.GetMatchedLexemes()) == 0 || int(p.GetMatchedLexemeCount()) < len(p.GetMatchedLexemes()) {
			return "no words or matched lexemes"
		}
		for _, w := range p.GetWords() {
			if !slices.ContainsFunc(resp.GetTerms(), func(t *indexerv1.QueryTerm) bool {
				return t.GetWord() == w && slices.Contains(t.GetLexemes(), p.GetLexeme())
			}) {
				return "word " + w + " is not a term reduced to the lexeme"
			}
		}
		exact := p.GetMatchedLexemes()[0] == p.GetLexeme()
		if exact != (p.GetKind() == indexerv1.ScorePartKind_SCORE_PART_KIND_EXACT) {
			return "the kind is not whether the tool holds the lexeme itself"
		}
		for _, m := range p.GetMatchedLexemes() {
			if !strings.HasPrefix(m, p.GetLexeme()) {
				return "matched lexeme " + m + " does not begin with the lexeme"
			}
		}
		// The documented formula, in the documented precision.
		sum := float32(p.GetExactRank()) + float32(float32(p.GetPrefixWeight())*float32(p.GetPrefixRank()))
		if p.GetContribution() != float64(p.GetBoost()*p.GetIdf()*float64(sum)) {
			return "the contribution is not boost × idf × (exact_rank + prefix_weight × prefix_rank)"
		}
	case indexerv1.ScorePartKind_SCORE_PART_KIND_TRIGRAM:
		folded := strings.ToLower(strings.NewReplacer("_", "", "-", "", ".", "").Replace(h.GetName()))
		if resp.GetTrigramKey() == "" || p.GetNameKey() != folded {
			return "the keys are not the query's and the name's"
		}
		if p.GetContribution() != float64(float32(p.GetTrigramWeight())*float32(p.GetSimilarity())) {
			return "the contribution is not trigram_weight × similarity"
		}
	case indexerv1.ScorePartKind_SCORE_PART_KIND_SHORTER:
		if len(p.GetWords()) == 0 || !strings.HasPrefix(p.GetBegins(), p.GetLexeme()) || p.GetBegins() == p.GetLexeme() ||
			len([]rune(p.GetLexeme())) < 4 || len(p.GetMatchedLexemes()) != 1 || p.GetMatchedLexemes()[0] != p.GetLexeme() {
			return "not a lexeme of four characters or more beginning a longer query lexeme"
		}
		for _, w := range p.GetWords() {
			if !slices.ContainsFunc(resp.GetTerms(), func(t *indexerv1.QueryTerm) bool {
				return t.GetWord() == w && slices.Contains(t.GetLexemes(), p.GetBegins())
			}) {
				return "word " + w + " is not a term reduced to the lexeme it begins"
			}
		}
		if p.GetExactRank() != 0 || p.GetContribution() != float64(p.GetBoost()*p.GetIdf()*float64(float32(p.GetPrefixWeight())*float32(p.GetPrefixRank()))) {
			return "the contribution is not boost × idf × prefix_weight × prefix_rank"
		}
	case indexerv1.ScorePartKind_SCORE_PART_KIND_FUZZY:
		if len(p.GetWords()) == 0 || len([]rune(p.GetNear())) < 6 || p.GetNear() == p.GetLexeme() ||
			len(p.GetMatchedLexemes()) != 1 || p.GetMatchedLexemes()[0] != p.GetLexeme() || !oneEdit(p.GetNear(), p.GetLexeme()) {
			return "not a lexeme one edit from a query lexeme of six characters or more"
		}
		for _, w := range p.GetWords() {
			if !slices.ContainsFunc(resp.GetTerms(), func(t *indexerv1.QueryTerm) bool {
				return t.GetWord() == w && slices.Contains(t.GetLexemes(), p.GetNear())
			}) {
				return "word " + w + " is not a term reduced to the lexeme it is near"
			}
		}
		if p.GetExactRank() != 0 || p.GetFuzzyWeight() <= 0 ||
			p.GetContribution() != float64(p.GetBoost()*p.GetIdf()*float64(float32(p.GetFuzzyWeight())*float32(p.GetPrefixRank()))) {
			return "the contribution is not boost × idf × fuzzy_weight × prefix_rank"
		}
	case indexerv1.ScorePartKind_SCORE_PART_KIND_MEANING:
		if len(resp.GetMeaningWords()) == 0 {
			return "a meaning part of a query without meaning words"
		}
		if p.GetSimilarity() < -1.0001 || p.GetSimilarity() > 1.0001 || p.GetMeaningWeight() <= 0 {
			return "the similarity is not a cosine, or the weight is not positive"
		}
		if p.GetContribution() != p.GetMeaningWeight()*p.GetSimilarity() {
			return "the contribution is not meaning_weight × similarity"
		}
	default:
		return "no kind"
	}
	return ""
}

// oneEdit says whether b is a with one character inserted, deleted or
// replaced.
func oneEdit(a, b string) bool {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > len(rb) {
		ra, rb = rb, ra
	}
	if len(rb)-len(ra) > 1 {
		return false
	}
	i := 0
	for i < len(ra) && ra[i] == rb[i] {
		i++
	}
	if len(ra) == len(rb) {
		return i < len(ra) && string(ra[i+1:]) == string(rb[i+1:])
	}
	return string(ra[i:]) == string(rb[i+1:])
}
