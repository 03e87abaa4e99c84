package postgres_test

import (
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
	"github.com/switchboard-mcp/switchboard/indexer/internal/storetest"
)

// SQL statements become spans, and the query text (a bound parameter)
// never appears in them.
func TestSQLSpans(t *testing.T) {
	exporter := tracetest.NewInMemoryExporter()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	previous := otel.GetTracerProvider()
	otel.SetTracerProvider(provider)
	t.Cleanup(func() { otel.SetTracerProvider(previous) })

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
