package edge

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/gateway/internal/methods"
	"github.com/switchboard-mcp/switchboard/gateway/internal/session"
	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
	"github.com/switchboard-mcp/switchboard/services/telemetry"
	"github.com/switchboard-mcp/switchboard/services/textcut"
)

// Metrics are the gateway's Prometheus metrics.
type Metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	streams  *prometheus.GaugeVec
}

// NewMetrics registers the gateway metrics in reg; nil makes a private
// registry (tests).
func NewMetrics(reg *prometheus.Registry) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &Metrics{
		registry: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_gateway_mcp_requests_total",
			Help: "MCP messages received, by method, era and outcome (ok, error, rejected, cancelled: given up on by the client).",
		}, []string{"method", "era", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchboard_gateway_mcp_request_duration_seconds",
			Help:    "Time to answer an MCP request (for streams: until the stream ends).",
			Buckets: latencyBuckets,
		}, []string{"method", "era"}),
		streams: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchboard_gateway_open_streams",
			Help: "Open long-lived streams: Modern subscriptions/listen, Legacy GET and Legacy tasks/result waits.",
		}, []string{"kind"}),
	}
	// Every kind of stream exists from the start (methods/listen.go), so the
	// dashboard's open streams read 0 rather than nothing.
	for _, kind := range []string{"listen", "legacy_get", "task_result"} {
		m.streams.WithLabelValues(kind)
	}
	reg.MustRegister(m.requests, m.latency, m.streams)
	return m
}

// registerSessionState registers switchboard_gateway_session_state_sessions
// and switchboard_gateway_session_state_bytes: what Legacy sessions hold
// on this replica (gateway.sessions bounds both).
func (m *Metrics) registerSessionState(local *session.Local) error {
	sessions := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchboard_gateway_session_state_sessions",
		Help: "Legacy sessions holding state (subscriptions, a log level) on this replica.",
	}, func() float64 { n, _ := local.Held(); return float64(n) })
	bytes := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchboard_gateway_session_state_bytes",
		Help: "Bytes of the state Legacy sessions hold on this replica, overhead included (bounded by gateway.sessions.maxStateBytes).",
	}, func() float64 { _, b := local.Held(); return float64(b) })
	for _, c := range []prometheus.Collector{sessions, bytes} {
		if err := m.registry.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// methodLabel bounds the method label to the methods MCP defines, the
// client notifications and the session's GET and DELETE, so arbitrary
// client method names cannot blow up metric cardinality.
func methodLabel(method string) string {
	if _, ok := mcpspec.Methods[method]; ok {
		return method
	}
	switch method {
	case "notifications/initialized", "notifications/cancelled", "GET", "DELETE":
		return method
	}
	return "other"
}

// openStream counts an open notification stream of kind until done.
func (m *Metrics) openStream(kind string) (done func()) {
	g := m.streams.WithLabelValues(kind)
	g.Inc()
	return g.Dec
}

// latencyBuckets bound the request duration histogram. The latency
// objective (p95 of tools/call under 2 s, deploy/monitoring) is a bucket
// boundary, with close ones around it: a quantile interpolated across a
// wide bucket that straddled 2 s fired the alert when no call took 2 s.
var latencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 1.5, 2, 3, 5, 10, 30}

// requestRecord collects what a request's span and metrics report, and
// what the audit trail needs of a request the gateway refuses
// (auditRefusal).
type requestRecord struct {
	start   time.Time
	method  string
	era     mcpspec.Era
	outcome string
	// req is the request once read (nil for a notification or a
	// response), and err the error it was answered with, if any.
	req *methods.Request
	err *wire.Error
	// spanPending: the request's span waits for its body, whose _meta may
	// name the trusted parent (joinMetaTrace); r is what it describes.
	spanPending bool
	r           *http.Request
	// metaParent: no span is recorded, and a trusted parent in the body's
	// _meta becomes the request context's remote parent (joinMetaTrace).
	metaParent bool
}

// done records a method's outcome: an error the client caused (bad
// input, a limit, an item it may not see) is rejected, not a failure of
// the service, which the availability objective counts.
func (rec *requestRecord) done(rerr *wire.Error) {
	rec.outcome, rec.err = "ok", rerr
	switch {
	case rerr == nil:
	case rerr.ClientFault():
		rec.outcome = "rejected"
	default:
		rec.outcome = "error"
	}
}

func (rec *requestRecord) setMethod(span trace.Span, method string) {
	rec.method = method
	if span.IsRecording() {
		// The client's method, before it is known to be one.
		span.SetName(textcut.Prefix(method, telemetry.MaxSpanText))
		span.SetAttributes(telemetry.TextAttribute("mcp.method.name", method))
	}
}

// describe names the request's span and sets its attributes as the
// OpenTelemetry conventions for MCP define them (telemetry.MCPSpan), with
// jsonrpc.request.id. mcp.session.id is left out: a Legacy session id is
// a credential. The optimizer's call_tool names the tool it calls
// (methods/optimizer.go).
func describe(span trace.Span, msg *wire.Message) {
	if !span.IsRecording() {
		return
	}
	var attrs []attribute.KeyValue
	if len(msg.ID) > 0 {
		id := string(msg.ID)
		if s, err := strconv.Unquote(id); err == nil {
			id = s
		}
		attrs = append(attrs, telemetry.TextAttribute("jsonrpc.request.id", id))
	}
	target := ""
	if param := telemetry.MCPTargetParam(msg.Method); param != "" {
		target, _ = msg.Params.String(param)
	}
	name, attrs := telemetry.MCPSpan(msg.Method, target, attrs)
	span.SetName(name)
	span.SetAttributes(attrs...)
}

var tracer = otel.Tracer("github.com/switchboard-mcp/switchboard/gateway")

// clientPropagator reads the trace context MCP clients send: W3C
// traceparent and tracestate, never baggage, which would otherwise travel
// on to the services and every backend.
var clientPropagator = propagation.TraceContext{}

// startRequest opens the server span of one MCP request. A client's W3C
// traceparent is its parent only with gateway.http.trustClientTraceparent;
// otherwise the span starts a trace of its own (so the client can neither
// force nor suppress sampling, nor choose the trace id the sampler sees),
// linked to the client's span context for correlation.
//
// A gateway that exports no spans (telemetry.Recording) opens none: a
// trusted client's context is still carried on to the services, and an
// untrusted one is dropped, as a span of a new trace would have done.
func (g *Gateway) startRequest(r *http.Request) (context.Context, trace.Span, *requestRecord) {
	ctx := r.Context()
	rec := &requestRecord{start: time.Now(), outcome: "rejected"}
	var client trace.SpanContext
	if _, sent := r.Header["Traceparent"]; sent {
		client = trace.SpanContextFromContext(clientPropagator.Extract(context.Background(), propagation.HeaderCarrier(r.Header)))
	}
	trusted := client.IsValid() && g.cfg.HTTP.TrustClientTraceparent
	if trusted {
		ctx = trace.ContextWithRemoteSpanContext(ctx, client)
	}
	if !telemetry.Recording() {
		// No span, but the trusted parent a body's _meta names still
		// travels on to the services and backends, as a header's does.
		rec.metaParent = g.cfg.HTTP.TrustClientTraceparent && !client.IsValid() && r.Method == http.MethodPost
		if !trusted {
			// A trace id all the same (telemetry.NewRoot): the request's
			// log lines, audit events and the id a client quotes of an
			// internal error name it in every service.
			ctx = trace.ContextWithSpanContext(ctx, telemetry.NewRoot())
		}
		return ctx, trace.SpanFromContext(ctx), rec
	}
	if g.cfg.HTTP.TrustClientTraceparent && !client.IsValid() && r.Method == http.MethodPost {
		// The body's _meta may carry the trusted parent (SEP-414): the
		// span starts once it is read, dated from now.
		rec.spanPending, rec.r = true, r
		return ctx, trace.SpanFromContext(ctx), rec
	}
	return g.openSpan(ctx, r, rec, client, trusted)
}

// openSpan starts the request's span, dated from the request's start: a
// child of the trusted client's span context, or a root of the gateway's
// own linked to an untrusted one.
func (g *Gateway) openSpan(ctx context.Context, r *http.Request, rec *requestRecord, client trace.SpanContext, trusted bool) (context.Context, trace.Span, *requestRecord) {
	rec.spanPending = false
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(rec.start),
		trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path))}
	if client.IsValid() && !trusted {
		opts = append(opts, trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: client}))
	}
	ctx, span := tracer.Start(ctx, "mcp "+r.Method, opts...)
	return ctx, span, rec
}

// joinMetaTrace takes the trace context a request's _meta carries
// (SEP-414: traceparent, tracestate) when its headers carried none, under
// the header's trust: gateway.http.trustClientTraceparent makes it the
// span's parent, else the span links to it.
func (g *Gateway) joinMetaTrace(ctx context.Context, span trace.Span, rec *requestRecord, params wire.Object) (context.Context, trace.Span) {
	var client trace.SpanContext
	if meta, ok := params.Object("_meta"); ok && (rec.spanPending || rec.metaParent || span.IsRecording()) {
		if tp, ok := meta.String("traceparent"); ok {
			carrier := propagation.MapCarrier{"traceparent": tp}
			if ts, ok := meta.String("tracestate"); ok {
				carrier["tracestate"] = ts
			}
			client = trace.SpanContextFromContext(clientPropagator.Extract(context.Background(), carrier))
		}
	}
	switch {
	case rec.metaParent:
		if client.IsValid() {
			ctx = trace.ContextWithRemoteSpanContext(ctx, client)
		}
		return ctx, span
	case !rec.spanPending:
		if client.IsValid() {
			span.AddLink(trace.Link{SpanContext: client})
		}
		return ctx, span
	}
	if client.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, client)
	}
	ctx, span, _ = g.openSpan(ctx, rec.r, rec, client, true)
	return ctx, span
}

func (g *Gateway) finishRequest(span trace.Span, rec *requestRecord) {
	if rec.spanPending {
		// Refused before its body was read: a span of its own.
		_, span, _ = g.openSpan(rec.r.Context(), rec.r, rec, trace.SpanContext{}, false)
		if rec.method != "" {
			rec.setMethod(span, rec.method)
		}
	}
	method := methodLabel(rec.method)
	era := rec.era.String()
	if rec.era == mcpspec.EraUnknown {
		// Requests without era markers are answered as Legacy ones.
		era = mcpspec.EraLegacy.String()
	}
	if span.IsRecording() {
		span.SetAttributes(attribute.String("mcp.outcome", rec.outcome))
		if rec.err != nil {
			// The conventions' error.type of a JSON-RPC error is its code.
			code := strconv.Itoa(rec.err.Code)
			span.SetAttributes(attribute.String("error.type", code), attribute.String("rpc.response.status_code", code))
		}
		if rec.outcome == "error" {
			// A server span's status is an error only for the service's
			// own failures, not for what the client got wrong.
			span.SetStatus(codes.Error, rec.outcome)
		}
		span.End()
	}
	g.metrics.requests.WithLabelValues(method, era, rec.outcome).Inc()
	g.metrics.latency.WithLabelValues(method, era).Observe(time.Since(rec.start).Seconds())
}
