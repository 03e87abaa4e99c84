// Package telemetry sets up OpenTelemetry tracing for a Switchboard process.
//
// W3C trace context propagation is always installed, so a trace that enters
// through the gateway continues through every service even when this process
// records nothing. Baggage is not propagated by any hop: Switchboard uses
// none, and what a caller puts in it would otherwise reach every service and
// every backend (the gateway never takes it from MCP clients either, and
// takes their traceparent only when configured to; see
// gateway.http.trustClientTraceparent). Spans are exported only when an OTLP
// endpoint is configured; otherwise the global provider stays a no-op and
// tracing costs next to nothing.
package telemetry

import (
	"context"
	"crypto/rand"
	"errors"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// Setup installs propagation and, when configured, an OTLP exporter. The
// returned function flushes and stops the exporter; call it on shutdown.
func Setup(ctx context.Context, cfg config.Telemetry, serviceName, version string) (func(context.Context) error, error) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	ratio := 1.0
	if cfg.SampleRatio != nil {
		ratio = *cfg.SampleRatio
	}
	setRootSampler(sdktrace.TraceIDRatioBased(ratio))
	if cfg.OTLPEndpoint == "" {
		recording.Store(false)
		return func(context.Context) error { return nil }, nil
	}
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(cfg.OTLPEndpoint)}
	if cfg.OTLPInsecure {
		opts = append(opts, otlptracegrpc.WithInsecure())
	}
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, err
	}
	res, err := resource.Merge(resource.Default(), resource.NewWithAttributes(semconv.SchemaURL,
		semconv.ServiceName(serviceName), semconv.ServiceVersion(version), semconv.ServiceNamespace("switchboard")))
	if err != nil && !errors.Is(err, resource.ErrSchemaURLConflict) {
		return nil, err
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(2*time.Second)),
		// A backstop under the bounds of what clients write (MaxSpanText):
		// no attribute value of any span is longer than this.
		sdktrace.WithRawSpanLimits(spanLimits()),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))),
	)
	otel.SetTracerProvider(tp)
	recording.Store(true)
	return tp.Shutdown, nil
}

// recording is whether this process exports spans.
var recording atomic.Bool

// Recording reports whether this process exports spans: Setup was given an
// OTLP endpoint. When it does not, the request path only carries the trace
// context it was handed (to the next service and to backends) and opens no
// spans: opening one through the global no-op provider still cost each hop
// allocations and, on the gRPC hop, about a tenth of the round trip's CPU.
func Recording() bool { return recording.Load() }

// SetRecording overrides what Recording reports, for tests that install a
// tracer provider of their own instead of calling Setup.
func SetRecording(on bool) { recording.Store(on) }

// maxAttributeBytes bounds every attribute value a span exports (an
// error's text, a statement): a backstop, well above MaxSpanText.
const maxAttributeBytes = 4 << 10

// spanLimits are the SDK's default limits with every attribute value cut
// to maxAttributeBytes.
func spanLimits() sdktrace.SpanLimits {
	l := sdktrace.NewSpanLimits()
	l.AttributeValueLengthLimit = maxAttributeBytes
	return l
}

// rootSampler samples the new traces NewRoot makes at
// telemetry.sampleRatio, as Setup was given it; every one until then.
var rootSampler atomic.Pointer[sdktrace.Sampler]

func init() { setRootSampler(sdktrace.AlwaysSample()) }

func setRootSampler(s sdktrace.Sampler) { rootSampler.Store(&s) }

// NewRoot is the span context of a new trace for a request a process
// opens no span of (it exports none): random ids, sampled as
// telemetry.sampleRatio samples a new trace, so that the services after
// it, which may export, sample it as they would have sampled one of
// their own. Its trace id names the request in every service's logs and
// audit events and in the error a client is told.
func NewRoot() trace.SpanContext {
	var ids [24]byte
	_, _ = rand.Read(ids[:]) // never fails (crypto/rand)
	cfg := trace.SpanContextConfig{TraceID: trace.TraceID(ids[:16]), SpanID: trace.SpanID(ids[16:])}
	p := sdktrace.SamplingParameters{ParentContext: context.Background(), TraceID: cfg.TraceID}
	if (*rootSampler.Load()).ShouldSample(p).Decision == sdktrace.RecordAndSample {
		cfg.TraceFlags = trace.FlagsSampled
	}
	return trace.NewSpanContext(cfg)
}
