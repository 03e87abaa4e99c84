package app_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"

	"github.com/switchboard-mcp/switchboard/indexer/internal/storetest"
)

// BenchmarkFirstSearch measures the first Search of a principal nobody with
// its view has searched before, through gRPC: Discover, ListTools, the
// scope build and the search. Views are 200 tools of a 10,000-tool catalog.
func BenchmarkFirstSearch(b *testing.B) {
	h := start(b, env.NewDatabase(b))
	var catalog []*aggregatorv1.Tool
	var names []string
	for _, t := range storetest.SyntheticTools(10_000, 3) {
		catalog = append(catalog, &aggregatorv1.Tool{Name: t.Name, Description: t.Description, InputSchemaJson: t.InputSchemaJSON})
		names = append(names, t.Name)
	}
	h.agg.SetTools(catalog)
	h.waitServing(b)
	r := rand.New(rand.NewPCG(4, 4))
	i := 0
	for b.Loop() {
		b.StopTimer()
		subject := fmt.Sprintf("user-%d", i)
		view := make([]string, 200)
		for j := range view {
			view[j] = names[r.IntN(len(names))]
		}
		h.agg.SetView(subject, view)
		i++
		b.StartTimer()
		resp, err := h.client.Search(b.Context(), &indexerv1.SearchRequest{
			Principal: &commonv1.Principal{Subject: subject}, Query: storetest.SyntheticQuery(r),
		})
		if err != nil || len(resp.GetHits()) == 0 {
			b.Fatalf("first search: %v, %v", resp, err)
		}
	}
}
