package audit

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// Sink receives batches of events from a goroutine of its own, one batch
// at a time. An error counts the batch as dropped for that sink.
type Sink interface {
	// Name labels the sink in metrics and logs (stdout, file, indexer).
	Name() string
	Write(ctx context.Context, batch []Event) error
	Close() error
}

// maxBatch bounds the events handed to a sink at once.
const maxBatch = 256

// dropLogEvery is the least time between two log lines about dropped
// events, so a full sink logs a line, not a flood.
const dropLogEvery = 10 * time.Second

// Writer takes events on the request path and writes them from the
// background. A nil *Writer records nothing, so a service without a trail
// pays one nil check per event.
type Writer struct {
	service  string
	queue    chan Event
	sinks    []*sinkQueue
	values   bool
	redactor *Redactor
	log      *slog.Logger
	metrics  *Metrics

	// dropped counts the events dropped since the last log line about
	// them; lastDropLog is that line's time (Unix nanoseconds).
	dropped     atomic.Int64
	lastDropLog atomic.Int64

	// flushEvery is how often the queue is written; wake asks for it
	// sooner.
	flushEvery time.Duration
	wake       chan struct{}

	// queuedBytes is what the events recorded and not yet written hold
	// (their client-chosen text and arguments, as queuedSize counts them);
	// Record drops an event that would take it past maxQueueBytes, so the
	// queue is bounded in memory, not only in count.
	queuedBytes   atomic.Int64
	maxQueueBytes int64

	// closed is set by Close: later events are counted as dropped
	// (reason shutdown) instead of waiting in a queue nobody reads.
	closed    atomic.Bool
	closeOnce sync.Once
	stop      chan struct{}
	done      chan struct{}
	// flushBy is when writing what is queued at Close gives up; set
	// before the sinks are told to stop.
	flushBy time.Time
}

// sinkQueue is one sink's backlog of prepared events, written by a
// goroutine of its own: a sink that hangs (an indexer behind a partition,
// each write waiting out its timeout) fills its own backlog and loses its
// own events, never the other sinks'.
type sinkQueue struct {
	sink  Sink
	queue chan Event
	// bytes is what the backlog holds (queuedSize of the prepared
	// events), at most maxBytes: the sinks' backlogs share MaxQueueBytes.
	bytes    atomic.Int64
	maxBytes int64
	wake     chan struct{}
	stop     chan struct{}
	done     chan struct{}
}

// Options make a Writer.
type Options struct {
	// Service is the Event.Service of every event.
	Service string
	// Config is the audit section.
	Config config.Audit
	// Sinks are written in addition to the one the configuration names
	// (the indexer's shipping or its own table).
	Sinks []Sink
	Log   *slog.Logger
	// Metrics, nil: NewMetrics(nil).
	Metrics *Metrics
	// FlushEvery is how often queued events are written; 0:
	// DefaultFlushEvery.
	FlushEvery time.Duration
}

// DefaultFlushEvery is how long an event waits in the queue at most
// (unless the queue fills up first). It bounds how far the trail lags
// behind the calls, and makes a busy process write a batch, not a line,
// at a time.
const DefaultFlushEvery = 100 * time.Millisecond

// New starts a writer for the configured sinks; with none (audit.sink:
// off and no Options.Sinks), it returns nil, which records nothing. Close
// flushes and stops it.
func New(o Options) (*Writer, error) {
	sinks := append([]Sink(nil), o.Sinks...)
	switch o.Config.EffectiveSink() {
	case config.AuditStdout:
		sinks = append(sinks, Stdout())
	case config.AuditFile:
		f, err := OpenFile(o.Config.File)
		if err != nil {
			return nil, err
		}
		sinks = append(sinks, f)
	}
	if len(sinks) == 0 {
		return nil, nil
	}
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	m := o.Metrics
	if m == nil {
		m = NewMetrics(nil)
	}
	w := &Writer{
		service: o.Service, queue: make(chan Event, o.Config.EffectiveQueueSize()),
		values: o.Config.EffectiveArguments() == config.AuditValues, redactor: NewRedactor(o.Config.AllRedactKeys()),
		log: log, metrics: m, stop: make(chan struct{}), done: make(chan struct{}),
		flushEvery: o.FlushEvery, wake: make(chan struct{}, 1), maxQueueBytes: MaxQueueBytes,
	}
	if w.flushEvery <= 0 {
		w.flushEvery = DefaultFlushEvery
	}
	for _, s := range sinks {
		q := &sinkQueue{sink: s, queue: make(chan Event, cap(w.queue)), maxBytes: MaxQueueBytes / int64(len(sinks)),
			wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
		w.sinks = append(w.sinks, q)
		go w.runSink(q)
	}
	m.writer.Store(w)
	go w.run()
	return w, nil
}

// MaxQueueBytes bounds what the events waiting to be written hold in all,
// their arguments included (a client's arguments can be megabytes each).
const MaxQueueBytes = 64 << 20

// Record queues e without waiting: a queue full in count (audit.queueSize)
// or in bytes (MaxQueueBytes) drops it, counts it in
// switchboard_audit_events_dropped_total{reason="queue_full"} and logs a
// line (at most one per dropLogEvery). Its Schema and Service are set
// here, its Time if unset, and its text is fitted to the trail's bounds
// (Fit) before it is queued, whatever the sinks: every client-chosen
// field is bounded in every sink, and a queued event keeps no client's
// megabyte alive but its arguments, which the byte bound counts.
func (w *Writer) Record(e Event) {
	if w == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	e.Schema, e.Service = Schema, w.service
	if w.closed.Load() {
		w.drop("queue", "shutdown", 1, nil)
		return
	}
	e = Fit(e)
	e.queuedSize = queuedSize(&e)
	if w.queuedBytes.Add(e.queuedSize) > w.maxQueueBytes {
		w.queuedBytes.Add(-e.queuedSize)
		w.drop("queue", "queue_full", 1, nil)
		return
	}
	select {
	case w.queue <- e:
		if len(w.queue) > cap(w.queue)/2 {
			select {
			case w.wake <- struct{}{}:
			default:
			}
		}
	default:
		w.queuedBytes.Add(-e.queuedSize)
		w.drop("queue", "queue_full", 1, nil)
	}
}

// queuedSize is what a queued event holds, roughly: its text and its
// raw arguments, and a fixed part for the rest.
func queuedSize(e *Event) int64 {
	n := 256 + len(e.RawArguments) + len(e.Subject) + len(e.Server) + len(e.Tool) + len(e.Resource) + len(e.Prompt) +
		len(e.Backend) + len(e.TraceID) + len(e.Session) + len(e.Caller) + len(e.Detail)
	for _, g := range e.Groups {
		n += len(g)
	}
	return int64(n)
}

// Enabled reports whether w records anything.
func (w *Writer) Enabled() bool { return w != nil }

// Close writes what is queued (for up to 5 s) and closes the sinks.
func (w *Writer) Close() {
	if w == nil {
		return
	}
	w.closeOnce.Do(func() {
		w.closed.Store(true)
		close(w.stop)
		<-w.done
		for _, q := range w.sinks {
			<-q.done
			if err := q.sink.Close(); err != nil {
				w.log.Warn("audit sink close failed", "sink", q.sink.Name(), "err", err)
			}
		}
	})
}

// run prepares what is queued every flushEvery, or sooner when the queue
// is half full, and hands it to the sinks' backlogs. It does not wait on
// the queue itself: a call that records an event then never wakes a
// goroutine, and a batch costs one write per sink however many calls it
// holds.
func (w *Writer) run() {
	defer close(w.done)
	batch := make([]Event, 0, maxBatch)
	tick := time.NewTicker(w.flushEvery)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-w.wake:
		case <-w.stop:
			// Flush: what was queued before Close.
			w.flushBy = time.Now().Add(5 * time.Second)
			for len(w.queue) > 0 && time.Now().Before(w.flushBy) {
				w.dispatch(fill(w.queue, batch[:0]))
			}
			if n := len(w.queue); n > 0 {
				w.drop("queue", "shutdown", n, nil)
			}
			for _, q := range w.sinks {
				close(q.stop)
			}
			return
		}
		for len(w.queue) > 0 {
			w.dispatch(fill(w.queue, batch[:0]))
		}
	}
}

// fill adds what queue holds now to batch, up to maxBatch.
func fill(queue chan Event, batch []Event) []Event {
	for len(batch) < maxBatch {
		select {
		case e := <-queue:
			batch = append(batch, e)
		default:
			return batch
		}
	}
	return batch
}

// dispatch prepares the arguments of a batch (off the request path), fits
// redacted ones to the trail's bounds (Record fitted the rest), and hands
// the batch to every sink's backlog; a backlog that is full loses the
// events it cannot take, counted under its sink's name.
func (w *Writer) dispatch(batch []Event) {
	for i := range batch {
		w.queuedBytes.Add(-batch[i].queuedSize)
		w.prepare(&batch[i])
		if batch[i].Arguments != nil {
			batch[i] = Fit(batch[i])
		}
		batch[i].queuedSize = queuedSize(&batch[i]) + int64(len(batch[i].Arguments))
	}
	for _, q := range w.sinks {
		lost := 0
		for _, e := range batch {
			if q.bytes.Add(e.queuedSize) > q.maxBytes {
				q.bytes.Add(-e.queuedSize)
				lost++
				continue
			}
			select {
			case q.queue <- e:
			default:
				q.bytes.Add(-e.queuedSize)
				lost++
			}
		}
		if lost > 0 {
			w.drop(q.sink.Name(), "queue_full", lost, nil)
		}
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

// runSink writes q's backlog to its sink as it comes, until Close.
func (w *Writer) runSink(q *sinkQueue) {
	defer close(q.done)
	batch := make([]Event, 0, maxBatch)
	for {
		select {
		case <-q.wake:
		case <-q.stop:
			for len(q.queue) > 0 && time.Now().Before(w.flushBy) {
				w.write(q, fill(q.queue, batch[:0]))
			}
			if n := len(q.queue); n > 0 {
				w.drop(q.sink.Name(), "shutdown", n, nil)
			}
			return
		}
		for len(q.queue) > 0 {
			w.write(q, fill(q.queue, batch[:0]))
		}
	}
}

// write hands one batch to q's sink.
func (w *Writer) write(q *sinkQueue, batch []Event) {
	for i := range batch {
		q.bytes.Add(-batch[i].queuedSize)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err := q.sink.Write(ctx, batch)
	cancel()
	if err != nil {
		w.drop(q.sink.Name(), "sink_error", len(batch), err)
		return
	}
	w.metrics.written.WithLabelValues(q.sink.Name()).Add(float64(len(batch)))
}

// prepare digests the raw arguments and, with values, redacts them.
func (w *Writer) prepare(e *Event) {
	if e.RawArguments == "" {
		return
	}
	raw := []byte(e.RawArguments)
	e.RawArguments = ""
	v, ok := decode(raw)
	if !ok {
		// Not JSON: the digest of its bytes, and no values.
		e.ArgumentsSHA256 = Digest(raw)
		return
	}
	e.ArgumentsSHA256 = digestOf(encode(v))
	// Only an object's members can be redacted, by name: any other value
	// (a code mode program's text, whose literals may hold a secret)
	// keeps its digest alone.
	if _, object := v.(map[string]any); w.values && object {
		e.Arguments = w.redactor.redactValue(v)
	}
}

// drop counts n events dropped for sink and logs it, rate-limited: one
// line per dropLogEvery with the count since the last line.
func (w *Writer) drop(sink, reason string, n int, err error) {
	w.metrics.dropped.WithLabelValues(sink, reason).Add(float64(n))
	total := w.dropped.Add(int64(n))
	now := time.Now().UnixNano()
	last := w.lastDropLog.Load()
	if now-last < int64(dropLogEvery) || !w.lastDropLog.CompareAndSwap(last, now) {
		return
	}
	w.dropped.Add(-total)
	attrs := []any{"sink", sink, "reason", reason, "dropped", total, "since", fmt.Sprint(dropLogEvery)}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	w.log.Error("audit events dropped: the trail is incomplete (switchboard_audit_events_dropped_total)", attrs...)
}

// Metrics are the writer's:
//
//	switchboard_audit_events_written_total{sink}
//	switchboard_audit_events_dropped_total{sink, reason}
//	switchboard_audit_queue_length
type Metrics struct {
	written *prometheus.CounterVec
	dropped *prometheus.CounterVec
	queued  prometheus.GaugeFunc
	writer  atomic.Pointer[Writer]
}

// NewMetrics registers the writer's metrics with reg (nil: not exported).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		written: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_audit_events_written_total",
			Help: "Audit events written, by sink.",
		}, []string{"sink"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_audit_events_dropped_total",
			Help: "Audit events lost, by sink and reason: queue_full (the process's queue was full, sink \"queue\": no sink got it; or that sink's backlog was), shutdown (still queued at exit), sink_error (that sink failed to write it).",
		}, []string{"sink", "reason"}),
	}
	m.queued = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchboard_audit_queue_length",
		Help: "Audit events waiting to be written.",
	}, func() float64 {
		if w := m.writer.Load(); w != nil {
			return float64(len(w.queue))
		}
		return 0
	})
	// The queue's drops exist from the start, so an alert on them needs
	// no first drop to be defined.
	m.dropped.WithLabelValues("queue", "queue_full")
	if reg != nil {
		reg.MustRegister(m.written, m.dropped, m.queued)
	}
	return m
}
