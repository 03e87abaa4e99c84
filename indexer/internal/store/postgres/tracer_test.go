package store_test

import (
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
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
	sc, _, err := st.BuildScope(t.Context(), "d", 1, weatherTools)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "confidential-plans-for-weather"
	ctx, parent := provider.Tracer("test").Start(t.Context(), "request")
	if _, err := st.Search(ctx, sc, store.Query{Text: secret, Limit: 8}, store.DefaultRanking); err != nil {
		t.Fatal(err)
	}
	parent.End()

	var searchSpan bool
	for _, s := range exporter.GetSpans() {
		for _, a := range s.Attributes {
			if strings.Contains(a.Value.Emit(), "confidential") {
				t.Fatalf("span %s leaks the query text in %s", s.Name, a.Key)
			}
			if s.Name == "postgresql.query" && a.Key == "db.statement" && strings.Contains(a.Value.AsString(), "word_similarity") {
				searchSpan = true
				if s.Parent.SpanID() != parent.SpanContext().SpanID() {
					t.Fatalf("search span is not a child of the request span")
				}
			}
		}
	}
	if !searchSpan {
		t.Fatalf("no span for the search statement among %d spans", len(exporter.GetSpans()))
	}
}
