// Package store is the indexer's domain: what a search index holds and
// promises, independent of where it keeps its data.
//
// Tool documents are stored once, content-addressed by the SHA-256 of their
// name, description and input schema (see Document). A scope is one
// distinct tool view, named by the aggregator's tools_digest: principals
// whose views are equal share it. A built scope never changes; a view that
// changes gets a new digest and so a new scope. Searches rank the documents
// of one scope only.
//
// The index also keeps the revoked Legacy gateway sessions, the request
// states gateways accepted and the MCP tasks aggregators run, because it is
// the one durable store every replica of every service shares.
//
// Store is the contract; package postgres implements it, and the suite in
// package storetest checks any implementation against it.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/switchboard-mcp/switchboard/services/ratelimit"
)

// Store is everything the indexer keeps: the search index and the session
// revocations.
type Store interface {
	Index
	Sessions
	RequestStates
	SessionStates
	ToolDefinitions
	RateBuckets
	Tasks
	// Migrate brings the schema up to date and reports how many steps it
	// applied. Concurrent replicas may call it at once; each step is
	// applied once. An unreachable backing store is an UnavailableError.
	Migrate(ctx context.Context) (int, error)
	// Close releases the store's resources.
	Close()
}

// Index holds tool documents and scopes and searches them.
type Index interface {
	// LookupScope returns the scope built for digest and records that it
	// is in use (garbage collection spares scopes in use), or
	// ErrScopeNotFound.
	LookupScope(ctx context.Context, digest string) (Scope, error)
	// BuildScope stores the scope for digest holding tools and reports
	// whether this call built it. Concurrent builders of one digest, in
	// this process or in other replicas, build it once: the others find it
	// built and return it (built false), as does any later call, whatever
	// tools it passes.
	BuildScope(ctx context.Context, digest string, catalogVersion uint64, tools []Tool) (Scope, bool, error)
	// Search ranks the documents of scope against q with the ranking r,
	// best first, at most q.Limit of them. A scope that does not exist
	// (never built, or collected) is ErrScopeNotFound.
	Search(ctx context.Context, scope Scope, q Query, r Ranking) ([]Hit, error)
	// Explainer explains searches (explain.go).
	Explainer
	// CollectGarbage deletes scopes unused for longer than retention, the
	// documents no scope references any more, expired revocations and
	// expired request state records, session states, relayed input
	// responses and tasks.
	CollectGarbage(ctx context.Context, retention time.Duration) (Collected, error)
	// Stats counts documents, scopes and builds.
	Stats(ctx context.Context) (Stats, error)
}

// Sessions records revoked gateway sessions where every replica sees them.
type Sessions interface {
	// RevokeSession records that the session with digest is revoked until
	// expiresAt. Revoking it again keeps the later expiry.
	RevokeSession(ctx context.Context, digest string, expiresAt time.Time) error
	// SessionRevoked reports whether a revocation of digest is recorded
	// and has not expired.
	SessionRevoked(ctx context.Context, digest string) (bool, error)
	// Revocations lists every revocation that has not expired.
	Revocations(ctx context.Context) ([]Revocation, error)
	// ListenRevocations follows revocations as they are recorded, through
	// any handle on the same backing store (another replica's included),
	// until ctx ends or the connection fails; it always returns an error.
	// It calls listening once it is following, so that a caller reading
	// Revocations after that misses nothing, then revoked for each
	// revocation recorded (or extended) from then on. Callers must not
	// block in either.
	ListenRevocations(ctx context.Context, listening func(), revoked func(Revocation)) error
}

// ErrScopeNotFound means the scope does not exist (never built, or
// garbage-collected since it was looked up).
var ErrScopeNotFound = errors.New("scope not found")

// ErrLockBusy: a migration gave up waiting for a lock on a table it
// changes, held by another session (a replica of the previous version in
// a transaction); nothing of it was applied. Try again later.
var ErrLockBusy = errors.New("a table the migration changes is locked by another session")

// UnavailableError wraps an error that means the backing store cannot be
// reached; callers may retry later.
type UnavailableError struct{ Err error }

func (e *UnavailableError) Error() string { return "database unavailable: " + e.Err.Error() }
func (e *UnavailableError) Unwrap() error { return e.Err }

// Scope describes a built scope.
type Scope struct {
	ID             int64
	Digest         string
	CatalogVersion uint64
	// ToolCount is the number of tools the view listed (documents that
	// are equal count once in the index, but every listed tool counts
	// here).
	ToolCount      int
	BaselineTokens int64
}

// Stats are index counts.
type Stats struct {
	Documents, Scopes, ScopeBuilds uint64
}

// Collected counts what one garbage collection deleted.
type Collected struct {
	Scopes, Documents, Revocations, RequestStates int64
	// RateBuckets counts rate-limit buckets dropped because they were full.
	RateBuckets int64
	// SessionStates counts expired session states and input responses.
	SessionStates int64
	// Tasks counts expired tasks.
	Tasks int64
	// ToolDefinitions counts the records of tools never approved and not
	// seen for ToolDefinitionRetention, dropped.
	ToolDefinitions int64
}

// ToolDefinitionRetention is how long the record of a tool never approved
// is kept unseen; past it, it is dropped (recorded anew, as new, if its
// backend lists it again). An approved record is never dropped: the next
// digest recorded for the tool would be approved as its first.
const ToolDefinitionRetention = 30 * 24 * time.Hour

// Revocation is one revoked session: the SHA-256 of its id, hex, and when
// the session expires anyway (after which the record may be dropped).
type Revocation struct {
	Digest    string
	ExpiresAt time.Time
}

// RateBuckets are the rate-limit buckets every replica shares.
type RateBuckets interface {
	// TakeRateTokens takes up to each request's tokens from its bucket
	// (see ratelimit.Take for the arithmetic), and returns one grant per
	// request, in order. An unreachable database is an UnavailableError.
	TakeRateTokens(ctx context.Context, reqs []ratelimit.TokenRequest) ([]ratelimit.Grant, error)
	// ListRateBuckets lists the stored buckets whose key is after
	// afterKey, in key order, at most n, only those of the limit named
	// limitName unless it is empty (keys are "<limit>|<per>|<value>"), and
	// the store's clock when it read them (buckets refill by it). A full
	// bucket may have been dropped, and so not be listed.
	ListRateBuckets(ctx context.Context, limitName, afterKey string, n int) ([]RateBucket, time.Time, error)
}

// RateBucket is one rate-limit bucket as stored: the tokens it held after
// its last take, what that take granted, when it was, and when the bucket
// is full again. The rate and burst are not stored (each take names them).
type RateBucket struct {
	Key               string
	Tokens            float64
	Granted           int
	UpdatedAt, FullAt time.Time
}
