package store_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
	"github.com/switchboard-mcp/switchboard/indexer/internal/storetest"
)

var env *storetest.Env

func TestMain(m *testing.M) { storetest.Main(m, &env) }

var weatherTools = []store.Tool{
	{Name: "weather_get_forecast", Description: "Get the weather forecast for a city.", InputSchemaJSON: `{"type":"object","properties":{"city":{"type":"string","description":"City name"}}}`},
	{Name: "github_createIssue", Description: "Open a new issue in a repository.", InputSchemaJSON: `{"type":"object","properties":{"repo":{"type":"string"},"title":{"type":"string"}}}`},
	{Name: "slack.post-message", Description: "Post a message to a channel.", InputSchemaJSON: `{"type":"object","properties":{"channel":{"type":"string"}}}`},
	{Name: "calendar_list_events", Description: "List upcoming events from the calendar.", InputSchemaJSON: `{"type":"object"}`},
}

func names(hits []store.Hit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, h.Name)
	}
	return out
}

func search(t *testing.T, st *store.Store, sc store.Scope, text string, keywords ...string) []string {
	t.Helper()
	hits, err := st.Search(t.Context(), sc, store.Query{Text: text, Keywords: keywords, Limit: 8}, store.DefaultRanking)
	if err != nil {
		t.Fatalf("search %q: %v", text, err)
	}
	return names(hits)
}

func TestMigrateIsIdempotentAndConcurrencySafe(t *testing.T) {
	url := env.NewDatabase(t) // already migrated from the template
	var wg sync.WaitGroup
	applied := make([]int, 4)
	errs := make([]error, 4)
	for i := range 4 {
		wg.Go(func() {
			st, err := store.Open(t.Context(), url)
			if err != nil {
				errs[i] = err
				return
			}
			defer st.Close()
			applied[i], errs[i] = st.Migrate(t.Context())
		})
	}
	wg.Wait()
	for i := range 4 {
		if errs[i] != nil || applied[i] != 0 {
			t.Fatalf("replica %d: applied %d, err %v", i, applied[i], errs[i])
		}
	}

	// A fresh database: concurrent replicas apply each migration once.
	if err := env.Cluster.CreateDatabase(t.Context(), "fresh"); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		wg.Go(func() {
			st, err := store.Open(t.Context(), env.Cluster.URL("fresh"))
			if err != nil {
				errs[i] = err
				return
			}
			defer st.Close()
			applied[i], errs[i] = st.Migrate(t.Context())
		})
	}
	wg.Wait()
	total := 0
	for i := range 4 {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		total += applied[i]
	}
	st, err := store.Open(t.Context(), env.Cluster.URL("fresh"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var recorded int
	if err := st.Pool().QueryRow(t.Context(), `SELECT count(*) FROM schema_migrations`).Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	if total != recorded || recorded == 0 {
		t.Fatalf("applied %d in total, %d recorded", total, recorded)
	}
}

func TestDocumentsStoredOnceAcrossScopes(t *testing.T) {
	st := env.OpenStore(t)
	ctx := t.Context()
	a, built, err := st.BuildScope(ctx, "digest-a", 1, weatherTools[:3])
	if err != nil || !built {
		t.Fatalf("build a: built=%v err=%v", built, err)
	}
	b, built, err := st.BuildScope(ctx, "digest-b", 1, weatherTools[1:])
	if err != nil || !built {
		t.Fatalf("build b: built=%v err=%v", built, err)
	}
	again, built, err := st.BuildScope(ctx, "digest-a", 2, weatherTools)
	if err != nil || built || again.ID != a.ID || again.ToolCount != 3 {
		t.Fatalf("rebuild of an existing digest: %+v built=%v err=%v", again, built, err)
	}
	stats, err := st.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Documents != 4 || stats.Scopes != 2 || stats.ScopeBuilds != 2 {
		t.Fatalf("stats %+v, want 4 documents, 2 scopes, 2 builds", stats)
	}
	if a.BaselineTokens <= 0 || b.ToolCount != 3 {
		t.Fatalf("scopes %+v %+v", a, b)
	}
	// Each scope sees only its own documents.
	if got := search(t, st, a, "list calendar events"); slices.Contains(got, "calendar_list_events") {
		t.Fatalf("scope a found a tool outside it: %v", got)
	}
	if got := search(t, st, b, "list calendar events"); len(got) == 0 || got[0] != "calendar_list_events" {
		t.Fatalf("scope b: %v", got)
	}
}

func TestSearchRanking(t *testing.T) {
	st := env.OpenStore(t)
	sc, _, err := st.BuildScope(t.Context(), "d", 1, weatherTools)
	if err != nil {
		t.Fatal(err)
	}
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
}

// Query text reaches SQL only as parameters: tsquery and SQL syntax in it
// is just text.
func TestSearchHostileInput(t *testing.T) {
	st := env.OpenStore(t)
	sc, _, err := st.BuildScope(t.Context(), "d", 1, weatherTools)
	if err != nil {
		t.Fatal(err)
	}
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
	if got := search(t, st, sc, `weather' OR 1=1 --`); len(got) != 1 || got[0] != "weather_get_forecast" {
		t.Errorf("injection-shaped query: %v", got)
	}
}

func TestCollectGarbage(t *testing.T) {
	st := env.OpenStore(t)
	ctx := t.Context()
	if _, _, err := st.BuildScope(ctx, "old", 1, weatherTools[:2]); err != nil {
		t.Fatal(err)
	}
	keep, _, err := st.BuildScope(ctx, "kept", 1, weatherTools[1:3])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, `UPDATE scopes SET last_used_at = now() - interval '2 hours' WHERE tools_digest = 'old'`); err != nil {
		t.Fatal(err)
	}
	scopes, docs, err := st.CollectGarbage(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// "old" goes, and with it the one document only it referenced; the
	// shared document stays.
	if scopes != 1 || docs != 1 {
		t.Fatalf("collected %d scopes and %d documents, want 1 and 1", scopes, docs)
	}
	if _, err := st.LookupScope(ctx, "old"); err != store.ErrScopeNotFound {
		t.Fatalf("old scope: %v", err)
	}
	if got := search(t, st, keep, "create an issue"); len(got) == 0 || got[0] != "github_createIssue" {
		t.Fatalf("kept scope after GC: %v", got)
	}
	if _, err := st.Search(ctx, store.Scope{ID: 999999}, store.Query{Text: "weather", Limit: 8}, store.DefaultRanking); err != store.ErrScopeNotFound {
		t.Fatalf("search of a vanished scope: %v", err)
	}
}

func TestSessions(t *testing.T) {
	st := env.OpenStore(t)
	ctx := t.Context()
	live, expired := strings.Repeat("a", 64), strings.Repeat("b", 64)
	if err := st.RevokeSession(ctx, live, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := st.RevokeSession(ctx, expired, time.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	for digest, want := range map[string]bool{live: true, expired: false, strings.Repeat("c", 64): false} {
		got, err := st.SessionRevoked(ctx, digest)
		if err != nil || got != want {
			t.Errorf("SessionRevoked(%s…) = %v, %v; want %v", digest[:4], got, err, want)
		}
	}
	if _, _, err := st.CollectGarbage(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM revoked_sessions`).Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("revoked_sessions rows after purge: %d (%v), want 1", rows, err)
	}
}

// A scoped search reaches the scope's rows through the membership primary
// key and never scans the memberships or documents of other scopes.
func TestSearchPlanIsScoped(t *testing.T) {
	st := env.OpenStore(t)
	ctx := t.Context()
	all := storetest.SyntheticTools(4000, 7)
	var target store.Scope
	for i := range 40 {
		sc, _, err := st.BuildScope(ctx, fmt.Sprintf("scope-%d", i), 1, all[i*100:(i+1)*100])
		if err != nil {
			t.Fatal(err)
		}
		target = sc
	}
	if _, err := st.Pool().Exec(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	rows, err := st.Pool().Query(ctx, `EXPLAIN (COSTS OFF) `+store.SearchSQLForExplain(),
		target.ID, []string{"list", "open", "issue"}, []float64{1, 1, 1}, "listopenissue", 8,
		[]float32{0, 0.2, 0.5, 1}, 0.5, 0.5, 0.3, 1)
	if err != nil {
		t.Fatal(err)
	}
	var plan strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	p := plan.String()
	if !strings.Contains(p, "scope_tools_pkey") || strings.Contains(p, "Seq Scan on scope_tools") || strings.Contains(p, "Seq Scan on tool_documents") {
		t.Fatalf("search plan is not scoped:\n%s", p)
	}
}

// A principal that may call nothing has an empty scope, which searches
// return nothing from (and is not mistaken for a vanished scope).
func TestEmptyScope(t *testing.T) {
	st := env.OpenStore(t)
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
// scope: NUL characters (which PostgreSQL text cannot hold) are dropped and
// only the first 64 KiB of a description is indexed.
func TestHostileToolDefinitions(t *testing.T) {
	st := env.OpenStore(t)
	// 200,000 distinct words: their tsvector alone would exceed
	// PostgreSQL's 1 MB limit.
	var b strings.Builder
	b.WriteString("Convert temperatures between units.")
	for i := range 200_000 {
		b.WriteString(" w")
		for n := i; n > 0; n /= 26 {
			b.WriteByte(byte('a' + n%26))
		}
	}
	huge := b.String()
	tools := append(slices.Clone(weatherTools),
		store.Tool{Name: "nul\x00tool", Description: "Strips \x00 characters from text.", InputSchemaJSON: `{"type":"object","properties":{"a\u0000b":{}}}`},
		store.Tool{Name: "temperature_convert", Description: huge, InputSchemaJSON: `not json at all`},
	)
	sc, _, err := st.BuildScope(t.Context(), "hostile", 1, tools)
	if err != nil {
		t.Fatal(err)
	}
	if got := search(t, st, sc, "convert temperatures"); len(got) == 0 || got[0] != "temperature_convert" {
		t.Fatalf("huge description: %v", got)
	}
	if got := search(t, st, sc, "strips characters"); len(got) == 0 || got[0] != "nultool" {
		t.Fatalf("NUL tool: %v", got)
	}
}
