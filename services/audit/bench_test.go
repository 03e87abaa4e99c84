package audit

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/services/config"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// BenchmarkRecord is what the trail costs one call: the event made and
// queued on the call path (ns/op), and, in cpu-ns/op, that plus the
// background writer's digest, encoding and file write of it (this
// process's CPU over the run, the writer's flush at the end included).
// Compare cpu-ns/op with the aggregator's BenchmarkCallTool cpu-us/op.
func BenchmarkRecord(b *testing.B) {
	for _, mode := range []string{config.AuditDigest, config.AuditValues} {
		b.Run("arguments="+mode, func(b *testing.B) {
			w, err := New(Options{Service: "bench", Config: config.Audit{Sink: config.AuditFile, File: filepath.Join(b.TempDir(), "audit.jsonl"), Arguments: mode}})
			if err != nil {
				b.Fatal(err)
			}
			tid, _ := trace.TraceIDFromHex("0102030405060708090a0b0c0d0e0f10")
			ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{1}}))
			p := &commonv1.Principal{Subject: "alice", Groups: []string{"eng"}}
			b.ReportAllocs()
			start := cpu()
			for b.Loop() {
				e := Call(ctx, KindToolCall, p, time.Now())
				e.Server, e.Tool, e.Backend, e.RawArguments = "docs", "demo_tool_0042", "demo", `{"message":"hello","n":42}`
				e.Outcome = OutcomeOK
				e.Since(time.Now())
				w.Record(e)
				if len(w.queue) > cap(w.queue)/2 {
					// The benchmark outruns any call path: let the writer
					// catch up instead of counting drops.
					for len(w.queue) > 0 {
						time.Sleep(time.Millisecond)
					}
				}
			}
			w.Close()
			b.ReportMetric(float64(cpu()-start)/float64(b.N), "cpu-ns/op")
		})
	}
}

func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
