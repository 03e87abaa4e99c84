package postgres

import (
	"context"
	"math"
	"net"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// wireRecorder is a stand-in PostgreSQL server that speaks just enough of
// the wire protocol for pgx: it answers every statement with no rows and
// records the SQL text of every statement the client prepares and the
// parameters of every execution. It lets the search fuzz target check what
// actually leaves the process, with no database behind it.
type wireRecorder struct {
	lis net.Listener

	mu         sync.Mutex
	statements []string
	// binds are the parameters of each execution, decoded to Go values
	// by the parameter types the statement declared.
	binds [][]any
}

// PostgreSQL type OIDs of the parameters of the statements Search sends.
const (
	oidBool    = 16
	oidInt8    = 20
	oidTextArr = 1009
)

var placeholder = regexp.MustCompile(`\$(\d+)`)

// parameterTypes declares, for a statement, the types PostgreSQL would
// infer for its parameters: the stem statement takes the query's words as
// text[]; anything else gets int8.
func parameterTypes(sql string) []uint32 {
	if sql == stemSQL {
		return []uint32{oidTextArr}
	}
	n := 0
	for _, m := range placeholder.FindAllStringSubmatch(sql, -1) {
		var k int
		for _, d := range m[1] {
			k = k*10 + int(d-'0')
		}
		n = max(n, k)
	}
	types := make([]uint32, n)
	for i := range types {
		types[i] = oidInt8
	}
	return types
}

// resultColumns describes the rows a statement returns.
func resultColumns(sql string) []pgproto3.FieldDescription {
	if sql == stemSQL {
		return []pgproto3.FieldDescription{{Name: []byte("lexemes"), DataTypeOID: oidTextArr, DataTypeSize: -1, TypeModifier: -1}}
	}
	return []pgproto3.FieldDescription{{Name: []byte("exists"), DataTypeOID: oidBool, DataTypeSize: 1, TypeModifier: -1}}
}

func startWireRecorder(tb testing.TB) *wireRecorder {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	w := &wireRecorder{lis: lis}
	var conns sync.WaitGroup
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() { defer conns.Done(); w.serve(c) }()
		}
	}()
	tb.Cleanup(func() { lis.Close(); conns.Wait() })
	return w
}

func (w *wireRecorder) url() string {
	return "postgres://fuzz@" + w.lis.Addr().String() + "/fuzz?sslmode=disable"
}

func (w *wireRecorder) serve(c net.Conn) {
	defer c.Close()
	be := pgproto3.NewBackend(c, c)
	if _, err := be.ReceiveStartupMessage(); err != nil {
		return
	}
	be.Send(&pgproto3.AuthenticationOk{})
	for _, p := range [][2]string{{"server_version", "17.0"}, {"client_encoding", "UTF8"}, {"standard_conforming_strings", "on"}, {"DateStyle", "ISO, MDY"}} {
		be.Send(&pgproto3.ParameterStatus{Name: p[0], Value: p[1]})
	}
	be.Send(&pgproto3.BackendKeyData{ProcessID: 1, SecretKey: []byte{0, 0, 0, 1}})
	be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	if be.Flush() != nil {
		return
	}
	typeMap := pgtype.NewMap()
	prepared := map[string]string{} // statement name → SQL
	var portalSQL string
	for {
		msg, err := be.Receive()
		if err != nil {
			return
		}
		switch m := msg.(type) {
		case *pgproto3.Parse:
			w.mu.Lock()
			w.statements = append(w.statements, m.Query)
			w.mu.Unlock()
			prepared[m.Name] = m.Query
			be.Send(&pgproto3.ParseComplete{})
		case *pgproto3.Describe:
			sql := prepared[m.Name]
			if m.ObjectType == 'S' {
				be.Send(&pgproto3.ParameterDescription{ParameterOIDs: parameterTypes(sql)})
			} else {
				sql = portalSQL
			}
			be.Send(&pgproto3.RowDescription{Fields: resultColumns(sql)})
		case *pgproto3.Bind:
			sql := prepared[m.PreparedStatement]
			portalSQL = sql
			types := parameterTypes(sql)
			values := make([]any, len(m.Parameters))
			for i, raw := range m.Parameters {
				format := int16(0)
				switch {
				case len(m.ParameterFormatCodes) == 1:
					format = m.ParameterFormatCodes[0]
				case i < len(m.ParameterFormatCodes):
					format = m.ParameterFormatCodes[i]
				}
				var v any
				if i < len(types) && raw != nil {
					if err := typeMap.Scan(types[i], format, raw, &v); err != nil {
						v = err
					}
				}
				values[i] = v
			}
			w.mu.Lock()
			w.binds = append(w.binds, values)
			w.mu.Unlock()
			be.Send(&pgproto3.BindComplete{})
		case *pgproto3.Execute:
			be.Send(&pgproto3.CommandComplete{CommandTag: []byte("SELECT 0")})
		case *pgproto3.Close:
			be.Send(&pgproto3.CloseComplete{})
		case *pgproto3.Sync:
			be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
		case *pgproto3.Query:
			be.Send(&pgproto3.EmptyQueryResponse{})
			be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
		case *pgproto3.Terminate:
			return
		}
		if be.Flush() != nil {
			return
		}
	}
}

// take returns and forgets what was recorded so far.
func (w *wireRecorder) take() (statements []string, binds [][]any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	statements, binds = w.statements, w.binds
	w.statements, w.binds = nil, nil
	return statements, binds
}

// marker is a word no statement contains. Every fuzzed query carries it,
// so a query built by pasting text into SQL would show it.
const marker = "qzxjvmarker"

// FuzzSearchQuery drives Store.Search with arbitrary query text, keywords
// and limits against the recording server. It checks that building the
// search never panics, that the terms are well formed, that every
// statement sent is one of the statements a fixed query sends (so the SQL
// text does not depend on the input), that the query's words never appear
// in any statement, and that they do arrive as bound parameters. The
// scope is already held, and the stem cache is emptied before each
// search, so that every search asks PostgreSQL to stem its words.
func FuzzSearchQuery(f *testing.F) {
	rec := startWireRecorder(f)
	ctx := context.Background()
	s, err := Open(ctx, rec.url(), Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(s.Close)
	scope := store.Scope{ID: 42}
	s.cache.add(newScopeIndex(scope.ID, 0, nil, map[string]int{}))
	forget := func() {
		s.stems.mu.Lock()
		clear(s.stems.stems)
		s.stems.bytes = 0
		s.stems.mu.Unlock()
	}

	// The statements of a plain search are the reference.
	_, _ = s.Search(ctx, scope, store.Query{Text: "weather forecast " + marker, Limit: 5}, store.DefaultRanking)
	reference, _ := rec.take()
	if !slices.Contains(reference, stemSQL) {
		f.Fatalf("a plain search sent %q, not the stem statement", reference)
	}

	for _, seed := range []struct {
		text, keywords string
		limit          int
	}{
		{"get the weather forecast", "weather", 8},
		{"'; DROP TABLE tool_documents; --", "' OR '1'='1", 8},
		{"%", "_%_", 1},
		{`\`, `\\'`, 3},
		{"$$ select 1 $$", "$1", 8},
		{"forecast & !weather | (city <-> x:*)", "'a':*", 0},
		{"quote_literal('x')::tsquery", "E'\\x00'", -1},
		{"getHTTPResponse_v2 snake_case kebab-case dotted.name", "camelCaseWord", 100},
		{"\x00\x01\x02 nul", "\xff\xfe", 8},
		{"Grüße, 東京の天気 — météo", "Ωmega", 8},
		{strings.Repeat("word ", 300), strings.Repeat("k", 5000), 1 << 30},
	} {
		f.Add(seed.text, seed.keywords, seed.limit)
	}

	f.Fuzz(func(t *testing.T, text, keywords string, limit int) {
		// The marker goes first: terms past maxTerms are dropped, the first never.
		q := store.Query{Text: marker + " " + text, Limit: max(limit, 1)}
		if keywords != "" {
			q.Keywords = strings.Split(keywords, "\n")
		}
		terms, boosts, key := store.DefaultRanking.Terms(q)
		if len(terms) != len(boosts) || len(terms) > store.MaxTerms || len(terms) == 0 {
			t.Fatalf("%d terms, %d boosts", len(terms), len(boosts))
		}
		for i, term := range terms {
			if term == "" || slices.Contains(terms[:i], term) {
				t.Fatalf("term %q of %q", term, terms)
			}
			if b := boosts[i]; b <= 0 || math.IsInf(b, 0) || math.IsNaN(b) {
				t.Fatalf("boost %v for %q", b, term)
			}
		}
		// The trigram key folds short (identifier-like) queries and is
		// empty for longer ones.
		words := len(store.SplitWords(q.Text))
		for _, k := range q.Keywords {
			words += len(store.SplitWords(k))
		}
		if words <= store.MaxTrigramWords && !strings.Contains(key, marker) || words > store.MaxTrigramWords && key != "" {
			t.Fatalf("trigram key %q for a query of %d words", key, words)
		}

		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		forget()
		_, _ = s.Search(sctx, scope, q, store.DefaultRanking)
		statements, binds := rec.take()
		for _, sql := range statements {
			if !slices.Contains(reference, sql) {
				t.Fatalf("query %q sent a statement a plain search does not send:\n%s", q.Text, sql)
			}
			if strings.Contains(sql, marker) {
				t.Fatalf("query text inside SQL:\n%s", sql)
			}
		}
		found := false
		for _, values := range binds {
			for _, v := range values {
				if words, ok := v.([]any); ok {
					for _, w := range words {
						found = found || w == marker
					}
				}
				if s, ok := v.(string); ok && strings.Contains(s, marker) {
					found = true
				}
			}
		}
		if !found {
			t.Fatalf("query words not among the bound parameters %v", binds)
		}
	})
}
