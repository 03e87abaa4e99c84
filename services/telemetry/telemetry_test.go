package telemetry

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// collector is an OTLP trace receiver with gRPC's default message bound
// (4 MiB), as a collector's otlp receiver has by default.
type collector struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string
}

func (c *collector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.names = append(c.names, s.GetName())
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// TestOneSpanCostsNoOtherSpans: a request whose span would carry
// megabytes (a client's tool name, an attribute nobody bounded) is
// exported bounded, so the batch it shares with other requests' spans
// reaches the collector; such a batch was once refused whole.
func TestOneSpanCostsNoOtherSpans(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	col := &collector{}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, col)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	prev := otel.GetTracerProvider()
	t.Cleanup(func() { otel.SetTracerProvider(prev); SetRecording(false) })
	shutdown, err := Setup(context.Background(), config.Telemetry{OTLPEndpoint: lis.Addr().String(), OTLPInsecure: true}, "switchboard-test", "test")
	if err != nil {
		t.Fatal(err)
	}
	tr := otel.Tracer("test")
	for range 10 {
		_, s := tr.Start(context.Background(), "tools/list")
		s.End()
	}
	name, attrs := MCPSpan("tools/call", strings.Repeat("x", 2<<20), nil)
	_, s := tr.Start(context.Background(), name)
	s.SetAttributes(attrs...)
	s.SetAttributes(attribute.String("db.statement", strings.Repeat("y", 5<<20)))
	s.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatalf("export: %v", err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	listed := 0
	for _, n := range col.names {
		if n == "tools/list" {
			listed++
		}
	}
	if listed != 10 || len(col.names) != 11 {
		t.Fatalf("the collector received %d spans, %d of the 10 others", len(col.names), listed)
	}
}

// TestNewRootIsSampledAsNewTraces: a process that exports no spans
// gives its requests a new trace's context sampled as
// telemetry.sampleRatio samples new traces, so that the services after it
// sample them as their own; an unsampled one would have made every
// service after it, exporting at any ratio, drop the request's trace.
func TestNewRootIsSampledAsNewTraces(t *testing.T) {
	t.Cleanup(func() { setRootSampler(sdktrace.AlwaysSample()) })
	for _, c := range []struct {
		ratio       float64
		sampled, of int
	}{{1, 100, 100}, {0, 0, 100}} {
		if _, err := Setup(context.Background(), config.Telemetry{SampleRatio: &c.ratio}, "switchboard-test", "test"); err != nil {
			t.Fatal(err)
		}
		sampled, ids := 0, map[trace.TraceID]bool{}
		for range c.of {
			sc := NewRoot()
			if !sc.IsValid() || ids[sc.TraceID()] {
				t.Fatalf("a root context %v: invalid, or its trace id repeated", sc)
			}
			ids[sc.TraceID()] = true
			if sc.IsSampled() {
				sampled++
			}
		}
		if sampled != c.sampled {
			t.Errorf("sampleRatio %v: %d of %d new roots sampled, want %d", c.ratio, sampled, c.of, c.sampled)
		}
	}
}
