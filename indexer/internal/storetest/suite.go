// Package storetest is the contract of store.Store as tests: RunAll runs
// every check against an implementation, which its own test calls with a
// way to make fresh backing stores:
//
//	func TestContract(t *testing.T) { storetest.RunAll(t, newBacking) }
//
// It also makes synthetic tool catalogs and queries for tests and
// benchmarks.
package storetest

import (
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// Backing is one fresh, empty backing store (a database, say).
type Backing interface {
	// Open returns a new handle on the backing store, as another replica
	// of the indexer would hold one, closed when the test ends.
	Open(t *testing.T) store.Store
	// AgeScope makes the scope built for digest look unused for age, for
	// the garbage-collection checks.
	AgeScope(t *testing.T, digest string, age time.Duration)
}

// NewBacking makes a fresh backing store for one test.
type NewBacking func(t *testing.T) Backing

// RunAll runs the whole contract, each check as a subtest on a fresh
// backing store.
func RunAll(t *testing.T, newBacking NewBacking) {
	checks := []struct {
		name  string
		check func(t *testing.T, b Backing)
	}{
		{"MigrateIsIdempotent", migrateIsIdempotent},
		{"DocumentsStoredOnceAcrossScopes", documentsStoredOnceAcrossScopes},
		{"BuildsOfOneDigestBuildOnce", buildsOfOneDigestBuildOnce},
		{"UnknownScope", unknownScope},
		{"SearchRanking", searchRanking},
		{"SearchLimitAndOrder", searchLimitAndOrder},
		{"SearchHostileInput", searchHostileInput},
		{"MeaningFindsWhatSharesNoWord", meaningFindsWhatSharesNoWord},
		{"FuzzyMatchesOneEditAway", fuzzyMatchesOneEditAway},
		{"ExplainedSearch", explainedSearch},
		{"EmptyScope", emptyScope},
		{"HostileToolDefinitions", hostileToolDefinitions},
		{"PrefixedToolsKeepTheirOwnName", prefixedToolsKeepTheirOwnName},
		{"CollectGarbage", collectGarbage},
		{"Sessions", sessions},
		{"ListenRevocationsAcrossHandles", listenRevocationsAcrossHandles},
		{"RequestStatesConsumedOnce", requestStates},
		{"ToolDefinitions", toolDefinitions},
		{"RateBuckets", rateBuckets},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) { c.check(t, newBacking(t)) })
	}
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}
