package catalog

import (
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/services/config"
)

func benchLists(backends, tools int) map[string]*backend.Lists {
	m := map[string]*backend.Lists{}
	for b := range backends {
		l := &backend.Lists{}
		for i := range tools {
			l.Tools = append(l.Tools, &mcp.Tool{
				Name:        fmt.Sprintf("tool_%04d", i),
				Description: "Looks up records of kind " + fmt.Sprint(i) + " and returns them as JSON.",
				InputSchema: map[string]any{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string"}}},
			})
		}
		m[fmt.Sprintf("backend-%02d", b)] = l
	}
	return m
}

// BenchmarkBuild20x500 builds a snapshot from 20 backends of 500 tools
// each (naming, conflict resolution, sorting, digests, API messages).
func BenchmarkBuild20x500(b *testing.B) {
	n := mustNaming(b, config.ConflictResolution{})
	lists := benchLists(20, 500)
	b.ReportAllocs()
	for b.Loop() {
		Build(n, lists, nil, quiet)
	}
}

// BenchmarkRebuildOneChanged20x500 rebuilds the 20x500 snapshot after one
// backend was listed again: only its 500 tools are converted, the other
// 9,500 items are reused.
func BenchmarkRebuildOneChanged20x500(b *testing.B) {
	bd := NewBuilder(mustNaming(b, config.ConflictResolution{}), quiet)
	lists := benchLists(20, 500)
	bd.Build(lists, nil)
	b.ReportAllocs()
	for b.Loop() {
		relisted := *lists["backend-07"]
		lists["backend-07"] = &relisted
		bd.Build(lists, nil)
	}
}

// BenchmarkPage10k selects one 1000-item page in the middle of 10,000
// tools from a cursor.
func BenchmarkPage10k(b *testing.B) {
	s := Build(mustNaming(b, config.ConflictResolution{}), benchLists(20, 500), nil, quiet)
	v := s.View("", nil)
	key := func(i int) string { return v.Key(KindTools, i) }
	_, _, cur, _ := Page(KindTools, v.Len(KindTools), key, "", 5000)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := Page(KindTools, v.Len(KindTools), key, cur, 1000); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkView10k computes an unfiltered view of 10,000 tools
// (done once per snapshot and principal, then cached).
func BenchmarkView10k(b *testing.B) {
	s := Build(mustNaming(b, config.ConflictResolution{}), benchLists(20, 500), nil, quiet)
	b.ReportAllocs()
	for b.Loop() {
		s.newView(func(Kind, string, string) bool { return true })
	}
}
