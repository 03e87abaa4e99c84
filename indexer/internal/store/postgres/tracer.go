package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// tracer makes one OTel span per SQL statement, a child of the gRPC
// request's span. It records the statement text (which never contains
// query text: that is always a bound parameter) and never the arguments.
type tracer struct{}

var otelTracer = otel.Tracer("github.com/switchboard-mcp/switchboard/indexer/store")

// TraceQueryStart implements pgx.QueryTracer.
func (tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	ctx, _ = otelTracer.Start(ctx, "postgresql.query", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("db.system", "postgresql"), attribute.String("db.statement", data.SQL)))
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (tracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	span := trace.SpanFromContext(ctx)
	if data.Err != nil {
		// PostgreSQL's message can quote the value it refused (22P02:
		// invalid input syntax for type integer: "..."): only its code
		// is recorded. Other errors (the connection's, a cancellation)
		// name no value.
		var pgErr *pgconn.PgError
		if errors.As(data.Err, &pgErr) {
			span.SetAttributes(attribute.String("db.response.status_code", pgErr.Code))
			span.SetStatus(codes.Error, "query failed: SQLSTATE "+pgErr.Code)
		} else {
			span.RecordError(data.Err)
			span.SetStatus(codes.Error, "query failed")
		}
	}
	span.SetAttributes(attribute.Int64("db.rows_affected", data.CommandTag.RowsAffected()))
	span.End()
}
