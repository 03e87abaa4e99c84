package storetest

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// WeatherTools are four tools of different shapes: snake_case, camelCase,
// dotted and dashed names, with and without parameters.
var WeatherTools = []store.Tool{
	{Name: "weather_get_forecast", Description: "Get the weather forecast for a city.", InputSchemaJSON: `{"type":"object","properties":{"city":{"type":"string","description":"City name"}}}`},
	{Name: "github_createIssue", Description: "Open a new issue in a repository.", InputSchemaJSON: `{"type":"object","properties":{"repo":{"type":"string"},"title":{"type":"string"}}}`},
	{Name: "slack.post-message", Description: "Post a message to a channel.", InputSchemaJSON: `{"type":"object","properties":{"channel":{"type":"string"}}}`},
	{Name: "calendar_list_events", Description: "List upcoming events from the calendar.", InputSchemaJSON: `{"type":"object"}`},
}

// HitNames are the names of hits, in order.
func HitNames(hits []store.Hit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, h.Name)
	}
	return out
}

func search(t *testing.T, st store.Store, sc store.Scope, text string, keywords ...string) []string {
	t.Helper()
	hits, err := st.Search(t.Context(), sc, store.Query{Text: text, Keywords: keywords, Limit: 8}, store.DefaultRanking)
	if err != nil {
		t.Fatalf("search %q: %v", text, err)
	}
	return HitNames(hits)
}

// searchByWords is search without the meaning part of the ranking.
func searchByWords(t *testing.T, st store.Store, sc store.Scope, text string) []string {
	t.Helper()
	r := store.DefaultRanking
	r.MeaningWeight = 0
	hits, err := st.Search(t.Context(), sc, store.Query{Text: text, Limit: 8}, r)
	if err != nil {
		t.Fatalf("search %q: %v", text, err)
	}
	return HitNames(hits)
}

func build(t *testing.T, st store.Store, digest string, tools []store.Tool) store.Scope {
	t.Helper()
	sc, _, err := st.BuildScope(t.Context(), digest, 1, tools)
	if err != nil {
		t.Fatalf("build %s: %v", digest, err)
	}
	return sc
}

func migrateIsIdempotent(t *testing.T, b Backing) {
	st := b.Open(t)
	if _, err := st.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, err := st.Migrate(t.Context()); err != nil || n != 0 {
		t.Fatalf("second migration applied %d steps (%v), want 0", n, err)
	}
}

// Documents are content-addressed: a document two scopes list is stored
// once, and each scope sees only its own documents.
func documentsStoredOnceAcrossScopes(t *testing.T, b Backing) {
	st := b.Open(t)
	ctx := t.Context()
	// Catalog versions are content-derived uint64s: half are above 2^63,
	// and they come back as they went in.
	const versionA, versionB = 1<<63 | 7, 1<<64 - 1
	a, built, err := st.BuildScope(ctx, "digest-a", versionA, WeatherTools[:3])
	if err != nil || !built {
		t.Fatalf("build a: built=%v err=%v", built, err)
	}
	bs, built, err := st.BuildScope(ctx, "digest-b", versionB, WeatherTools[1:])
	if err != nil || !built || bs.CatalogVersion != versionB {
		t.Fatalf("build b: %+v built=%v err=%v", bs, built, err)
	}
	again, built, err := st.BuildScope(ctx, "digest-a", 2, WeatherTools)
	if err != nil || built || again.ID != a.ID || again.ToolCount != 3 || again.CatalogVersion != versionA {
		t.Fatalf("rebuild of an existing digest: %+v built=%v err=%v", again, built, err)
	}
	looked, err := st.LookupScope(ctx, "digest-b")
	if err != nil || looked != bs {
		t.Fatalf("lookup: %+v (%v), want %+v", looked, err, bs)
	}
	stats, err := st.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Documents != 4 || stats.Scopes != 2 || stats.ScopeBuilds != 2 {
		t.Fatalf("stats %+v, want 4 documents, 2 scopes, 2 builds", stats)
	}
	if a.BaselineTokens <= 0 || bs.ToolCount != 3 {
		t.Fatalf("scopes %+v %+v", a, bs)
	}
	if got := search(t, st, a, "list calendar events"); slices.Contains(got, "calendar_list_events") {
		t.Fatalf("scope a found a tool outside it: %v", got)
	}
	if got := search(t, st, bs, "list calendar events"); len(got) == 0 || got[0] != "calendar_list_events" {
		t.Fatalf("scope b: %v", got)
	}
}

// Concurrent builds of one digest, through different handles (replicas),
// build it once.
func buildsOfOneDigestBuildOnce(t *testing.T, b Backing) {
	handles := []store.Store{b.Open(t), b.Open(t)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ids []int64
	builds := 0
	for i := range 8 {
		wg.Go(func() {
			sc, built, err := handles[i%2].BuildScope(t.Context(), "shared", 1, WeatherTools)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			ids = append(ids, sc.ID)
			if built {
				builds++
			}
		})
	}
	wg.Wait()
	slices.Sort(ids)
	if builds != 1 || len(slices.Compact(ids)) != 1 {
		t.Fatalf("%d builds, scope ids %v: want one build of one scope", builds, ids)
	}
	stats, err := handles[0].Stats(t.Context())
	if err != nil || stats.ScopeBuilds != 1 || stats.Scopes != 1 {
		t.Fatalf("stats %+v (%v)", stats, err)
	}
}

func unknownScope(t *testing.T, b Backing) {
	st := b.Open(t)
	if _, err := st.LookupScope(t.Context(), "never-built"); !errors.Is(err, store.ErrScopeNotFound) {
		t.Fatalf("lookup of an unknown digest: %v", err)
	}
	_, err := st.Search(t.Context(), store.Scope{ID: 999_999}, store.Query{Text: "weather", Limit: 8}, store.DefaultRanking)
	if !errors.Is(err, store.ErrScopeNotFound) {
		t.Fatalf("search of an unknown scope: %v", err)
	}
}

// The ranking finds what each kind of query means: natural requests,
// split names, parameters, identifiers and misspellings, keywords,
// synonyms.
func searchRanking(t *testing.T, b Backing) {
	st := b.Open(t)
	sc := build(t, st, "d", WeatherTools)
	cases := []struct {
		query    string
		keywords []string
		want     string
	}{
		// OR semantics: most words of a natural request match nothing.
		{"could you please tell me whether it will rain in Paris tomorrow, weather-wise", nil, "weather_get_forecast"},
		{"create an issue", nil, "github_createIssue"},
		// Split names: camelCase, dots and dashes.
		{"post message", nil, "slack.post-message"},
		// Parameters carry weight too.
		{"which channel", nil, "slack.post-message"},
		// Identifier-like and misspelled names: trigram similarity.
		{"wether_get_forcast", nil, "weather_get_forecast"},
		{"githubcreateissue", nil, "github_createIssue"},
		// Keywords outweigh the query's words.
		{"post an issue", []string{"slack"}, "slack.post-message"},
		// Synonyms and stemming: "show" ~ "list", "upcoming events".
		{"show my events", nil, "calendar_list_events"},
	}
	for _, c := range cases {
		got := search(t, st, sc, c.query, c.keywords...)
		if len(got) == 0 || got[0] != c.want {
			t.Errorf("query %q keywords %v: got %v, want %s first", c.query, c.keywords, got, c.want)
		}
	}
	if got := search(t, st, sc, "zzzz qqqq"); len(got) != 0 {
		t.Errorf("nonsense query matched %v", got)
	}
	// Stop words alone find nothing, and are no error.
	if got := search(t, st, sc, "the of and"); len(got) != 0 {
		t.Errorf("stop words matched %v", got)
	}
}

// Hits come best first, at most the limit of them, and a limit of zero
// asks for none.
func searchLimitAndOrder(t *testing.T, b Backing) {
	st := b.Open(t)
	sc := build(t, st, "synthetic", SyntheticTools(300, 3))
	for _, limit := range []int{1, 8, 50} {
		hits, err := st.Search(t.Context(), sc, store.Query{Text: "list the open issues in github", Limit: limit}, store.DefaultRanking)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != limit {
			t.Fatalf("limit %d: %d hits", limit, len(hits))
		}
		for i := 1; i < len(hits); i++ {
			if hits[i].Score > hits[i-1].Score || hits[i].Score == hits[i-1].Score && hits[i].Name < hits[i-1].Name {
				t.Fatalf("limit %d: hit %d (%s %v) ranks above hit %d (%s %v)", limit, i, hits[i].Name, hits[i].Score, i-1, hits[i-1].Name, hits[i-1].Score)
			}
		}
		if hits[0].InputSchemaJSON == "" || hits[0].Description == "" {
			t.Fatalf("hit without its definition: %+v", hits[0])
		}
	}
	if hits, err := st.Search(t.Context(), sc, store.Query{Text: "github", Limit: 0}, store.DefaultRanking); err != nil || len(hits) != 0 {
		t.Fatalf("limit 0: %v, %v", hits, err)
	}
}

// Query text is data, never syntax: tsquery and SQL syntax in it is just
// text.
func searchHostileInput(t *testing.T, b Backing) {
	st := b.Open(t)
	sc := build(t, st, "d", WeatherTools)
	for _, q := range []string{
		`weather' OR 1=1; DROP TABLE tool_documents; --`,
		`!(weather & | :* <-> 'x'`,
		`\\\ '' "" %s %d $1`,
		"weather\x00forecast",
		strings.Repeat("é", 1000),
	} {
		if _, err := st.Search(t.Context(), sc, store.Query{Text: q, Limit: 8}, store.DefaultRanking); err != nil {
			t.Errorf("query %q: %v", q, err)
		}
	}
	// By words, only the weather tool matches: OR is a word like any
	// other. (By meaning, tools about nearby things may follow it.)
	if got := searchByWords(t, st, sc, `weather' OR 1=1 --`); len(got) != 1 || got[0] != "weather_get_forecast" {
		t.Errorf("injection-shaped query, by words: %v", got)
	}
	if got := search(t, st, sc, `weather' OR 1=1 --`); len(got) == 0 || got[0] != "weather_get_forecast" {
		t.Errorf("injection-shaped query: %v", got)
	}
}

// A principal that may call nothing has an empty scope, which searches
// return nothing from (and is not mistaken for a vanished scope).
func emptyScope(t *testing.T, b Backing) {
	st := b.Open(t)
	sc, built, err := st.BuildScope(t.Context(), "empty", 1, nil)
	if err != nil || !built || sc.ToolCount != 0 || sc.BaselineTokens != 0 {
		t.Fatalf("empty scope: %+v built=%v err=%v", sc, built, err)
	}
	hits, err := st.Search(t.Context(), sc, store.Query{Text: "weather", Limit: 8}, store.DefaultRanking)
	if err != nil || len(hits) != 0 {
		t.Fatalf("search of an empty scope: %v, %v", hits, err)
	}
}

// Whatever a backend advertises, one tool cannot fail the build of a
// scope: NUL characters are dropped, an enormous description is indexed
// by its beginning, and a schema that is not JSON is stored as it is.
func hostileToolDefinitions(t *testing.T, b Backing) {
	st := b.Open(t)
	// 200,000 distinct words: their full-text vector alone would exceed
	// PostgreSQL's 1 MB limit.
	var sb strings.Builder
	sb.WriteString("Convert temperatures between units.")
	for i := range 200_000 {
		sb.WriteString(" w")
		for n := i; n > 0; n /= 26 {
			sb.WriteByte(byte('a' + n%26))
		}
	}
	tools := append(slices.Clone(WeatherTools),
		store.Tool{Name: "nul\x00tool", Description: "Strips \x00 characters from text.", InputSchemaJSON: `{"type":"object","properties":{"a\u0000b":{}}}`},
		store.Tool{Name: "temperature_convert", Description: sb.String(), InputSchemaJSON: `not json at all`},
	)
	sc := build(t, st, "hostile", tools)
	// Its words are indexed from the beginning of the description. Its
	// meaning is that of 200,000 made-up words, which says nothing: a
	// weather tool can rank above it by meaning, but never without it.
	if got := searchByWords(t, st, sc, "convert temperatures"); len(got) == 0 || got[0] != "temperature_convert" {
		t.Fatalf("huge description, by words: %v", got)
	}
	if got := search(t, st, sc, "convert temperatures"); !slices.Contains(got[:min(2, len(got))], "temperature_convert") {
		t.Fatalf("huge description: %v", got)
	}
	if got := search(t, st, sc, "strips characters"); len(got) == 0 || got[0] != "nultool" {
		t.Fatalf("NUL tool: %v", got)
	}
}

// Garbage collection deletes scopes unused for longer than the retention,
// then the documents only they held; what remains searches as before.
func collectGarbage(t *testing.T, b Backing) {
	st := b.Open(t)
	ctx := t.Context()
	build(t, st, "old", WeatherTools[:2])
	keep := build(t, st, "kept", WeatherTools[1:3])
	b.AgeScope(t, "old", 2*time.Hour)
	got, err := st.CollectGarbage(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// "old" goes, and with it the one document only it referenced; the
	// shared document stays.
	if got.Scopes != 1 || got.Documents != 1 {
		t.Fatalf("collected %+v, want 1 scope and 1 document", got)
	}
	if _, err := st.LookupScope(ctx, "old"); !errors.Is(err, store.ErrScopeNotFound) {
		t.Fatalf("old scope: %v", err)
	}
	if got := search(t, st, keep, "create an issue"); len(got) == 0 || got[0] != "github_createIssue" {
		t.Fatalf("kept scope after GC: %v", got)
	}
	// A rebuilt view gets a scope again.
	if sc, built, err := st.BuildScope(ctx, "old", 2, WeatherTools[:2]); err != nil || !built {
		t.Fatalf("rebuild after GC: %+v built=%v err=%v", sc, built, err)
	}
	stats, err := st.Stats(ctx)
	if err != nil || stats.Scopes != 2 || stats.Documents != 3 {
		t.Fatalf("stats after rebuild: %+v (%v)", stats, err)
	}
}

// A tool the aggregator advertises under a prefix is found by the start of
// its own name, as its backend names it: "weatherrep" begins
// "weatherreport", which the advertised "acme_weatherReport" folds to
// only once the backend's name is indexed too.
func prefixedToolsKeepTheirOwnName(t *testing.T, b Backing) {
	st := b.Open(t)
	sc := build(t, st, "prefixed", []store.Tool{
		{Name: "acme_weatherReport", OriginalName: "weatherReport", Description: "Today's report."},
		{Name: "acme_stockReport", OriginalName: "stockReport", Description: "Today's report."},
	})
	ex, err := st.(store.Explainer).SearchExplained(t.Context(), sc, store.Query{Text: "weatherrep report", Limit: 8}, store.DefaultRanking)
	if err != nil {
		t.Fatal(err)
	}
	if len(ex.Hits) == 0 || ex.Hits[0].Name != "acme_weatherReport" {
		t.Fatalf("hits %v, want acme_weatherReport first", ex.Hits)
	}
	for _, p := range ex.Hits[0].Parts {
		if p.Lexeme == "weatherrep" && slices.Contains(p.Matched, "weatherreport") {
			return
		}
	}
	t.Errorf("weatherrep matched none of acme_weatherReport's lexemes as a prefix: %+v", ex.Hits[0].Parts)
}
