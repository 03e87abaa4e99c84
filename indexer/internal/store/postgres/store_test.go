package postgres_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
	"github.com/switchboard-mcp/switchboard/indexer/internal/store/postgres"
	"github.com/switchboard-mcp/switchboard/indexer/internal/storetest"
)

func TestMigrateIsConcurrencySafe(t *testing.T) {
	url := env.NewDatabase(t) // already migrated from the template
	var wg sync.WaitGroup
	applied := make([]int, 4)
	errs := make([]error, 4)
	for i := range 4 {
		wg.Go(func() {
			st, err := postgres.Open(t.Context(), url, postgres.Options{})
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
			st, err := postgres.Open(t.Context(), env.Cluster.URL("fresh"), postgres.Options{})
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
	st := env.Open(t, env.Cluster.URL("fresh"))
	var recorded int
	if err := st.Pool().QueryRow(t.Context(), `SELECT count(*) FROM schema_migrations`).Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	if total != recorded || recorded == 0 {
		t.Fatalf("applied %d in total, %d recorded", total, recorded)
	}
}

// Reading a scope to search it reaches the scope's rows through the
// membership and document primary keys and never scans the memberships or
// documents of other scopes.
func TestScopeReadIsScoped(t *testing.T) {
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
	var members []int64
	if err := st.Pool().QueryRow(ctx, `SELECT array_agg(doc_id) FROM scope_tools WHERE scope_id = $1`, target.ID).Scan(&members); err != nil {
		t.Fatal(err)
	}
	for sql, args := range postgres.ScopeReadSQL(target.ID, members) {
		rows, err := st.Pool().Query(ctx, `EXPLAIN (COSTS OFF) `+sql, args...)
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
		for _, table := range []string{"scope_tools", "tool_documents", "scope_lexemes"} {
			if strings.Contains(p, "Seq Scan on "+table) {
				t.Fatalf("reading a scope scans %s:\n%s\n%s", table, sql, p)
			}
			if strings.Contains(sql, "FROM "+table) && !strings.Contains(p, table+"_pkey") {
				t.Fatalf("reading a scope does not reach %s by its primary key:\n%s\n%s", table, sql, p)
			}
		}
	}
}

// Scopes over the same documents (views of one catalog that differ in a
// tool or two, say) share the documents but not what each scope holds per
// member: the cache bounds the sum of their sizes too, and an evicted
// scope is read again when searched.
func TestScopeCacheBoundsMemberships(t *testing.T) {
	all := storetest.SyntheticTools(260, 9)
	// Ten scopes of 100 tools each, all but a few the same.
	st := searchScopesTwice(t, postgres.Options{CachedDocuments: 1000, CachedMemberships: 250}, 10, func(i int) []store.Tool { return all[i : i+100] },
		func(st *postgres.Store) (string, int, int) { return "memberships", 250, st.CacheStats().Memberships })
	// Searched in turn, each scope was read twenty times over and evicted
	// all but the last two times.
	if c := st.CacheStats(); c.Scopes != 2 || c.Memberships != 200 || c.Documents != 101 || c.Reads != 20 || c.Evictions != 18 {
		t.Fatalf("cache %+v; want the 2 scopes that fit, 200 memberships, 101 documents, 20 reads, 18 evictions", c)
	}
	// One scope larger than the bound (260 tools) is still searched from
	// memory, alone.
	if c := searchOneScope(t, st, all); c.Scopes != 1 || c.Memberships != 260 || c.Documents != 260 {
		t.Fatalf("after the big scope: cache %+v, want it alone", c)
	}
}

// The scopes kept for searching hold at most the configured number of
// documents (beyond the one being searched), and an evicted scope is read
// again when searched.
func TestScopeCacheIsBounded(t *testing.T) {
	all := storetest.SyntheticTools(1000, 9)
	st := searchScopesTwice(t, postgres.Options{CachedDocuments: 250}, 10, func(i int) []store.Tool { return all[i*100 : (i+1)*100] },
		func(st *postgres.Store) (string, int, int) { return "documents", 250, st.CacheStats().Documents })
	if n := st.CacheStats().Scopes; n != 2 {
		t.Fatalf("%d scopes cached, want the 2 that fit", n)
	}
	// One scope larger than the bound is still searched from memory.
	if c := searchOneScope(t, st, all); c.Scopes != 1 || c.Documents != 1000 {
		t.Fatalf("after the big scope: cache %+v, want it alone", c)
	}
}

// searchOneScope builds a scope of tools, searches it and returns what
// the cache then holds.
func searchOneScope(t *testing.T, st *postgres.Store, tools []store.Tool) postgres.CacheStats {
	t.Helper()
	sc, _, err := st.BuildScope(t.Context(), "one", 1, tools)
	if err != nil {
		t.Fatal(err)
	}
	if hits, err := st.Search(t.Context(), sc, store.Query{Text: "list the open issues", Limit: 8}, store.DefaultRanking); err != nil || len(hits) != 8 {
		t.Fatalf("a scope of %d tools: %v, %v", len(tools), hits, err)
	}
	return st.CacheStats()
}

// searchScopesTwice opens a store with opts, builds n scopes of tools(i)
// and searches each of them in turn, twice, holding what the cache holds
// (held: what it counts, its bound, how many) within its bound after each
// search.
func searchScopesTwice(t *testing.T, opts postgres.Options, n int, tools func(i int) []store.Tool, held func(*postgres.Store) (string, int, int)) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(t.Context(), env.NewDatabase(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	var scopes []store.Scope
	for i := range n {
		sc, _, err := st.BuildScope(t.Context(), fmt.Sprintf("scope-%d", i), 1, tools(i))
		if err != nil {
			t.Fatal(err)
		}
		scopes = append(scopes, sc)
	}
	for round := range 2 {
		for _, sc := range scopes {
			hits, err := st.Search(t.Context(), sc, store.Query{Text: "list the open issues", Limit: 8}, store.DefaultRanking)
			if err != nil || len(hits) == 0 {
				t.Fatalf("round %d, scope %d: %v, %v", round, sc.ID, hits, err)
			}
			if what, bound, n := held(st); n > bound {
				t.Fatalf("%d %s cached, bound %d", n, what, bound)
			}
		}
	}
	return st
}

// TestUnseenToolDefinitionsAreCollected: the record of a tool never
// approved and unseen for store.ToolDefinitionRetention is dropped, so a
// backend listing ever new names (generated tools, or a hostile backend)
// does not grow the table and the pending list without bound; an
// approved record is kept however old, or the next digest of its tool
// would be approved as the first. Nothing collected these records once.
func TestUnseenToolDefinitionsAreCollected(t *testing.T) {
	st := env.OpenStore(t)
	ctx := t.Context()
	digest := func(s string) string { return fmt.Sprintf("%064x", sha256.Sum256([]byte(s))) }
	// The backend's first listing is approved whole; its new tools after
	// it are pending, each with its definition kept for review.
	if _, err := st.RecordToolDefinitions(ctx, []store.ToolDefinitionDigest{{Backend: "b", Tool: "approved", Digest: digest("approved")}}); err != nil {
		t.Fatal(err)
	}
	var generated []store.ToolDefinitionDigest
	for i := range 20 {
		name := fmt.Sprintf("gen-%d", i)
		generated = append(generated, store.ToolDefinitionDigest{Backend: "b", Tool: name, Digest: digest(name),
			Definition: `{"name":"` + name + `","description":"` + strings.Repeat("d", 60<<10) + `"}`, PendingIfNew: true})
	}
	if _, err := st.RecordToolDefinitions(ctx, generated); err != nil {
		t.Fatal(err)
	}
	count := func() (rows int) {
		if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM tool_definitions`).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		return rows
	}
	if _, err := st.CollectGarbage(ctx, time.Hour); err != nil || count() != 21 {
		t.Fatalf("records seen just now: %d left (%v), want all 21", count(), err)
	}
	if _, err := st.Pool().Exec(ctx, `UPDATE tool_definitions SET last_seen = now() - make_interval(secs => $1)`,
		(store.ToolDefinitionRetention + time.Hour).Seconds()); err != nil {
		t.Fatal(err)
	}
	c, err := st.CollectGarbage(ctx, time.Hour)
	if err != nil || c.ToolDefinitions != 20 || count() != 1 {
		t.Fatalf("after the retention: collected %d (%v), %d left; want the 20 never approved dropped, the approved one kept", c.ToolDefinitions, err, count())
	}
}

// A migration that needs a table another session holds (a replica of the
// previous version in a long transaction) gives up after the lock timeout
// instead of waiting as long as that transaction lasts, with every other
// statement on the table queued behind it, and applies once the table is
// free.
func TestMigrationGivesUpOnAHeldTable(t *testing.T) {
	ctx := t.Context()
	if err := env.Cluster.CreateDatabase(ctx, "heldtable"); err != nil {
		t.Fatal(err)
	}
	url := env.Cluster.URL("heldtable")
	st, err := postgres.Open(ctx, url, postgres.Options{MigrationLockTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// Make the last migration pending again.
	if _, err := st.Pool().Exec(ctx, `ALTER TABLE audit_events DROP COLUMN via; DELETE FROM schema_migrations WHERE version = 13`); err != nil {
		t.Fatal(err)
	}
	holder, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	if _, err := holder.Exec(ctx, `SELECT count(*) FROM audit_events`); err != nil {
		t.Fatal(err)
	}

	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	applied, err := st.Migrate(waitCtx)
	if !errors.Is(err, store.ErrLockBusy) || applied != 0 {
		t.Fatalf("Migrate with the table held = %d, %v; want 0, ErrLockBusy", applied, err)
	}
	var recorded int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM schema_migrations WHERE version = 13`).Scan(&recorded); err != nil || recorded != 0 {
		t.Fatalf("the migration given up on is recorded: %d, %v", recorded, err)
	}

	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if applied, err := st.Migrate(ctx); err != nil || applied != 1 {
		t.Fatalf("Migrate with the table free = %d, %v; want 1", applied, err)
	}
}

// A scope stored by a release before the listed tool fields (analysis
// version 3) is never found, even one stored after migration 0014
// dropped the scopes: an old replica serves on during a rollout and
// stores every scope it misses again, from documents without the title,
// annotations and output schema, under the view's digest, which the
// fields did not change.
func TestScopesOfAnOlderAnalysisAreNotFound(t *testing.T) {
	url := env.NewDatabase(t) // migrated
	st, err := postgres.Open(t.Context(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, _, err := st.BuildScope(t.Context(), "view-of-an-old-replica", 1, []store.Tool{{Name: "purge", Description: "Purge an account."}}); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	// Stored as the release before stores it.
	if _, err := conn.Exec(t.Context(), `UPDATE scopes SET tools_digest = 'a3:view-of-an-old-replica' WHERE tools_digest LIKE '%:view-of-an-old-replica'`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.LookupScope(t.Context(), "view-of-an-old-replica"); !errors.Is(err, store.ErrScopeNotFound) {
		t.Fatalf("a scope of an older analysis: %v, want ErrScopeNotFound", err)
	}
}
