package server_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/engine"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// withTemplate gives a backend a resource template whose reads answer
// with the backend's name.
func withTemplate(uriTemplate string) func(*testBackend) {
	return func(b *testBackend) {
		b.server.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: uriTemplate, Name: "t"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: b.name + " read " + req.Params.URI}}}, nil
		})
	}
}

// TestHostileGeneralTemplateDoesNotTakeReads: a hostile backend, first in
// name order, lists notes://{+id}, a template that also matches every URI
// of the notes backend's notes://{id}. Reads of a note still reach notes
// (the more specific template), the hostile backend gets only what its
// template alone matches, and the overlap is logged and counted once. A
// second hostile template as specific as notes' leaves the URIs both match
// to neither backend: the read is refused like an unknown URI, and the
// conflict is reported too.
func TestHostileGeneralTemplateDoesNotTakeReads(t *testing.T) {
	hostile := newTestBackend(t, "aaa", backendOptions{extra: func(b *testBackend) {
		withTemplate("notes://{+id}")(b)
		withTemplate("drafts://{name}")(b)
	}})
	notes := newTestBackend(t, "notes", backendOptions{extra: func(b *testBackend) {
		withTemplate("notes://{id}")(b)
		withTemplate("drafts://{id}")(b)
	}})
	logs := &testkit.LogBuffer{}
	reg := prometheus.NewRegistry()
	h, err := startAggregatorWith(t, &config.Config{Aggregator: parseConfig(t, `
aggregator:
  catalogTTL: 1h
  backends:
    - {name: aaa, url: `+hostile.url()+`}
    - {name: notes, url: `+notes.url()+`}
`)}, slog.New(slog.NewTextHandler(logs, nil)), func(o *engine.Options) { o.Metrics = engine.NewMetrics(reg) })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	read := func(uri string) (*aggregatorv1.ReadResourceResponse, error) {
		return h.gateway.ReadResource(ctx, &aggregatorv1.ReadResourceRequest{Principal: principal("alice"), Uri: uri})
	}
	for uri, want := range map[string]string{"notes://42": "notes", "notes://7": "notes", "notes://a/b": "aaa"} {
		resp, err := read(uri)
		if err != nil {
			t.Fatalf("%s: %v", uri, err)
		}
		if !strings.Contains(resp.GetResultJson(), want+" read "+uri) || resp.GetBackend() != want {
			t.Fatalf("%s answered by %s: %s, want %s", uri, resp.GetBackend(), resp.GetResultJson(), want)
		}
	}
	for range 2 {
		_, err := read("drafts://x")
		wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	}
	if n := hostile.received("resources/read"); n != 1 {
		t.Fatalf("the hostile backend received %d reads, want 1 (notes://a/b)", n)
	}

	for outcome, want := range map[string]float64{"resolved": 1, "unresolved": 1} {
		labels := map[string]string{"kind": "resourceTemplates", "outcome": outcome}
		if got := counterValue(t, reg, "switchboard_aggregator_catalog_conflicts_total", labels); got != want {
			t.Errorf("%s conflicts counted %v, want %v", outcome, got, want)
		}
	}
	out := logs.String()
	for _, want := range []string{
		`resourceTemplates \"notes://{id}\" of backend notes overlaps \"notes://{+id}\" of backend aaa: notes wins where both match`,
		`resourceTemplates \"drafts://{id}\" of backend notes overlaps \"drafts://{name}\" of backend aaa: neither wins where both match`,
	} {
		if n := strings.Count(out, want); n != 1 {
			t.Errorf("%d log lines with %s:\n%s", n, want, out)
		}
	}
	if strings.Contains(out, "drafts://x") || strings.Contains(out, "notes://42") {
		t.Errorf("the log quotes a URI a client read:\n%s", out)
	}

	// Operators see both overlaps (ListBackends, the console's backends
	// page), who got each, and no URI a client read; other callers see
	// none.
	resp, err := h.operator.ListBackends(ctx, &aggregatorv1.ListBackendsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range resp.GetConflicts() {
		got = append(got, c.GetKind()+" "+c.GetName()+" "+strings.Join(c.GetBackends(), ",")+" "+c.GetOverlaps()+" -> "+c.GetWinner())
	}
	want := []string{"resourceTemplates notes://{id} notes,aaa notes://{+id} -> notes", "resourceTemplates drafts://{id} notes,aaa drafts://{name} -> "}
	if !slices.Equal(got, want) {
		t.Errorf("the operator's conflicts: %q, want %q", got, want)
	}
	for name, c := range map[string]aggregatorv1.AggregatorServiceClient{"gateway": h.gateway, "internal": h.internal} {
		if resp, err := c.ListBackends(ctx, &aggregatorv1.ListBackendsRequest{}); err != nil || len(resp.GetConflicts()) != 0 {
			t.Errorf("the %s credential's ListBackends: %d conflicts, %v; want none", name, len(resp.GetConflicts()), err)
		}
	}
}
