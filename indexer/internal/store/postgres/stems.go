package postgres

import (
	"context"
	"fmt"
	"sync"
)

// stemCacheBytes bounds the memory the stem cache holds.
const stemCacheBytes = 8 << 20

// stemSQL reduces each term to its lexemes as a document's words are: the
// switchboard_en configuration stems them and drops stop words.
const stemSQL = `SELECT tsvector_to_array(to_tsvector('switchboard_en', t.term))
FROM unnest($1::text[]) WITH ORDINALITY AS t(term, n) ORDER BY t.n`

// stemCache remembers what PostgreSQL reduced each query word to. Stemming
// depends only on the text-search configuration, which the migrations fix,
// so an entry never goes stale. When full it is emptied and fills again
// with the words in use.
type stemCache struct {
	mu    sync.Mutex
	stems map[string][]string
	bytes int
	limit int
}

func newStemCache(limit int) *stemCache {
	return &stemCache{stems: map[string][]string{}, limit: limit}
}

// lexemes returns the lexemes of each term, asking PostgreSQL (one round
// trip) only about the terms it has not seen.
func (s *Store) lexemes(ctx context.Context, terms []string) ([][]string, error) {
	out := make([][]string, len(terms))
	var missing []string
	var at []int
	c := s.stems
	c.mu.Lock()
	for i, t := range terms {
		if lex, ok := c.stems[t]; ok {
			out[i] = lex
		} else {
			missing = append(missing, t)
			at = append(at, i)
		}
	}
	c.mu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, stemSQL, missing)
	if err != nil {
		return nil, classify(fmt.Errorf("stem query: %w", err))
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var lex []string
		if err := rows.Scan(&lex); err != nil {
			return nil, classify(fmt.Errorf("stem query: %w", err))
		}
		if n < len(at) {
			out[at[n]] = lex
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return nil, classify(fmt.Errorf("stem query: %w", err))
	}
	if n != len(missing) {
		return nil, fmt.Errorf("stem query: %d rows for %d terms", n, len(missing))
	}
	c.mu.Lock()
	for i, t := range missing {
		size := len(t) + 16
		for _, l := range out[at[i]] {
			size += len(l) + 16
		}
		if c.bytes+size > c.limit {
			clear(c.stems)
			c.bytes = 0
		}
		if _, ok := c.stems[t]; !ok {
			c.stems[t] = out[at[i]]
			c.bytes += size
		}
	}
	c.mu.Unlock()
	return out, nil
}
