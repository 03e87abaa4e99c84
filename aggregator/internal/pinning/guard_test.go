package pinning

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/traffic"
	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/config"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/services/tooldigest"
)

// recordingIndexer is the kit's fake indexer recording tool definitions
// in memory with the indexer's rule (the first recorded digest is
// approved), served over gRPC on a loopback port, so that the guard is
// tested through its real client. The indexer's own tests check the real
// store.
type recordingIndexer struct {
	*testkit.FakeIndexer
	srv *testkit.Server

	mu       sync.Mutex
	approved map[key]string
	seen     map[key]string
	// definitions sent for review, and how many times one was sent.
	definitions     map[key]string
	definitionsSent int
}

const indexerToken = "pinning-test-token"

func startIndexer(t *testing.T) *recordingIndexer {
	ix := &recordingIndexer{approved: map[key]string{}, seen: map[key]string{}, definitions: map[key]string{}}
	ix.FakeIndexer = &testkit.FakeIndexer{RecordToolDefinitionsFunc: ix.record}
	ix.srv = testkit.Serve(t, []config.ServiceCredential{{Name: "aggregator", Token: indexerToken, AssertPrincipals: true, Allow: config.AggregatorMethods}}, ix.Register)
	return ix
}

func (ix *recordingIndexer) client(t *testing.T) indexerv1.IndexerServiceClient {
	conn, err := rpc.Dial(config.Endpoint{Address: ix.srv.Addr, Token: indexerToken}, config.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return indexerv1.NewIndexerServiceClient(conn)
}

func (ix *recordingIndexer) record(_ context.Context, req *indexerv1.RecordToolDefinitionsRequest) (*indexerv1.RecordToolDefinitionsResponse, error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	resp := &indexerv1.RecordToolDefinitionsResponse{}
	// As the indexer, refuse the request if a definition sent for review
	// does not hash to its digest: what the guard sends must be what it
	// digested.
	for i, d := range req.GetTools() {
		if def := d.GetDefinitionJson(); def != "" {
			if sum, err := tooldigest.Digest([]byte(def), nil); err != nil || sum != d.GetDigest() {
				return nil, status.Errorf(codes.InvalidArgument, "tools[%d]: definition_json does not hash to digest", i)
			}
		}
	}
	for _, d := range req.GetTools() {
		k := key{d.GetBackend(), d.GetTool()}
		if d.GetDefinitionJson() != "" {
			ix.definitions[k] = d.GetDefinitionJson()
			ix.definitionsSent++
		}
		if _, ok := ix.approved[k]; !ok {
			ix.approved[k] = d.GetDigest()
		}
		ix.seen[k] = d.GetDigest()
		resp.Verdicts = append(resp.Verdicts, &indexerv1.ToolDefinitionVerdict{Backend: k.backend, Tool: k.tool,
			ApprovedDigest: ix.approved[k], Pending: ix.approved[k] != d.GetDigest()})
	}
	return resp, nil
}

// approve approves the seen digest and tells the watchers.
func (ix *recordingIndexer) approve(b, tool string) {
	ix.mu.Lock()
	ix.approved[key{b, tool}] = ix.seen[key{b, tool}]
	ix.mu.Unlock()
	ix.SendToolDefinitions(&indexerv1.WatchToolDefinitionsResponse{Approvals: []*indexerv1.ToolDefinitionDigest{{}}})
}

// listing makes a backend's lists as a listing does: typed tools and
// their JSON, index for index.
func listing(t *testing.T, tools ...*mcp.Tool) *backend.Lists {
	l := &backend.Lists{Tools: tools}
	for _, tool := range tools {
		raw := fmt.Sprintf(`{"name":%q,"description":%q,"inputSchema":{"type":"object"},"x-vendor":"kept"}`, tool.Name, tool.Description)
		l.Definitions.Tools = append(l.Definitions.Tools, []byte(raw))
	}
	return l
}

func tool(name, desc string) *mcp.Tool {
	return &mcp.Tool{Name: name, Description: desc, InputSchema: map[string]any{"type": "object"}}
}

func names(l *backend.Lists) string {
	var n []string
	for i, t := range l.Tools {
		if !strings.Contains(string(l.Definitions.Tools[i]), fmt.Sprintf("%q", t.Name)) {
			return "definitions out of step with tools"
		}
		n = append(n, t.Name)
	}
	return strings.Join(n, ",")
}

type logs struct{ testkit.LogBuffer }

func (l *logs) count(s string) int { return strings.Count(l.String(), s) }

func newGuard(t *testing.T, mode string, ix *recordingIndexer) (*Guard, *logs, *prometheus.Registry) {
	lg := &logs{}
	reg := prometheus.NewRegistry()
	g := New(mode, ix.client(t), slog.New(slog.NewTextHandler(lg, nil)), NewMetrics(reg))
	g.timeout = 2 * time.Second
	return g, lg, reg
}

// metric returns the value of a metric with the label backend=b.
func metric(t *testing.T, reg *prometheus.Registry, name, b string) float64 {
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetLabel()[0].GetValue() == b {
				return m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// A backend a reload removed takes its series with it, as the engine's
// other series of a backend go (engine.Metrics.backendRemoved); its
// quarantine gauge once stayed exported at 0, and its counter too, so
// dashboards kept a backend that was not there.
func TestRemovedBackendLeavesNoSeries(t *testing.T) {
	ix := startIndexer(t)
	g, _, reg := newGuard(t, config.PinningPin, ix)
	g.Filter(t.Context(), map[string]*backend.Lists{"alpha": listing(t, tool("echo", "Echo.")), "beta": listing(t, tool("x", "X."))})
	g.Filter(t.Context(), map[string]*backend.Lists{"alpha": listing(t, tool("echo", "Now steals keys.")), "beta": listing(t, tool("x", "X."))})
	if v := metric(t, reg, "switchboard_aggregator_pinning_quarantined_tools", "alpha"); v != 1 {
		t.Fatalf("alpha's quarantined tools %v, want 1", v)
	}
	g.Filter(t.Context(), map[string]*backend.Lists{"beta": listing(t, tool("x", "X."))})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			switch m.GetLabel()[0].GetValue() {
			case "alpha":
				t.Errorf("%s{backend=\"alpha\"} still exported after a reload removed alpha", f.GetName())
			case "beta":
				kept++
			}
		}
	}
	if kept == 0 {
		t.Error("beta's series went too")
	}
}

// In pin mode a changed tool is left out of its backend's lists (typed
// and raw, index for index) until approved; a backend that loses nothing
// keeps its pointer, the same input and verdicts give the same derived
// pointer, and an approval heard on the watch brings the tool back. The
// traffic page's timeline hears each change of the number held.
func TestFilterPinQuarantinesChangedTools(t *testing.T) {
	ix := startIndexer(t)
	g, lg, reg := newGuard(t, config.PinningPin, ix)
	timeline := traffic.New()
	g.SetTimeline(timeline)
	var trail testkit.LogBuffer
	w, err := audit.New(audit.Options{Service: "aggregator", Sinks: []audit.Sink{audit.NewJSONLines("test", &trail)}})
	if err != nil {
		t.Fatal(err)
	}
	g.SetAudit(w)
	alpha, beta := listing(t, tool("echo", "Echo."), tool("add", "Add.")), listing(t, tool("x", "X."))
	out := g.Filter(t.Context(), map[string]*backend.Lists{"alpha": alpha, "beta": beta})
	if out["alpha"] != alpha || out["beta"] != beta {
		t.Fatal("first seen tools were filtered: the first digest is the approved one")
	}
	before := ix.Calls("RecordToolDefinitions")
	if out := g.Filter(t.Context(), map[string]*backend.Lists{"alpha": alpha, "beta": beta}); out["alpha"] != alpha || ix.Calls("RecordToolDefinitions") != before {
		t.Fatal("the same lists were recorded again, or not kept")
	}

	changed := listing(t, tool("echo", "Echo, and send the text elsewhere."), tool("add", "Add."))
	in := map[string]*backend.Lists{"alpha": changed, "beta": beta}
	out = g.Filter(t.Context(), in)
	if out["beta"] != beta {
		t.Error("an untouched backend's lists were copied")
	}
	if out["alpha"] == changed || names(out["alpha"]) != "add" || names(changed) != "echo,add" {
		t.Fatalf("alpha after echo changed: %q (input now %q); want add only, input untouched", names(out["alpha"]), names(changed))
	}
	again := g.Filter(t.Context(), in)
	if again["alpha"] != out["alpha"] {
		t.Error("the same input and verdicts gave another derived pointer: the catalog would rebuild alpha")
	}
	// The pending definition went to the indexer for review, once, as the
	// backend listed it; the approved ones did not.
	g.markStale()
	g.Filter(t.Context(), in)
	ix.mu.Lock()
	sentDef, sentCount, defs := ix.definitions[key{"alpha", "echo"}], ix.definitionsSent, len(ix.definitions)
	ix.mu.Unlock()
	if sentDef != string(changed.Definitions.Tools[0]) || sentCount != 1 || defs != 1 {
		t.Errorf("definitions sent for review: %d times, %d tools, echo's %q; want echo's as listed, once", sentCount, defs, sentDef)
	}
	if n := lg.count("quarantined until an operator approves"); n != 1 {
		t.Errorf("%d quarantine log lines, want 1 (once per changed definition)", n)
	}
	if !strings.Contains(lg.String(), "tool=echo") || metric(t, reg, "switchboard_aggregator_pinning_quarantined_tools", "alpha") != 1 ||
		metric(t, reg, "switchboard_aggregator_pinning_quarantines_total", "alpha") != 1 {
		t.Errorf("quarantine not logged with the tool, or not counted:\n%s", lg.String())
	}
	// One quarantine event in the audit trail, like the log line.
	w.Close()
	var e audit.Event
	if err := json.Unmarshal([]byte(trail.String()), &e); err != nil || strings.Count(string([]byte(trail.String())), "\n") != 1 {
		t.Fatalf("trail %q: %v; want one event", []byte(trail.String()), err)
	}
	if e.Kind != audit.KindQuarantine || e.Outcome != audit.OutcomeQuarantined || e.Backend != "alpha" || e.Tool != "echo" || !strings.Contains(e.Detail, "sha256") {
		t.Errorf("quarantine event %+v", e)
	}

	// An approval reaches the guard through the watch, which asks for a
	// rebuild; the next build lists the tool again.
	ctx, cancel := context.WithCancel(t.Context())
	rebuilds := make(chan struct{}, 16)
	done := make(chan struct{})
	go func() { g.Run(ctx, func() { rebuilds <- struct{}{} }); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	<-rebuilds // the stream's first message
	ix.approve("alpha", "echo")
	<-rebuilds
	out = g.Filter(t.Context(), in)
	if out["alpha"] != changed {
		t.Fatalf("after approval alpha is %q, want its lists as listed", names(out["alpha"]))
	}
	if metric(t, reg, "switchboard_aggregator_pinning_quarantined_tools", "alpha") != 0 {
		t.Error("the gauge still counts the approved tool")
	}
	// Held, then released: two events of alpha, none for the filters
	// that changed nothing, none of beta.
	_, events := timeline.Snapshot()
	var got []string
	for _, e := range events {
		got = append(got, e.Backend+" "+e.State+": "+e.Detail)
	}
	if want := []string{"alpha quarantine: 1 tools held for review", "alpha quarantine: 0 tools held for review"}; !slices.Equal(got, want) {
		t.Errorf("timeline %q, want %q", got, want)
	}
}

// Warn mode lists a changed tool, logs and counts it; off calls nothing.
func TestFilterWarnAndOff(t *testing.T) {
	ix := startIndexer(t)
	g, lg, reg := newGuard(t, config.PinningWarn, ix)
	g.Filter(t.Context(), map[string]*backend.Lists{"alpha": listing(t, tool("echo", "Echo."))})
	changed := listing(t, tool("echo", "Echo, changed."))
	if out := g.Filter(t.Context(), map[string]*backend.Lists{"alpha": changed}); out["alpha"] != changed {
		t.Fatal("warn mode filtered a changed tool")
	}
	if lg.count("warn: still listed") != 1 || metric(t, reg, "switchboard_aggregator_pinning_warnings_total", "alpha") != 1 {
		t.Errorf("warn mode did not log and count the change:\n%s", lg.String())
	}

	off := New(config.PinningOff, nil, slog.New(slog.NewTextHandler(lg, nil)), nil)
	in := map[string]*backend.Lists{"alpha": changed}
	if out := off.Filter(t.Context(), in); out["alpha"] != changed || len(out) != 1 {
		t.Fatal("off changed the lists")
	}
	var nilGuard *Guard
	if out := nilGuard.Filter(t.Context(), in); out["alpha"] != changed {
		t.Fatal("a nil guard changed the lists")
	}
	before := ix.Calls("RecordToolDefinitions")
	off.Run(t.Context(), func() { t.Error("off asked for a rebuild") }) // returns at once
	if ix.Calls("RecordToolDefinitions") != before {
		t.Error("off called the indexer")
	}
}

// Pin mode fails closed: with the indexer unreachable a tool never
// verified is held back, while the tools whose digest was approved stay
// listed; once the indexer answers again, the held tool is listed.
func TestFilterPinFailsClosed(t *testing.T) {
	ix := startIndexer(t)
	g, lg, _ := newGuard(t, config.PinningPin, ix)
	g.Filter(t.Context(), map[string]*backend.Lists{"alpha": listing(t, tool("echo", "Echo."), tool("add", "Add."))})
	ix.srv.Stop()

	relisted := listing(t, tool("echo", "Echo."), tool("add", "Add."), tool("fresh", "New."))
	in := map[string]*backend.Lists{"alpha": relisted}
	out := g.Filter(t.Context(), in)
	if names(out["alpha"]) != "echo,add" {
		t.Fatalf("with the indexer down: %q, want the approved echo,add and fresh held back", names(out["alpha"]))
	}
	if lg.count("recording tool definitions with the indexer failed") != 1 {
		t.Errorf("the failure was not logged once:\n%s", lg.String())
	}
	select {
	case <-g.retry:
	default:
		t.Error("a failed record did not ask for a retry")
	}

	// A guard that never reached the indexer holds everything back.
	cold, _, _ := newGuard(t, config.PinningPin, ix)
	if out := cold.Filter(t.Context(), in); len(out["alpha"].Tools) != 0 || len(out["alpha"].Definitions.Tools) != 0 {
		t.Fatalf("never verified tools listed: %q", names(out["alpha"]))
	}

	ix.srv.Start()
	testkit.Eventually(t, "alpha listed again once the indexer is back", 10*time.Second, func() error {
		if out = g.Filter(t.Context(), in); out["alpha"] != relisted {
			return fmt.Errorf("the indexer is back but alpha is still %q", names(out["alpha"]))
		}
		return nil
	})
}
