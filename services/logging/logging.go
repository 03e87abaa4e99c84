// Package logging builds the slog logger every Switchboard process uses.
// Log records carry the trace and span ids of the request they belong to, so
// an error the client saw only as "internal error" can be found by trace id.
package logging

import (
	"context"
	"io"
	"log/slog"

	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// New returns a logger writing to w in the configured format and level, with
// the service name on every record.
func New(w io.Writer, cfg config.Logging, service string) *slog.Logger {
	// The values were validated at load (config.Logging.Validate).
	opts := &slog.HandlerOptions{Level: cfg.SlogLevel()}
	var h slog.Handler
	if cfg.TextFormat() {
		h = slog.NewTextHandler(w, opts)
	} else {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(traceHandler{h}).With("service", service)
}

// traceHandler adds trace_id and span_id from the record's context.
type traceHandler struct{ slog.Handler }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return traceHandler{h.Handler.WithAttrs(a)}
}
func (h traceHandler) WithGroup(n string) slog.Handler { return traceHandler{h.Handler.WithGroup(n)} }
