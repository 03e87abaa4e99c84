package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/services/config"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

func TestCanonicalIgnoresOrderAndSpacing(t *testing.T) {
	a := `{"b": [1, {"y":2,"x":"<&>"}], "a": 1.50}`
	b := "{\n\"a\":1.50,\"b\":[1,{\"x\":\"\\u003c&>\",\"y\":2}]}"
	ca, ok := Canonical([]byte(a))
	if !ok {
		t.Fatal("not canonical")
	}
	if want := `{"a":1.50,"b":[1,{"x":"<&>","y":2}]}`; string(ca) != want {
		t.Fatalf("canonical = %s, want %s", ca, want)
	}
	if Digest([]byte(a)) != Digest([]byte(b)) {
		t.Fatal("the same value has two digests")
	}
	sum := sha256.Sum256(ca)
	if got := Digest([]byte(a)); got != hex.EncodeToString(sum[:]) {
		t.Fatalf("digest = %s, want the SHA-256 of the canonical JSON", got)
	}
	if Digest([]byte(`{"a":1}`)) == Digest([]byte(`{"a":2}`)) {
		t.Fatal("different values share a digest")
	}
	if Digest(nil) != "" || Digest([]byte("  ")) != "" {
		t.Fatal("no arguments have a digest")
	}
	for _, bad := range []string{`{"a":`, `{} {}`, `nope`} {
		if _, ok := Canonical([]byte(bad)); ok {
			t.Errorf("Canonical(%q) accepted", bad)
		}
		sum := sha256.Sum256([]byte(bad))
		if Digest([]byte(bad)) != hex.EncodeToString(sum[:]) {
			t.Errorf("Digest(%q) is not that of its bytes", bad)
		}
	}
}

func TestRedactAtAnyDepth(t *testing.T) {
	r := NewRedactor(config.Audit{RedactKeys: []string{"ssn"}}.AllRedactKeys())
	out := r.Redact([]byte(`{"q":"hello","API_Token":"tok-123","nested":{"password":"hunter2","list":[{"SSN":"078-05-1120"}]}}`))
	if out == nil {
		t.Fatal("no redacted arguments")
	}
	for _, secret := range []string{"tok-123", "hunter2", "078-05-1120"} {
		if bytes.Contains(out, []byte(secret)) {
			t.Errorf("%s survived redaction: %s", secret, out)
		}
	}
	if want := `{"API_Token":"[redacted]","nested":{"list":[{"SSN":"[redacted]"}],"password":"[redacted]"},"q":"hello"}`; string(out) != want {
		t.Fatalf("redacted = %s, want %s", out, want)
	}
	if r.Redact([]byte(`{"a":`)) != nil {
		t.Fatal("invalid JSON kept")
	}
	big := `{"a":"` + strings.Repeat("x", maxArgumentsBytes) + `"}`
	if r.Redact([]byte(big)) != nil {
		t.Fatal("oversized arguments kept")
	}
}

func TestEventEncoding(t *testing.T) {
	var buf bytes.Buffer
	w := newTestWriter(t, config.Audit{Arguments: config.AuditValues}, NewJSONLines("test", &buf), nil)
	tid, _ := trace.TraceIDFromHex("0102030405060708090a0b0c0d0e0f10")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{1}}))
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	e := Call(ctx, KindToolCall, &commonv1.Principal{Subject: "alice", Groups: []string{"eng"}}, start)
	e.Server, e.Tool, e.Backend, e.Outcome = "docs", "search", "docs-backend", OutcomeDenied
	e.RawArguments = `{"q":"x","token":"s3cret"}`
	e.Since(start.Add(1500 * time.Microsecond))
	w.Record(e)
	w.Close()
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("not one JSON line: %q: %v", buf.String(), err)
	}
	want := map[string]any{
		"schema": Schema, "time": "2026-12-01T10:00:00Z", "service": "test-service", "kind": "tool_call", "outcome": "denied",
		"subject": "alice", "groups": []any{"eng"}, "server": "docs", "tool": "search", "backend": "docs-backend",
		"latency_ms": 1.5, "trace_id": "0102030405060708090a0b0c0d0e0f10",
		"arguments_sha256": Digest([]byte(`{"q":"x","token":"s3cret"}`)),
		"arguments":        map[string]any{"q": "x", "token": Redacted},
	}
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Fatalf("event\n got %s\nwant %s", gotJSON, wantJSON)
	}
	if strings.Count(buf.String(), "\n") != 1 || strings.Contains(buf.String(), "s3cret") {
		t.Fatalf("line = %q", buf.String())
	}
}

// TestValuesOnlyOfObjects: with audit.arguments: values, arguments that
// are not an object (a code mode program, one JSON string) keep their
// digest alone, since nothing in them can be redacted by name; a
// program's string literal once reached the trail whole.
func TestValuesOnlyOfObjects(t *testing.T) {
	var buf bytes.Buffer
	w := newTestWriter(t, config.Audit{Arguments: config.AuditValues}, NewJSONLines("test", &buf), nil)
	program := `"result = weather(city=\"Oslo\", api_token=\"hunter2-s3cret\")"`
	w.Record(Event{Kind: KindCodeRun, Outcome: OutcomeOK, RawArguments: program})
	w.Close()
	var got Event
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.ArgumentsSHA256 != Digest([]byte(program)) || got.Arguments != nil || strings.Contains(buf.String(), "s3cret") {
		t.Fatalf("a program's event: %s", buf.String())
	}
}

func TestDigestModeRecordsNoValues(t *testing.T) {
	var buf bytes.Buffer
	w := newTestWriter(t, config.Audit{}, NewJSONLines("test", &buf), nil)
	w.Record(Event{Kind: KindToolCall, Outcome: OutcomeOK, RawArguments: `{"q":"visible-only-as-digest"}`})
	w.Close()
	if strings.Contains(buf.String(), "visible-only-as-digest") || !strings.Contains(buf.String(), `"arguments_sha256":"`) {
		t.Fatalf("line = %q", buf.String())
	}
}

// blockingSink holds every write until released.
type blockingSink struct {
	release chan struct{}
	mu      sync.Mutex
	got     int
}

func (b *blockingSink) Name() string { return "blocking" }
func (b *blockingSink) Write(_ context.Context, batch []Event) error {
	<-b.release
	b.mu.Lock()
	b.got += len(batch)
	b.mu.Unlock()
	return nil
}
func (b *blockingSink) Close() error { return nil }

func TestRecordNeverBlocksAndCountsDrops(t *testing.T) {
	sink := &blockingSink{release: make(chan struct{})}
	m := NewMetrics(prometheus.NewRegistry())
	w := newTestWriter(t, config.Audit{QueueSize: 4}, sink, m)
	const n = 1000
	start := time.Now()
	for range n {
		w.Record(Event{Kind: KindToolCall, Outcome: OutcomeOK})
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("%d records took %v with a stuck sink", n, d)
	}
	// At most the queue, the sink's backlog and the batch the sink holds
	// were kept.
	dropped := testutil.ToFloat64(m.dropped.WithLabelValues("queue", "queue_full")) +
		testutil.ToFloat64(m.dropped.WithLabelValues("blocking", "queue_full"))
	if dropped < n-4-4-maxBatch {
		t.Fatalf("dropped = %v, want at least %d", dropped, n-4-4-maxBatch)
	}
	close(sink.release)
	w.Close()
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if float64(sink.got)+dropped != n {
		t.Fatalf("written %d + dropped %v != %d: an event was lost silently", sink.got, dropped, n)
	}
}

type failingSink struct{}

func (failingSink) Name() string                         { return "failing" }
func (failingSink) Write(context.Context, []Event) error { return errors.New("disk full") }
func (failingSink) Close() error                         { return nil }

func TestFailingSinkCountsDropsAndLogsOnce(t *testing.T) {
	var logs bytes.Buffer
	m := NewMetrics(prometheus.NewRegistry())
	w, err := New(Options{Service: "test-service", Sinks: []Sink{failingSink{}}, Metrics: m,
		Log: slogTo(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		w.Record(Event{Kind: KindConfigReload, Outcome: OutcomeOK})
	}
	w.Close()
	if got := testutil.ToFloat64(m.dropped.WithLabelValues("failing", "sink_error")); got != 10 {
		t.Fatalf("dropped = %v, want 10", got)
	}
	if c := strings.Count(logs.String(), "audit events dropped"); c != 1 {
		t.Fatalf("%d log lines about drops, want 1 (rate-limited): %s", c, logs.String())
	}
}

func TestOffIsNil(t *testing.T) {
	w, err := New(Options{Config: config.Audit{Sink: config.AuditOff}})
	if err != nil || w != nil {
		t.Fatalf("New(off) = %v, %v; want nil, nil", w, err)
	}
	w.Record(Event{}) // a nil writer records nothing and does not panic
	w.Close()
}

func TestConfigValidate(t *testing.T) {
	for _, a := range []config.Audit{{Sink: "syslog"}, {Sink: "file"}, {File: "x"}, {Arguments: "all"}, {RedactKeys: []string{"["}},
		{QueueSize: -1}, {Retention: config.Duration(time.Minute)}} {
		if a.Validate() == nil {
			t.Errorf("%+v accepted", a)
		}
	}
	if err := (config.Audit{Sink: "file", File: "audit.jsonl", Arguments: "values", Retention: config.Duration(48 * time.Hour)}).Validate(); err != nil {
		t.Fatal(err)
	}
}

func newTestWriter(t *testing.T, cfg config.Audit, sink Sink, m *Metrics) *Writer {
	t.Helper()
	w, err := New(Options{Service: "test-service", Config: cfg, Sinks: []Sink{sink}, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w
}

func TestRedactorPatternForms(t *testing.T) {
	r := NewRedactor([]string{"*secret*", "api*", "*_pin", "ssn", "card[0-9]"})
	for name, want := range map[string]bool{
		"MySecretValue": true, "apiKey": true, "user_pin": true, "SSN": true, "card7": true,
		"apis": true, "pin_user": false, "ssnx": false, "cardx": false, "query": false,
	} {
		for range 2 { // the second answer comes from the cache
			if got := r.Matches(name); got != want {
				t.Errorf("Matches(%q) = %v, want %v", name, got, want)
			}
		}
	}
}

// TestDefaultRedactionNames: the built-in patterns match the names
// credentials commonly go by, separators or not, and leave alike names
// that carry none.
func TestDefaultRedactionNames(t *testing.T) {
	r := NewRedactor(config.Audit{}.AllRedactKeys())
	for name, want := range map[string]bool{
		"api-key": true, "X-Api-Key": true, "api_key": true, "API Key": true, "passphrase": true, "access_key": true,
		"AWS.AccessKey": true, "pwd": true, "db_pwd": true, "auth": true, "basic_auth": true, "OAuth": true,
		"client_secret": true, "refresh-token": true,
		"author": false, "authors": false, "query": false, "cwd": false, "path": false, "keyword": false,
	} {
		if got := r.Matches(name); got != want {
			t.Errorf("Matches(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestRecordAfterCloseIsCounted(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	var buf bytes.Buffer
	w := newTestWriter(t, config.Audit{}, NewJSONLines("test", &buf), m)
	w.Close()
	w.Record(Event{Kind: KindSessionEnd, Outcome: OutcomeOK})
	if got := testutil.ToFloat64(m.dropped.WithLabelValues("queue", "shutdown")); got != 1 {
		t.Fatalf("dropped after close = %v, want 1", got)
	}
}

// The queue is bounded in bytes as well as in count: events whose
// arguments are a megabyte each stop being queued once MaxQueueBytes is
// held (the sink stuck), however large audit.queueSize, and none is lost
// silently.
func TestQueueBoundedInBytes(t *testing.T) {
	sink := &blockingSink{release: make(chan struct{})}
	m := NewMetrics(prometheus.NewRegistry())
	w := newTestWriter(t, config.Audit{QueueSize: 100_000}, sink, m)
	args := `{"blob":"` + strings.Repeat("x", 1<<20) + `"}`
	const n = 200
	for range n {
		w.Record(Event{Kind: KindToolCall, Outcome: OutcomeOK, RawArguments: args})
	}
	kept := MaxQueueBytes / (1 << 20)
	dropped := testutil.ToFloat64(m.dropped.WithLabelValues("queue", "queue_full"))
	if dropped < float64(n-kept) {
		t.Fatalf("dropped = %v of %d megabyte events, want at least %d (%d MiB queued at most)", dropped, n, n-kept, kept)
	}
	close(sink.release)
	w.Close()
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if float64(sink.got)+dropped != n {
		t.Fatalf("written %d + dropped %v != %d: an event was lost silently", sink.got, dropped, n)
	}
	if q := w.queuedBytes.Load(); q != 0 {
		t.Fatalf("%d bytes still counted as queued after every event was written", q)
	}
}

// Every sink gets events within the trail's bounds, whatever service
// recorded them: a megabyte tool name and subject are cut before the
// event is queued, and the line says so.
func TestEverySinkGetsBoundedEvents(t *testing.T) {
	var buf bytes.Buffer
	w := newTestWriter(t, config.Audit{}, NewJSONLines("test", &buf), nil)
	huge := strings.Repeat("n", 1<<20)
	w.Record(Event{Kind: KindToolCall, Outcome: OutcomeNotFound, Tool: huge, Subject: huge})
	w.Close()
	line := buf.String()
	if len(line) > 4*MaxFieldBytes || !strings.Contains(line, "cut to the audit table's bounds") {
		t.Fatalf("a %d-byte line: %.200s", len(line), line)
	}
}

// A sink that hangs (an indexer behind a partition, a PostgreSQL that
// does not answer: each write waits out its 10 s) loses events of its
// own only: the other sinks keep getting every event, at their pace,
// and what the slow one could not take is counted under its name.
func TestSlowSinkLosesOnlyItsOwnEvents(t *testing.T) {
	stuck := &blockingSink{release: make(chan struct{})}
	var buf bytes.Buffer
	m := NewMetrics(prometheus.NewRegistry())
	w, err := New(Options{Service: "test-service", Config: config.Audit{QueueSize: 16}, Metrics: m, FlushEvery: time.Millisecond,
		Sinks: []Sink{stuck, NewJSONLines("file", &buf)}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	lines := func() int {
		w.Close()
		return strings.Count(buf.String(), "\n")
	}
	release := sync.OnceFunc(func() { close(stuck.release) })
	t.Cleanup(release)
	for i := range n {
		w.Record(Event{Kind: KindToolCall, Outcome: OutcomeOK, Detail: strconv.Itoa(i)})
		// A call path no faster than the writer: the queue never fills
		// for want of being read.
		testkit.Eventually(t, "the writer takes what is queued", 2*time.Second, func() bool { return len(w.queue) == 0 })
	}
	release()
	if got := lines(); got != n {
		t.Fatalf("the file sink got %d of %d events while another sink hung", got, n)
	}
	if got := testutil.ToFloat64(m.dropped.WithLabelValues("queue", "queue_full")); got != 0 {
		t.Fatalf("%v events dropped for every sink, want none", got)
	}
	stuck.mu.Lock()
	defer stuck.mu.Unlock()
	if lost := testutil.ToFloat64(m.dropped.WithLabelValues("blocking", "queue_full")); float64(stuck.got)+lost != n || lost == 0 {
		t.Fatalf("the hung sink wrote %d and lost %v of %d", stuck.got, lost, n)
	}
}
