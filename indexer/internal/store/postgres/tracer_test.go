package postgres_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
	"github.com/switchboard-mcp/switchboard/indexer/internal/store/postgres"
	"github.com/switchboard-mcp/switchboard/indexer/internal/storetest"
)

// recordSpans returns the process's tracer provider, which records every
// span, and its exporter, emptied. It is installed once: the store's
// tracer, like every tracer taken from the global provider before one is
// set, stays bound to the first provider set.
func recordSpans(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	r := spanRecorder()
	r.exporter.Reset()
	return r.provider, r.exporter
}

var spanRecorder = sync.OnceValue(func() (r struct {
	provider *sdktrace.TracerProvider
	exporter *tracetest.InMemoryExporter
}) {
	r.exporter = tracetest.NewInMemoryExporter()
	r.provider = sdktrace.NewTracerProvider(sdktrace.WithSyncer(r.exporter))
	otel.SetTracerProvider(r.provider)
	return r
})

// SQL statements become spans, and the query text (a bound parameter)
// never appears in them.
func TestSQLSpans(t *testing.T) {
	provider, exporter := recordSpans(t)

	st := env.OpenStore(t)
	sc, _, err := st.BuildScope(t.Context(), "d", 1, storetest.WeatherTools)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "confidential-plans-for-weather"
	ctx, parent := provider.Tracer("test").Start(t.Context(), "request")
	if _, err := st.Search(ctx, sc, store.Query{Text: secret, Limit: 8}, store.DefaultRanking); err != nil {
		t.Fatal(err)
	}
	parent.End()

	// The first search of a scope reads the scope, then stems the query's
	// words: both are spans under the request's.
	want := map[string]bool{"FROM tool_documents": false, "to_tsvector": false}
	for _, s := range exporter.GetSpans() {
		for _, a := range s.Attributes {
			if strings.Contains(a.Value.Emit(), "confidential") {
				t.Fatalf("span %s leaks the query text in %s", s.Name, a.Key)
			}
			for statement := range want {
				if s.Name == "postgresql.query" && a.Key == "db.statement" && strings.Contains(a.Value.AsString(), statement) {
					want[statement] = true
					if s.Parent.SpanID() != parent.SpanContext().SpanID() {
						t.Fatalf("span of %s is not a child of the request span", statement)
					}
				}
			}
		}
	}
	for statement, seen := range want {
		if !seen {
			t.Errorf("no span for the statement with %s among %d spans", statement, len(exporter.GetSpans()))
		}
	}
}

// A statement PostgreSQL refuses is an error span, but the error's text,
// which can quote the value refused, stays out of it: spans carry
// statements, never values.
func TestFailedSQLSpanNamesNoValue(t *testing.T) {
	_, exporter := recordSpans(t)

	cfg, err := pgx.ParseConfig(env.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tracer = postgres.QueryTracer{}
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	const secret = "confidential-plans-for-weather"
	var n int
	err = conn.QueryRow(t.Context(), "SELECT $1::text::int", secret).Scan(&n)
	if err == nil || !strings.Contains(err.Error(), secret) {
		t.Fatalf("PostgreSQL's refusal does not quote the value: %v", err)
	}
	var failed int
	for _, s := range exporter.GetSpans() {
		if s.Status.Code == codes.Error {
			failed++
		}
		texts := []string{s.Status.Description}
		for _, a := range s.Attributes {
			texts = append(texts, a.Value.Emit())
		}
		for _, e := range s.Events {
			for _, a := range e.Attributes {
				texts = append(texts, a.Value.Emit())
			}
		}
		for _, text := range texts {
			if strings.Contains(text, "confidential") {
				t.Fatalf("span %s carries the refused value: %s", s.Name, text)
			}
		}
	}
	if failed != 1 {
		t.Fatalf("%d error spans of %d, want the refused statement's", failed, len(exporter.GetSpans()))
	}
}
