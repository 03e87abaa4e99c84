package postgres

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/singleflight"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
	"github.com/switchboard-mcp/switchboard/indexer/internal/wordvec"
)

// document is one tool document as a search reads it.
type document struct {
	id              int64
	name            string
	description     string
	inputSchemaJSON string
	metaJSON        string
	// title, annotationsJSON and outputSchemaJSON are as store.Tool's.
	title            string
	annotationsJSON  string
	outputSchemaJSON string
	analysed
	// nameKey's trigrams, for trigram similarity with the query.
	nameTrigrams trigramText
	// meaning is the document's vector (store.DocumentMeaning).
	meaning wordvec.Vector
}

// posting is one document's entry for a lexeme.
type posting struct {
	doc   int32 // index into scopeIndex.docs
	entry int32 // index into the document's lexemes
	// rank is entryRank of the entry under scopeIndex.rankWeights, worked
	// out once: it depends on nothing but the entry, and a search over
	// thousands of matching documents would otherwise repeat it for each.
	rank float32
}

// scopeIndex is one scope ready to search: its documents and an inverted
// index over them. It never changes (neither does the scope).
type scopeIndex struct {
	id int64
	// toolCount is the scope's tool count, N in the IDF.
	toolCount int
	docs      []*document
	// ndoc is the number of the scope's documents holding each lexeme
	// (scope_lexemes, which the build fills with ts_stat).
	ndoc map[string]int
	// lexicon is every lexeme of the documents, sorted, and postings[i]
	// the documents holding lexicon[i], in document order.
	lexicon  []string
	postings [][]posting
	// byRunes lists the lexicon's places by the lexeme's length in
	// characters, for fuzzy lexemes (fuzzy.go).
	byRunes [][]int32
	// byTrigram lists, for each trigram of any name key, the documents
	// whose name key has it.
	byTrigram map[trigram][]int32
	// rankWeights are the field weights the postings' ranks were worked
	// out with (the default ranking's).
	rankWeights [4]float32
	// nameOrder[doc] is the document's place in (name, id) order, the
	// order of hits with equal scores.
	nameOrder []int32
	// meanings[doc] is the document's vector of meaning, direction the
	// documents' shared direction, and meaningScale[doc] 1 / the length of
	// the document's vector without it (meaning.go).
	meanings     []wordvec.Vector
	direction    wordvec.Vector
	meaningScale []float32
}

func newScopeIndex(id int64, toolCount int, docs []*document, ndoc map[string]int) *scopeIndex {
	slices.SortFunc(docs, func(a, b *document) int { return compareInt64(a.id, b.id) })
	ix := &scopeIndex{id: id, toolCount: toolCount, docs: docs, ndoc: ndoc, byTrigram: map[trigram][]int32{},
		rankWeights: rankWeights(store.DefaultRanking.FieldWeights)}
	byLexeme := map[string][]posting{}
	for i, d := range docs {
		for e, lex := range d.lexemes {
			rank := entryRank(&ix.rankWeights, d.entryWeights(e))
			byLexeme[lex] = append(byLexeme[lex], posting{doc: int32(i), entry: int32(e), rank: rank})
		}
		for _, g := range d.nameTrigrams.set {
			ix.byTrigram[g] = append(ix.byTrigram[g], int32(i))
		}
	}
	ix.lexicon = make([]string, 0, len(byLexeme))
	for lex := range byLexeme {
		ix.lexicon = append(ix.lexicon, lex)
	}
	sort.Strings(ix.lexicon)
	ix.postings = make([][]posting, len(ix.lexicon))
	for i, lex := range ix.lexicon {
		ix.postings[i] = byLexeme[lex]
	}
	ix.byRunes = lexemesByRunes(ix.lexicon)
	byName := make([]int32, len(docs))
	for i := range byName {
		byName[i] = int32(i)
	}
	slices.SortFunc(byName, func(a, b int32) int {
		if c := strings.Compare(docs[a].name, docs[b].name); c != 0 {
			return c
		}
		return compareInt64(docs[a].id, docs[b].id)
	})
	ix.nameOrder = make([]int32, len(docs))
	for place, doc := range byName {
		ix.nameOrder[doc] = int32(place)
	}
	ix.meanings = make([]wordvec.Vector, len(docs))
	for i, d := range docs {
		ix.meanings[i] = d.meaning
	}
	ix.direction = sharedDirection(ix.meanings)
	ix.meaningScale = meaningScales(ix.meanings, &ix.direction)
	return ix
}

func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// scopeCache keeps the most recently searched scopes, bounded by the
// number of distinct documents they hold (documents shared by several
// scopes are held once) and by the sum of their sizes, their memberships:
// a scope holds for each of its documents its postings, its vector of
// meaning and more, so scopes over the same documents cost memory that
// the documents do not count. The scope being searched is always kept.
type scopeCache struct {
	limit, membershipLimit int
	flight                 singleflight.Group

	mu          sync.Mutex
	lru         *list.List // of *scopeIndex, most recent first
	scopes      map[int64]*list.Element
	docs        map[int64]*cachedDocument
	memberships int // the sum of len(docs) over the scopes held
	// reads counts the scopes read from the database, evictions those
	// dropped for the bounds: together they show a cache too small for
	// the scopes searched (CacheStats).
	reads, evictions int64
}

type cachedDocument struct {
	doc  *document
	refs int
}

func newScopeCache(limit, membershipLimit int) *scopeCache {
	return &scopeCache{limit: limit, membershipLimit: membershipLimit, lru: list.New(), scopes: map[int64]*list.Element{}, docs: map[int64]*cachedDocument{}}
}

func (c *scopeCache) get(id int64) *scopeIndex {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.scopes[id]; ok {
		c.lru.MoveToFront(el)
		return el.Value.(*scopeIndex)
	}
	return nil
}

// CacheStats is what the scope cache holds and has done.
type CacheStats struct {
	// Scopes, Documents and Memberships are held now: the scopes, their
	// distinct documents and the sum of their sizes.
	Scopes, Documents, Memberships int
	// Reads are the scopes read from the database into memory (a first
	// search of the scope on this replica, or one evicted before), and
	// Evictions those dropped for the cache's bounds, since the start.
	Reads, Evictions int64
}

func (c *scopeCache) stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{Scopes: c.lru.Len(), Documents: len(c.docs), Memberships: c.memberships, Reads: c.reads, Evictions: c.evictions}
}

// cachedDocs returns the documents among ids already held.
func (c *scopeCache) cachedDocs(ids []int64) map[int64]*document {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[int64]*document{}
	for _, id := range ids {
		if d, ok := c.docs[id]; ok {
			out[id] = d.doc
		}
	}
	return out
}

// add holds ix, sharing the documents already held, and evicts the least
// recently searched scopes beyond the limits.
func (c *scopeCache) add(ix *scopeIndex) *scopeIndex {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.scopes[ix.id]; ok {
		return el.Value.(*scopeIndex)
	}
	for i, d := range ix.docs {
		if held, ok := c.docs[d.id]; ok {
			ix.docs[i] = held.doc
			held.refs++
		} else {
			c.docs[d.id] = &cachedDocument{doc: d, refs: 1}
		}
	}
	c.scopes[ix.id] = c.lru.PushFront(ix)
	c.memberships += len(ix.docs)
	c.reads++
	for (len(c.docs) > c.limit || c.memberships > c.membershipLimit) && c.lru.Len() > 1 {
		oldest := c.lru.Back()
		c.lru.Remove(oldest)
		old := oldest.Value.(*scopeIndex)
		delete(c.scopes, old.id)
		c.memberships -= len(old.docs)
		c.evictions++
		for _, d := range old.docs {
			if held := c.docs[d.id]; held != nil {
				if held.refs--; held.refs == 0 {
					delete(c.docs, d.id)
				}
			}
		}
	}
	return ix
}

// scopeReadTimeout bounds reading one scope (10,000 tools take well under
// a second).
const scopeReadTimeout = time.Minute

// scopeIndex returns the scope ready to search, reading it from the
// database on first use. Concurrent first searches of one scope read it
// once.
func (s *Store) scopeIndex(ctx context.Context, id int64) (*scopeIndex, error) {
	if ix := s.cache.get(id); ix != nil {
		return ix, nil
	}
	v, err, _ := s.cache.flight.Do(strconv.FormatInt(id, 10), func() (any, error) {
		if ix := s.cache.get(id); ix != nil {
			return ix, nil
		}
		// The read serves every search waiting on it: one caller going
		// away must not abort it.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), scopeReadTimeout)
		defer cancel()
		ix, err := s.loadScope(ctx, id)
		if err != nil {
			return nil, err
		}
		return s.cache.add(ix), nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*scopeIndex), nil
}

// The statements that read a scope: its members (through the primary key
// of scope_tools), the documents not held yet (by primary key), and the
// scope's lexeme statistics.
const (
	scopeMembersSQL = `
		SELECT sc.tool_count, coalesce((SELECT array_agg(st.doc_id ORDER BY st.doc_id) FROM scope_tools st WHERE st.scope_id = sc.id), '{}')
		FROM scopes sc WHERE sc.id = $1`
	scopeDocumentsSQL = `
		SELECT id, name, description, input_schema_json, meta_json, title, annotations_json, output_schema_json, name_key, tsv::text
		FROM tool_documents WHERE id = ANY($1)`
	scopeLexemesSQL = `SELECT lexeme, ndoc FROM scope_lexemes WHERE scope_id = $1`
)

// loadScope reads a scope's members, the documents not held already, and
// its lexeme statistics, from one snapshot.
func (s *Store) loadScope(ctx context.Context, id int64) (*scopeIndex, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, classify(fmt.Errorf("read scope: %w", err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var toolCount int
	var members []int64
	err = tx.QueryRow(ctx, scopeMembersSQL, id).Scan(&toolCount, &members)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrScopeNotFound
	}
	if err != nil {
		return nil, classify(fmt.Errorf("read scope: %w", err))
	}
	held := s.cache.cachedDocs(members)
	var missing []int64
	for _, m := range members {
		if held[m] == nil {
			missing = append(missing, m)
		}
	}
	docs := make([]*document, 0, len(members))
	for _, d := range held {
		docs = append(docs, d)
	}
	if len(missing) > 0 {
		rows, err := tx.Query(ctx, scopeDocumentsSQL, missing)
		if err != nil {
			return nil, classify(fmt.Errorf("read scope documents: %w", err))
		}
		for rows.Next() {
			d := &document{}
			var nameKey, tsv string
			if err := rows.Scan(&d.id, &d.name, &d.description, &d.inputSchemaJSON, &d.metaJSON, &d.title, &d.annotationsJSON, &d.outputSchemaJSON, &nameKey, &tsv); err != nil {
				rows.Close()
				return nil, classify(fmt.Errorf("read scope documents: %w", err))
			}
			if d.analysed, err = parseTSVector(tsv); err != nil {
				rows.Close()
				return nil, fmt.Errorf("document %d: %w", d.id, err)
			}
			d.nameTrigrams = newTrigramText(nameKey)
			d.meaning = store.DocumentMeaning(d.name, d.description, d.inputSchemaJSON)
			docs = append(docs, d)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, classify(fmt.Errorf("read scope documents: %w", err))
		}
	}
	if len(docs) != len(members) {
		return nil, fmt.Errorf("scope %d lists %d documents, %d found", id, len(members), len(docs))
	}
	ndoc := map[string]int{}
	rows, err := tx.Query(ctx, scopeLexemesSQL, id)
	if err != nil {
		return nil, classify(fmt.Errorf("read scope statistics: %w", err))
	}
	for rows.Next() {
		var lex string
		var n int
		if err := rows.Scan(&lex, &n); err != nil {
			rows.Close()
			return nil, classify(fmt.Errorf("read scope statistics: %w", err))
		}
		ndoc[lex] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, classify(fmt.Errorf("read scope statistics: %w", err))
	}
	return newScopeIndex(id, toolCount, docs, ndoc), nil
}
