// Package storetest is the contract of the indexer's stores as tests: one
// part per interface of package store, each written against the interface
// alone, so that every implementation of it runs the same checks, the
// PostgreSQL store and any in-memory stand-in of one part alike:
//
//	RunIndex            store.Index (and Migrate): scopes, search, garbage collection
//	RunSessions         store.Sessions: revocations, and following them
//	RunRequestStates    store.RequestStates: each state consumed once
//	RunSessionStates    store.SessionStates: Legacy session states, relayed
//	                    input responses and cancellations, and following them
//	RunToolDefinitions  store.ToolDefinitions
//	RunRateTakes        the takes of store.RateBuckets (TakeRateTokens), which
//	                    ratelimit.MemoryBuckets keeps in memory too
//	RunRateBuckets      store.RateBuckets: takes and listing
//	RunTasks            store.Tasks: the aggregators' MCP tasks, their
//	                    rounds, leases and bounds, and their expiry
//	RunAuditEvents      store.AuditEvents (apart from store.Store)
//
// RunAll runs every part of store.Store against one implementation, which
// its own test calls with a way to make fresh backing stores:
//
//	func TestContract(t *testing.T) { storetest.RunAll(t, newBacking) }
//
// Each check runs as a subtest on a fresh backing store, and opens handles
// on it as replicas of the indexer would: what one handle records, another
// must see.
//
// It also makes synthetic tool catalogs and queries for tests and
// benchmarks.
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/ratelimit"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// Backing is one fresh, empty backing store (a database, say) of a whole
// store.Store.
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

// Open returns a new handle of type S on one backing store, as another
// replica of the indexer would hold one, closed when the test ends. An
// in-memory store, which no other replica shares, may return the same
// value every time.
type Open[S any] func(t *testing.T) S

// Fresh makes a fresh, empty backing store for one test and returns how to
// open handles on it.
type Fresh[S any] func(t *testing.T) Open[S]

// Collector purges what has expired: store.Index's CollectGarbage, which
// the parts whose records expire are checked with.
type Collector interface {
	CollectGarbage(ctx context.Context, retention time.Duration) (store.Collected, error)
}

// RevocationStore is what RunSessions checks.
type RevocationStore interface {
	store.Sessions
	Collector
}

// RequestStateStore is what RunRequestStates checks.
type RequestStateStore interface {
	store.RequestStates
	Collector
}

// SessionStateStore is what RunSessionStates checks: the revocations too,
// since a revoked session loses its state and gets none again.
type SessionStateStore interface {
	store.SessionStates
	store.Sessions
	Collector
}

// TaskStore is what RunTasks checks.
type TaskStore interface {
	store.Tasks
	Collector
}

// RateTaker is the half of store.RateBuckets that takes tokens, what
// RunRateTakes checks.
type RateTaker interface {
	TakeRateTokens(ctx context.Context, reqs []ratelimit.TokenRequest) ([]ratelimit.Grant, error)
}

// Every part RunAll runs is a part of store.Store.
var (
	_ RevocationStore       = store.Store(nil)
	_ RequestStateStore     = store.Store(nil)
	_ SessionStateStore     = store.Store(nil)
	_ store.ToolDefinitions = store.Store(nil)
	_ store.RateBuckets     = store.Store(nil)
	_ TaskStore             = store.Store(nil)
	_ RateTaker             = store.RateBuckets(nil)
)

// RunAll runs every part of the contract of store.Store (all of the above
// but RunAuditEvents, which is not part of it), each check as a subtest on
// a fresh backing store.
func RunAll(t *testing.T, newBacking NewBacking) {
	RunIndex(t, newBacking)
	RunSessions(t, part[RevocationStore](newBacking))
	RunRequestStates(t, part[RequestStateStore](newBacking))
	RunSessionStates(t, part[SessionStateStore](newBacking))
	RunToolDefinitions(t, part[store.ToolDefinitions](newBacking))
	RunRateBuckets(t, part[store.RateBuckets](newBacking))
	RunTasks(t, part[TaskStore](newBacking))
}

// part is the backing stores of newBacking as stores of one part.
func part[S any](newBacking NewBacking) Fresh[S] {
	return func(t *testing.T) Open[S] {
		b := newBacking(t)
		return func(t *testing.T) S { return b.Open(t).(S) }
	}
}

// RunIndex runs the checks of store.Index: building and looking up scopes,
// searching them, explaining searches, and garbage collection.
func RunIndex(t *testing.T, newBacking NewBacking) {
	run(t, newBacking, []check[Backing]{
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
	})
}

// RunSessions runs the checks of store.Sessions.
func RunSessions(t *testing.T, fresh Fresh[RevocationStore]) {
	run(t, fresh, []check[Open[RevocationStore]]{
		{"Sessions", sessions},
		{"ListenRevocationsAcrossHandles", listenRevocationsAcrossHandles},
	})
}

// RunRequestStates runs the checks of store.RequestStates.
func RunRequestStates(t *testing.T, fresh Fresh[RequestStateStore]) {
	run(t, fresh, []check[Open[RequestStateStore]]{
		{"RequestStatesConsumedOnce", requestStates},
	})
}

// RunSessionStates runs the checks of store.SessionStates.
func RunSessionStates(t *testing.T, fresh Fresh[SessionStateStore]) {
	run(t, fresh, []check[Open[SessionStateStore]]{
		{"SessionStatesStoredAndChanged", sessionStatesStoredAndChanged},
		{"SessionStateBounds", sessionStateBounds},
		{"SessionStateBoundsAcrossHandles", sessionStateBoundsAcrossHandles},
		{"SessionStateGoesWithItsSession", sessionStateGoesWithItsSession},
		{"InputResponsesRelayed", inputResponsesRelayed},
		{"InputResponsesAnsweredOnceAcrossHandles", inputResponsesAnsweredOnceAcrossHandles},
		{"InputResponsesExpire", inputResponsesExpire},
		{"ListenSessionEventsAcrossHandles", listenSessionEventsAcrossHandles},
	})
}

// RunToolDefinitions runs the checks of store.ToolDefinitions.
func RunToolDefinitions(t *testing.T, fresh Fresh[store.ToolDefinitions]) {
	run(t, fresh, []check[Open[store.ToolDefinitions]]{
		{"ToolDefinitions", toolDefinitions},
		{"NewToolsOfARecordedBackendPending", newToolsOfARecordedBackendPending},
		{"FirstDefinitionKept", firstDefinitionKept},
	})
}

// RunRateTakes runs the checks of taking rate-limit tokens.
func RunRateTakes(t *testing.T, fresh Fresh[RateTaker]) {
	run(t, fresh, rateTakeChecks)
}

var rateTakeChecks = []check[Open[RateTaker]]{
	{"RateTakesGrantWholeTokens", rateTakesGrantWholeTokens},
	{"RateTakesRefillUpToBurst", rateTakesRefillUpToBurst},
	{"RateTakesNeverOverAdmitAcrossHandles", rateTakesNeverOverAdmitAcrossHandles},
}

// RunRateBuckets runs the checks of store.RateBuckets: RunRateTakes's, and
// the listing's.
func RunRateBuckets(t *testing.T, fresh Fresh[store.RateBuckets]) {
	takers := func(t *testing.T) Open[RateTaker] {
		open := fresh(t)
		return func(t *testing.T) RateTaker { return open(t) }
	}
	run(t, takers, rateTakeChecks)
	run(t, fresh, []check[Open[store.RateBuckets]]{
		{"RateBuckets", rateBuckets},
	})
}

// RunTasks runs the checks of store.Tasks.
func RunTasks(t *testing.T, fresh Fresh[TaskStore]) {
	run(t, fresh, []check[Open[TaskStore]]{
		{"TasksStoredAndIsolated", tasksStoredAndIsolated},
		{"TasksListed", tasksListed},
		{"TaskLimits", taskLimits},
		{"LapsedLeaseFailsTask", lapsedLeaseFailsTask},
		{"AdvanceTaskGuards", advanceTaskGuards},
		{"AnswerTaskMerges", answerTaskMerges},
		{"CancellationEndsTask", cancellationEndsTask},
		{"RenewTaskLeases", renewTaskLeases},
		{"TasksCollected", tasksCollected},
	})
}

// RunAuditEvents runs the checks of store.AuditEvents.
func RunAuditEvents(t *testing.T, fresh Fresh[store.AuditEvents]) {
	run(t, fresh, []check[Open[store.AuditEvents]]{
		{"AuditEventsStoredAndFiltered", auditEventsStoredAndFiltered},
		{"AuditEventsPaged", auditEventsPaged},
		{"AuditEventsRetention", auditEventsRetention},
	})
}

// check is one check of the contract, on a fresh backing store B.
type check[B any] struct {
	name string
	run  func(t *testing.T, b B)
}

// run runs each check as a subtest on a fresh backing store.
func run[B any](t *testing.T, fresh func(t *testing.T) B, checks []check[B]) {
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) { c.run(t, fresh(t)) })
	}
}

// pollDeadline bounds what a check waits for another handle to see.
const pollDeadline = 30 * time.Second
