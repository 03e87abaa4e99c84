package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/server"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

func toolNamesN(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("tool_%05d", i)
	}
	return names
}

// BenchmarkListToolsPage10k serves the first 1000-tool page of a 10,000
// tool catalog over real gRPC (loopback, service-token auth), with no
// policy and with a Cedar policy (the principal's view is cached per
// snapshot, so this is the steady-state cost).
func BenchmarkListToolsPage10k(b *testing.B) {
	for _, policy := range []string{"", `permit (principal in Group::"eng", action, resource);`} {
		name := "no-policy"
		if policy != "" {
			name = "cedar"
		}
		b.Run(name, func(b *testing.B) {
			big := newBenchBackend(b, "big", 10000)
			cfg := "aggregator:\n  backends:\n    - {name: big, url: " + big.url() + "}\n"
			if policy != "" {
				cfg += "  authz: {policyFile: " + writeFile(b, "p.cedar", policy) + "}\n"
			}
			h := startAggregator(b, parseConfig(b, cfg))
			req := &aggregatorv1.ListToolsRequest{Principal: principal("alice", "eng")}
			resp, err := h.gateway.ListTools(context.Background(), req)
			if err != nil || len(resp.GetTools()) != 1000 {
				b.Fatalf("first page: %d tools, %v", len(resp.GetTools()), err)
			}
			b.Run("grpc", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := h.gateway.ListTools(context.Background(), req); err != nil {
						b.Fatal(err)
					}
				}
			})
			// The handler alone, without gRPC transport and marshalling.
			svc := server.New(h.engine)
			ctx := svcauth.WithPrincipal(context.Background(), req.GetPrincipal())
			b.Run("handler", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := svc.ListTools(ctx, req); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkRefresh20x500 rebuilds the snapshot from 20 live backends of
// 500 tools each: parallel listing over HTTP (pooled sessions), naming,
// sorting, digests and the content comparison.
func BenchmarkRefresh20x500(b *testing.B) {
	var cfg strings.Builder
	cfg.WriteString("aggregator:\n  catalogTTL: 1h\n  fanOut: 10\n  backends:\n")
	for i := range 20 {
		bk := newBenchBackend(b, fmt.Sprintf("b%02d", i), 500)
		fmt.Fprintf(&cfg, "    - {name: b%02d, url: %s}\n", i, bk.url())
	}
	h := startAggregator(b, parseConfig(b, cfg.String()))
	if snap := h.engine.Refresh(context.Background()); len(snap.Tools) != 20*502 {
		b.Fatalf("snapshot has %d tools", len(snap.Tools))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		h.engine.Refresh(context.Background())
	}
}

func newBenchBackend(b testing.TB, name string, tools int) *testBackend {
	return newTestBackend(b, name, backendOptions{tools: toolNamesN(tools)})
}
