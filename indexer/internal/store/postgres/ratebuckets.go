package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-mcp/switchboard/services/ratelimit"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// takeRateTokens is one bucket's acquisition, in one statement: a new key
// is a full bucket less what it grants; an existing one is refilled from
// updated_at to the database's clock (so replicas' clocks never matter),
// then gives as many whole tokens as it holds, up to the tokens wanted.
// The row lock serialises acquirers of one key across every replica.
// $1 key, $2 rate per second, $3 burst, $4 tokens wanted.
const takeRateTokens = `
INSERT INTO rate_buckets AS b (key, tokens, granted, updated_at, full_at)
VALUES ($1, $3::float8 - LEAST($4::int, $3::int), LEAST($4::int, $3::int), clock_timestamp(),
        clock_timestamp() + make_interval(secs => LEAST($4::int, $3::int)::float8 / $2::float8))
ON CONFLICT (key) DO UPDATE SET (tokens, granted, updated_at, full_at) = (
    SELECT s.have - g.n, g.n::int, s.t, s.t + make_interval(secs => ($3::float8 - (s.have - g.n)) / $2::float8)
    FROM (SELECT c.t, LEAST($3::float8, b.tokens + $2::float8 * GREATEST(0, extract(epoch FROM c.t - b.updated_at)::float8)) AS have
          FROM (SELECT clock_timestamp() AS t) c) s,
         LATERAL (SELECT LEAST($4::float8, floor(s.have)) AS n) g)
RETURNING tokens, granted`

// TakeRateTokens takes tokens from each bucket, in one round trip. The
// keys are locked in one order (sorted) on every replica, so that two
// acquisitions of the same keys cannot deadlock.
func (s *Store) TakeRateTokens(ctx context.Context, reqs []ratelimit.TokenRequest) ([]ratelimit.Grant, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	order := make([]int, len(reqs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(reqs[a].Key, reqs[b].Key) })
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, classify(fmt.Errorf("begin: %w", err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	batch := &pgx.Batch{}
	for _, i := range order {
		r := reqs[i]
		batch.Queue(takeRateTokens, r.Key, r.Rate, r.Burst, r.Tokens)
	}
	results := tx.SendBatch(ctx, batch)
	grants := make([]ratelimit.Grant, len(reqs))
	for _, i := range order {
		var left float64
		var granted int
		if err := results.QueryRow().Scan(&left, &granted); err != nil {
			_ = results.Close()
			return nil, classify(fmt.Errorf("take rate tokens: %w", err))
		}
		grants[i].Granted = granted
		if granted == 0 {
			grants[i].RetryAfter = time.Duration((1 - left) / reqs[i].Rate * float64(time.Second))
		}
	}
	if err := results.Close(); err != nil {
		return nil, classify(fmt.Errorf("take rate tokens: %w", err))
	}
	return grants, classify(tx.Commit(ctx))
}

// listRateBuckets reads one page of buckets and the database's clock in
// one statement (the clock row comes back even when no bucket does). The
// key order is the primary key's, which also serves the page's range.
// $1 limit name or "", $2 the key after which the page starts, $3 rows.
const listRateBuckets = `
SELECT c.t, b.key, b.tokens, b.granted, b.updated_at, b.full_at
FROM (SELECT clock_timestamp() AS t) c
LEFT JOIN LATERAL (
    SELECT key, tokens, granted, updated_at, full_at FROM rate_buckets
    WHERE key > $2 AND ($1 = '' OR starts_with(key, $1 || '|'))
    ORDER BY key LIMIT $3) b ON true
ORDER BY b.key`

// ListRateBuckets implements store.RateBuckets.
func (s *Store) ListRateBuckets(ctx context.Context, limitName, afterKey string, n int) ([]store.RateBucket, time.Time, error) {
	rows, err := s.pool.Query(ctx, listRateBuckets, limitName, afterKey, n)
	if err != nil {
		return nil, time.Time{}, classify(fmt.Errorf("list rate buckets: %w", err))
	}
	defer rows.Close()
	var (
		out    []store.RateBucket
		readAt time.Time
	)
	for rows.Next() {
		var (
			key               *string
			tokens            *float64
			granted           *int
			updatedAt, fullAt *time.Time
		)
		if err := rows.Scan(&readAt, &key, &tokens, &granted, &updatedAt, &fullAt); err != nil {
			return nil, time.Time{}, classify(fmt.Errorf("list rate buckets: %w", err))
		}
		if key == nil {
			continue // the clock row of an empty page
		}
		out = append(out, store.RateBucket{Key: *key, Tokens: *tokens, Granted: *granted, UpdatedAt: *updatedAt, FullAt: *fullAt})
	}
	if err := rows.Err(); err != nil {
		return nil, time.Time{}, classify(fmt.Errorf("list rate buckets: %w", err))
	}
	return out, readAt, nil
}
